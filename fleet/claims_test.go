package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/jackc/pgx/v5/pgxpool"
)

// claimsFunder applies each submission as its request arrives, counted by
// Idempotency-Key, and answers 201; a submission whose key slow picks is
// answered only after hold, or when the client goes away. GET
// /submissions/KEY says whether it has KEY (200) or not (404): what a
// reconciler asks.
type claimsFunder struct {
	srv  *httptest.Server
	hold time.Duration
	slow func(key string) bool

	mu      sync.Mutex
	seen    map[string]int
	arrived chan string // each slow submission's key, as it arrives
}

func newClaimsFunder(t *testing.T, hold time.Duration, slow func(string) bool) *claimsFunder {
	f := &claimsFunder{hold: hold, slow: slow, seen: map[string]int{}, arrived: make(chan string, 1000)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := strings.CutPrefix(r.URL.Path, "/submissions/"); ok && r.Method == http.MethodGet {
			if f.count(key) == 0 {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		key := r.Header.Get(grantretry.HeaderIdempotencyKey)
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.seen[key]++
		f.mu.Unlock()
		if f.slow != nil && f.slow(key) {
			f.arrived <- key
			select {
			case <-time.After(f.hold):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *claimsFunder) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[key]
}

func (f *claimsFunder) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.seen))
	for k, v := range f.seen {
		m[k] = v
	}
	return m
}

// reconcile asks the funder whether it has the submission, as a
// pipeline's reconciler would.
func (f *claimsFunder) reconcile(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/submissions/"+q.IdempotencyKey, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("asked, answered %d", resp.StatusCode)
	}
	return resp, nil
}

// waiting returns how many letters wait, or -1 (and reports why) if List
// failed; workers' goroutines call it, so it never calls t.Fatal.
func waiting(t *testing.T, s *Letters) int {
	t.Helper()
	ls, err := s.List(context.Background())
	if err != nil {
		t.Error(err)
		return -1
	}
	return len(ls)
}

