package deadletter_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// seedDir writes l into a new directory and returns it.
func seedDir(t *testing.T, l *grantretry.Letter) *deadletter.Dir {
	t.Helper()
	d, err := deadletter.Open(filepath.Join(t.TempDir(), "letters"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutDeadLetter(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return d
}

// While a letter's redelivery is on the wire it is marked in flight: a
// process that reads the directory then (one that finds it after the
// sender was killed) sees the letter ambiguous. Once the funder has it
// the mark stays until MarkRedelivered, which removes it.
func TestDirRedeliverMarksTheLetterInFlightBeforeSending(t *testing.T) {
	var dir string
	var seenAmbiguous bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		other, err := deadletter.OpenReadOnly(dir) // another process's view
		if err == nil {
			l, gerr := other.Get("20260115T093000Z-5f2a")
			seenAmbiguous = gerr == nil && l.Ambiguous
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	l := ledgerLetter(srv.URL)
	d := seedDir(t, l)
	dir = d.Path()

	resp, err := d.Redeliver(context.Background(), srv.Client(), l.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !seenAmbiguous {
		t.Error("while the letter was on the wire, the directory did not report it ambiguous")
	}
	if got, err := d.Get(l.ID); err != nil || !got.Ambiguous {
		t.Errorf("answered 201, not yet marked redelivered: ambiguous %v, %v; want ambiguous: the funder has it", got != nil && got.Ambiguous, err)
	}
	if err := d.MarkRedelivered(l.ID, deadletter.Redelivery{Status: resp.StatusCode}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, l.ID+".sending")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the in-flight mark outlived MarkRedelivered: %v", err)
	}
	if moved, _, err := d.Redelivered(l.ID); err != nil || moved.Ambiguous {
		t.Errorf("the redelivered letter: %v; want it as it was written", err)
	}
}

// A redelivery that failed is written into its letter: its attempt is
// added, its answer is the letter's last, and the letter is ambiguous
// when the funder may have applied it (a 500, a dropped connection), not
// when the answer says it did not (a 503). A redelivery that sent nothing
// leaves the letter as it was.
func TestDirRedeliverRecordsAFailedRedeliveryInTheLetter(t *testing.T) {
	for _, tc := range []struct {
		name          string
		status        int // 0: the connection is dropped after the request is read
		wantAmbiguous bool
	}{
		{"answered 500", http.StatusInternalServerError, true},
		{"answered 503", http.StatusServiceUnavailable, false},
		{"dropped after the request", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if tc.status == 0 {
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.Close()
					return
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			l := ledgerLetter(srv.URL)
			l.FirstAttempt = l.Created.Add(-40 * time.Second)
			d := seedDir(t, l)
			tr := &http.Transport{DisableKeepAlives: true}
			defer tr.CloseIdleConnections()
			resp, err := d.Redeliver(context.Background(), &http.Client{Transport: tr}, l.ID, nil)
			if resp != nil {
				resp.Body.Close()
			}
			if (tc.status == 0) != (err != nil) {
				t.Fatalf("Redeliver: %v, %v", resp, err)
			}
			got, gerr := d.Get(l.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if got.Ambiguous != tc.wantAmbiguous || got.Attempts != l.Attempts+1 || got.LastStatus != tc.status || (tc.status == 0) != (got.LastError != "") {
				t.Errorf("letter after the redelivery: ambiguous %v, attempts %d, last status %d, last error %q; want ambiguous %v, %d attempts, status %d",
					got.Ambiguous, got.Attempts, got.LastStatus, got.LastError, tc.wantAmbiguous, l.Attempts+1, tc.status)
			}
			if !got.FirstAttempt.Equal(l.FirstAttempt) || string(got.Body) != string(l.Body) || got.IdempotencyKey != l.IdempotencyKey {
				t.Error("the redelivery changed the letter's first attempt, body or key")
			}
			if _, err := os.Stat(filepath.Join(d.Path(), l.ID+".sending")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the in-flight mark outlived the recorded failure: %v", err)
			}
		})
	}

	// Nothing sent: the letter stays as it was, and no mark is left.
	l := ledgerLetter("http://127.0.0.1:1")
	l.Ambiguous = true
	d := seedDir(t, l)
	if _, err := d.Redeliver(context.Background(), http.DefaultClient, l.ID, nil); !errors.Is(err, deadletter.ErrAmbiguous) {
		t.Fatalf("an ambiguous letter without a reconciler: %v, want ErrAmbiguous", err)
	}
	if got, _ := d.Get(l.ID); got.Attempts != l.Attempts {
		t.Errorf("a redelivery that sent nothing changed the letter's attempts to %d", got.Attempts)
	}
}

// BenchmarkDirRedeliverOfAFailingLetter measures what the directory adds
// to a redelivery the funder answers 503: the in-flight mark, the letter
// replaced with the attempt, the mark removed, each synced; beside it,
// the send alone.
func BenchmarkDirRedeliverOfAFailingLetter(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	l := ledgerLetter(srv.URL)
	d, err := deadletter.Open(filepath.Join(b.TempDir(), "letters"))
	if err != nil {
		b.Fatal(err)
	}
	if err := d.PutDeadLetter(context.Background(), l); err != nil {
		b.Fatal(err)
	}
	client := srv.Client()
	b.Run("send only", func(b *testing.B) {
		for b.Loop() {
			resp, err := deadletter.Redeliver(context.Background(), client, l, nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("through the directory", func(b *testing.B) {
		for b.Loop() {
			resp, err := d.Redeliver(context.Background(), client, l.ID, nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// A mark left by a sender that was killed mid-send makes the letter
// ambiguous for good: a later redelivery that sends nothing (the
// reconciler cannot tell) does not remove the ambiguity with the mark.
func TestDirRedeliverKeepsTheAmbiguityOfAMarkLeftByAKilledSender(t *testing.T) {
	l := ledgerLetter("http://127.0.0.1:1")
	d := seedDir(t, l)
	if err := os.WriteFile(filepath.Join(d.Path(), l.ID+".sending"), []byte(`{"since":"2026-01-15T10:00:00Z"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cannot := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
		return nil, errors.New("GetApplicationList: 503")
	}
	if _, err := d.Redeliver(context.Background(), http.DefaultClient, l.ID, cannot); !errors.Is(err, deadletter.ErrNotReconciled) {
		t.Fatalf("Redeliver: %v, want ErrNotReconciled", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), l.ID+".sending")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark is still there: %v", err)
	}
	if got, err := d.Get(l.ID); err != nil || !got.Ambiguous {
		t.Errorf("after a redelivery that sent nothing: ambiguous %v, %v; want the killed send's ambiguity kept", got != nil && got.Ambiguous, err)
	}
}
