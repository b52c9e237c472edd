package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A Redeliver that sends nothing because it could not confirm its claim
// says so: the error matches grantretry.ErrNotSent, with ErrLeaseLost
// when the claim was refused, without it when the database failed; a
// lease lost only after the send (at the release) is not ErrNotSent.
func TestRedeliverThatSentNothingMatchesErrNotSent(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	var received atomic.Int32
	var lose atomic.Pointer[Claim] // the claim the funder's answer comes after another took
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		if c := lose.Load(); c != nil {
			if _, err := pool.Exec(ctx, `UPDATE grantretry_letters SET claims = claims + 1 WHERE id = $1`, c.Letter.ID); err != nil {
				t.Error(err)
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	claim := func(s *Letters, i int) *Claim {
		t.Helper()
		l := testLetter(srv.URL, i)
		if err := s.PutDeadLetter(ctx, l); err != nil {
			t.Fatal(err)
		}
		cs, err := s.ClaimIDs(ctx, "w", []string{l.ID})
		if err != nil || len(cs) != 1 {
			t.Fatalf("ClaimIDs: %d, %v", len(cs), err)
		}
		return cs[0]
	}

	ended := NewLetters(pool, WithLease(time.Microsecond)) // ended before Redeliver confirms it
	defer ended.Close()
	_, err := ended.Redeliver(ctx, claim(ended, 1), &http.Client{}, nil)
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, grantretry.ErrNotSent) {
		t.Errorf("Redeliver of a claim whose lease ended: %v; want ErrLeaseLost and ErrNotSent", err)
	}

	s := NewLetters(pool)
	defer s.Close()
	c := claim(s, 2)
	if _, err := pool.Exec(ctx, `UPDATE grantretry_letters SET claims = claims + 1`); err != nil {
		t.Fatal(err)
	}
	_, err = s.Redeliver(ctx, c, &http.Client{}, nil)
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, grantretry.ErrNotSent) {
		t.Errorf("Redeliver of a claim another took: %v; want ErrLeaseLost and ErrNotSent", err)
	}

	lost := claim(s, 3)
	lose.Store(lost)
	rec, err := s.Redeliver(ctx, lost, &http.Client{}, nil)
	if !errors.Is(err, ErrLeaseLost) || errors.Is(err, grantretry.ErrNotSent) || rec.Status != http.StatusServiceUnavailable {
		t.Errorf("Redeliver whose lease was lost after the send: %+v, %v; want 503, ErrLeaseLost and not ErrNotSent", rec, err)
	}

	down := claim(s, 4)
	pool.Close()
	_, err = s.Redeliver(ctx, down, &http.Client{}, nil)
	if !errors.Is(err, grantretry.ErrNotSent) || errors.Is(err, ErrLeaseLost) {
		t.Errorf("Redeliver with the database gone: %v; want ErrNotSent, not ErrLeaseLost", err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("the funder received %d requests, want 1 (the one whose lease was lost after it)", n)
	}
}