// Sixteen workers race over 1,000 letters, four claimed at a time, against
// a funder that answers one in fifty only after three leases: each of
// those sends is cut before its lease ends, and the letter, now
// ambiguous, is asked about before anyone sends it again. A claim that
// waited past its lease behind a slow send is not sent.
func TestLettersSentOnceBySixteenWorkersWhenSomeAnswerSlowerThanTheLease(t *testing.T) {
	const workers, letters = 16, 1000
	const lease = time.Second
	pool := newPool(t)
	slow := func(key string) bool { return strings.HasSuffix(key, "00") || strings.HasSuffix(key, "50") }
	f := newClaimsFunder(t, 3*lease, slow)
	s := NewLetters(pool, WithLimit(5*time.Second), WithLease(lease))
	ctx := context.Background()
	for i := range letters {
		if err := s.PutDeadLetter(ctx, testLetter(f.srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	var cut, lost atomic.Int32
	var wg sync.WaitGroup
	stop := time.Now().Add(15 * time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("worker-%d", w)
			for time.Now().Before(stop) {
				claims, err := s.Claim(ctx, name, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if len(claims) == 0 {
					if waiting(t, s) <= 0 {
						return
					}
					time.Sleep(10 * time.Millisecond) // letters leased to others may come back
					continue
				}
				for _, c := range claims {
					_, err := s.Redeliver(ctx, c, f.srv.Client(), f.reconcile)
					switch {
					case err == nil:
					case errors.Is(err, context.DeadlineExceeded) && errors.Is(err, ErrLeaseLost):
						cut.Add(1)
					case errors.Is(err, ErrLeaseLost):
						lost.Add(1)
					default:
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	seen := f.counts()
	if len(seen) != letters {
		t.Errorf("the funder received %d distinct letters, want %d", len(seen), letters)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("letter %s received %d times", k, n)
		}
	}
	if n := waiting(t, s); n != 0 {
		t.Errorf("%d letters still waiting", n)
	}
	if cut.Load() == 0 {
		t.Errorf("no send was cut at its lease: the slow answers did not test it")
	}
	t.Logf("sends cut at their lease: %d; claims lost before sending: %d", cut.Load(), lost.Load())
}

// A claim whose lease ended is not sent, even if nobody claimed the letter
// since: Redeliver cannot confirm it.
func TestLettersRedeliverSendsNothingWhenTheClaimCannotBeConfirmed(t *testing.T) {
	pool := newPool(t)
	f := newClaimsFunder(t, 0, nil)
	const lease = 300 * time.Millisecond
	s := NewLetters(pool, WithLimit(5*time.Second), WithLease(lease))
	ctx := context.Background()
	for i := range 2 {
		if err := s.PutDeadLetter(ctx, testLetter(f.srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := s.Claim(ctx, "late", 2)
	if err != nil || len(claims) != 2 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	// The first: another worker took it after the lease. The second:
	// nobody did; the lease ended all the same.
	var other []*Claim
	for deadline := time.Now().Add(10 * lease); len(other) == 0 && time.Now().Before(deadline); {
		time.Sleep(lease / 10) // the lease runs on the database's clock
		if other, err = s.ClaimIDs(ctx, "other", []string{claims[0].Letter.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if len(other) != 1 {
		t.Fatal("the letter was not claimed again after the lease")
	}
	for _, c := range claims {
		if _, err := s.Redeliver(ctx, c, f.srv.Client(), nil); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Redeliver of %s on an ended lease: %v, want ErrLeaseLost", c.Letter.ID, err)
		}
	}
	if seen := f.counts(); len(seen) != 0 {
		t.Fatalf("the funder received %v; want nothing sent on an unconfirmed claim", seen)
	}
	if _, err := s.Redeliver(ctx, other[0], f.srv.Client(), nil); err != nil {
		t.Fatal(err)
	}
	if n := f.count(claims[0].Letter.IdempotencyKey); n != 1 {
		t.Fatalf("the letter received %d times, want 1", n)
	}
}

// A worker dies with its send in flight: its pool is gone, so it can
// neither release nor finish the letter. After the lease the letter is
// claimed again as ambiguous, and a reconciler finds the funder has it.
func TestLettersOfAWorkerKilledMidSendAreClaimedAgainAsAmbiguous(t *testing.T) {
	pool := newPool(t)
	const lease = time.Second
	f := newClaimsFunder(t, time.Minute, func(string) bool { return true })
	s := NewLetters(pool, WithLimit(5*time.Second), WithLease(lease))
	ctx := context.Background()
	l := testLetter(f.srv.URL, 3)
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}

	// The dying worker has a pool of its own, as a process would.
	dyingPool, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	dying := NewLetters(dyingPool, WithLease(lease))
	claims, err := dying.Claim(ctx, "dies", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	dyingCtx, die := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := dying.Redeliver(dyingCtx, claims[0], f.srv.Client(), nil)
		done <- err
	}()
	<-f.arrived       // the send is on the wire
	dyingPool.Close() // the process dies: its connections go
	die()             // and so does its request
	if err := <-done; err == nil {
		t.Fatal("the dying worker's Redeliver succeeded")
	}

	if c, err := s.Claim(ctx, "other", 1); err != nil || len(c) != 0 {
		t.Fatalf("Claim while the dead worker's lease runs: %d, %v", len(c), err)
	}
	var again []*Claim
	for deadline := time.Now().Add(10 * lease); len(again) == 0 && time.Now().Before(deadline); {
		time.Sleep(lease / 10)
		if again, err = s.Claim(ctx, "other", 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(again) != 1 {
		t.Fatal("the letter was not claimed again after the lease")
	}
	if c := again[0]; !c.InFlight || !c.Letter.Ambiguous {
		t.Fatalf("claimed again: InFlight %v, Ambiguous %v; want both", c.InFlight, c.Letter.Ambiguous)
	}
	if got, _, err := s.Get(ctx, l.ID); err != nil || !got.Ambiguous {
		t.Fatalf("Get: ambiguous %v, %v; want the database to keep it ambiguous", got != nil && got.Ambiguous, err)
	}
	r, err := s.Redeliver(ctx, again[0], f.srv.Client(), f.reconcile)
	if err != nil || !strings.HasPrefix(r.Note, "reconciled") {
		t.Fatalf("Redeliver with a reconciler: %+v, %v; want it reconciled", r, err)
	}
	if n := f.count(l.IdempotencyKey); n != 1 {
		t.Fatalf("the letter received %d times, want 1", n)
	}
}

// A database migrated before the send marker existed gets it from Migrate,
// with the letters it holds.
func TestMigrateAddsTheSendMarkerToAnAlreadyMigratedDatabase(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	s := NewLetters(pool, WithLimit(5*time.Second))
	if err := s.PutDeadLetter(ctx, testLetter("http://funder.example", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE grantretry_letters DROP COLUMN sending_since`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "w", 1); err == nil {
		t.Fatal("Claim without the column succeeded: the test does not test the migration")
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "w", 1); err != nil || len(c) != 1 {
		t.Fatalf("Claim after Migrate: %d, %v", len(c), err)
	}
}

// Every error of Letters about a claim starts with the package's prefix,
// as its other errors do, and those of a lost lease still match
// ErrLeaseLost.
func TestLettersClaimErrorsStartWithTheFleetPrefix(t *testing.T) {
	pool := newPool(t)
	f := newClaimsFunder(t, 0, nil)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	if err := s.PutDeadLetter(ctx, testLetter(f.srv.URL, 0)); err != nil {
		t.Fatal(err)
	}
	claims, err := s.Claim(ctx, "mine", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	// A claim fenced off: the token of an earlier claim of the letter.
	stale := *claims[0]
	stale.Token--
	_, redeliverErr := s.Redeliver(ctx, &stale, f.srv.Client(), nil)
	for what, err := range map[string]error{
		"Done":      s.Done(ctx, &stale, deadletter.Redelivery{Status: 201}),
		"Release":   s.Release(ctx, &stale),
		"Redeliver": redeliverErr,
	} {
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s of a fenced claim: %v, want ErrLeaseLost", what, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "grantretry: fleet: letter "+stale.Letter.ID) || strings.Count(msg, "grantretry: ") != 1 {
			t.Errorf("%s of a fenced claim: %q, want it to start with the package's prefix, once, and name the letter", what, err)
		}
	}
	if seen := f.counts(); len(seen) != 0 {
		t.Errorf("the funder received %v on a fenced claim", seen)
	}
}
