package fleet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

func TestLettersRedeliveredExactlyOnceBySixteenWorkers(t *testing.T) {
	const workers, letters = 16, 1000
	pool := newPool(t)
	f := newFunder(t)
	s := NewLetters(pool, WithLimit(time.Second))
	ctx := context.Background()
	for i := range letters {
		if err := s.PutDeadLetter(ctx, testLetter(f.srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	done := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("worker-%d", w)
			for {
				claims, err := s.Claim(ctx, name, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if len(claims) == 0 {
					return
				}
				for _, c := range claims {
					if _, err := s.Redeliver(ctx, c, f.srv.Client(), nil); err != nil {
						t.Error(err)
						return
					}
					done[w]++
				}
			}
		}()
	}
	wg.Wait()
	seen := f.counts()
	if len(seen) != letters {
		t.Fatalf("the funder saw %d distinct letters, want %d", len(seen), letters)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("letter %s sent %d times", k, n)
		}
	}
	left, err := s.List(ctx)
	if err != nil || len(left) != 0 {
		t.Fatalf("List after the run: %d letters, %v", len(left), err)
	}
	busy := 0
	for _, n := range done {
		if n > 0 {
			busy++
		}
	}
	t.Logf("letters per worker: %v (%d of %d workers took some)", done, busy, workers)
}

func TestLettersOfAWorkerThatDiedAreClaimedAgainAfterTheLease(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	const lease = 300 * time.Millisecond
	// The limit is not what this test is about: a loaded machine (-race,
	// other packages' tests) can take the insert past the default 5 ms.
	s := NewLetters(pool, WithLease(lease), WithLimit(time.Second))
	ctx := context.Background()
	if err := s.PutDeadLetter(ctx, testLetter(f.srv.URL, 1)); err != nil {
		t.Fatal(err)
	}
	dead, err := s.Claim(ctx, "dies", 1)
	if err != nil || len(dead) != 1 {
		t.Fatalf("Claim: %d, %v", len(dead), err)
	}
	// The worker "dies" holding the lease: nobody else gets the letter
	// until the lease ends.
	if other, err := s.Claim(ctx, "other", 1); err != nil || len(other) != 0 {
		t.Fatalf("Claim under another's lease: %d, %v", len(other), err)
	}
	var again []*Claim
	deadline := time.Now().Add(10 * lease)
	for len(again) == 0 && time.Now().Before(deadline) {
		time.Sleep(lease / 10) // the lease runs on the database's clock
		if again, err = s.Claim(ctx, "other", 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(again) != 1 || again[0].Letter.ID != dead[0].Letter.ID {
		t.Fatalf("the letter was not claimed again after the lease")
	}
	if _, err := s.Redeliver(ctx, again[0], f.srv.Client(), nil); err != nil {
		t.Fatal(err)
	}
	// The worker comes back from the dead: its claim is fenced off.
	if err := s.Done(ctx, dead[0], deadletter.Redelivery{Status: 201}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Done on a lost lease: %v, want ErrLeaseLost", err)
	}
	_, r, err := s.Get(ctx, dead[0].Letter.ID)
	if err != nil || r == nil || r.Status != http.StatusCreated {
		t.Fatalf("Get: %+v, %v", r, err)
	}
}

func TestLettersFallBackToALocalDirectoryWhenTheDatabaseIsAway(t *testing.T) {
	pool := newPool(t)
	dir, err := deadletter.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewLetters(pool, WithFallback(dir))
	lettersAway(t, pool)
	l := testLetter("http://funder.example", 7)
	err = s.PutDeadLetter(context.Background(), l)
	var fe *FallbackError
	if !errors.As(err, &fe) || fe.Dir != dir.Path() {
		t.Fatalf("PutDeadLetter with the database away: %v, want a FallbackError naming %s", err, dir.Path())
	}
	if _, err := dir.Get(l.ID); err != nil {
		t.Fatalf("the letter is not in the fallback directory: %v", err)
	}
}

func TestLettersThroughATransportKeepRecordErrWhenFallingBack(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	dir, err := deadletter.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewLetters(pool, WithFallback(dir), WithLimit(time.Second))
	down := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	tr := grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		rec := newRecorder()
		down.ServeHTTP(rec, r)
		return rec.result(r), nil
	}), grantretry.WithBudget(0, time.Minute), grantretry.WithDeadLetter(s), grantretry.WithoutBreaker())
	call := func() grantretry.Outcome {
		ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-1")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/submit", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		out, _ := grantretry.OutcomeOf(resp)
		return out
	}
	out := call()
	if out.DeadLetterID == "" || out.RecordErr != nil {
		t.Fatalf("with the database up: letter %q, RecordErr %v", out.DeadLetterID, out.RecordErr)
	}
	if ls, err := s.List(context.Background()); err != nil || len(ls) != 1 {
		t.Fatalf("List: %d, %v", len(ls), err)
	}
	lettersAway(t, pool)
	out = call()
	var fe *FallbackError
	if !errors.As(out.RecordErr, &fe) || fe.Dir == "" {
		t.Fatalf("with the database away: RecordErr %v, want a FallbackError", out.RecordErr)
	}
	if _, err := dir.Get(fe.ID); err != nil {
		t.Fatal(err)
	}
	if out.DeadLetterID != fe.ID {
		t.Errorf("DeadLetterID %q, want the fallback's letter %q", out.DeadLetterID, fe.ID)
	}
	// The caller reads that the letter is kept, where, and why not in
	// the database; not that it was lost.
	msg := out.RecordErr.Error()
	want := "kept in the local directory at " + filepath.Join(dir.Path(), fe.ID+".json") + " because the database insert failed: "
	if !strings.Contains(msg, want) || strings.Contains(msg, "not kept") {
		t.Errorf("RecordErr %q, want it to say %q and not \"not kept\"", msg, want)
	}
	if _, err := os.Stat(fe.KeptAt()); err != nil {
		t.Errorf("KeptAt %s: %v", fe.KeptAt(), err)
	}
}

// A letter neither the database nor a fallback took is reported as not
// kept, naming the fallback directory that failed, if there is one.
func TestLettersNotKeptAnywhereSayWhy(t *testing.T) {
	readOnly, err := deadletter.OpenReadOnly(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		fallback *deadletter.Dir
		says     string
	}{
		{"no fallback", nil, "the database insert failed, and there is no fallback directory: "},
		{"fallback failed", readOnly, "the database insert failed, and so did the write to the local directory " + readOnly.Path() + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t)
			var opts []Option
			if tc.fallback != nil {
				opts = append(opts, WithFallback(tc.fallback))
			}
			s := NewLetters(pool, opts...)
			lettersAway(t, pool)
			err := s.PutDeadLetter(context.Background(), testLetter("http://funder.example", 8))
			var fe *FallbackError
			if !errors.As(err, &fe) || fe.Dir != "" || fe.KeptAt() != "" {
				t.Fatalf("PutDeadLetter: %v, want a FallbackError that kept it nowhere", err)
			}
			if tc.fallback != nil && !errors.Is(err, fs.ErrPermission) {
				t.Errorf("%v does not wrap the fallback directory's error", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "not kept: "+tc.says) {
				t.Errorf("error %q, want it to say \"not kept: %s\"", msg, tc.says)
			}
		})
	}
}
