package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grantretry/grantretry/deadletter"
)

// Letters.Redeliver agrees with the command-line tools: an ambiguous
// letter given a nil reconcile is not sent, the error matches
// deadletter.ErrAmbiguous, and the letter is released, still ambiguous,
// for a later try; deadletter.TrustKey sends it once.
func TestLettersDoNotResendAnAmbiguousLetterWithoutAReconciler(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := testLetter(f.srv.URL, 1)
	l.Ambiguous = true
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	claims, err := s.Claim(ctx, "w", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	if _, err := s.Redeliver(ctx, claims[0], f.srv.Client(), nil); !errors.Is(err, deadletter.ErrAmbiguous) {
		t.Fatalf("Redeliver with a nil reconcile: %v, want ErrAmbiguous", err)
	}
	if n := f.counts()[l.IdempotencyKey]; n != 0 {
		t.Fatalf("the funder was sent the letter %d times, want never", n)
	}
	again, err := s.Claim(ctx, "w", 1)
	if err != nil || len(again) != 1 || !again[0].Letter.Ambiguous {
		t.Fatalf("Claim after the refusal: %d, %v; want the letter back, still ambiguous", len(again), err)
	}
	r, err := s.Redeliver(ctx, again[0], f.srv.Client(), deadletter.TrustKey)
	if err != nil || r.Status != 201 {
		t.Fatalf("Redeliver with TrustKey: %+v, %v", r, err)
	}
	if n := f.counts()[l.IdempotencyKey]; n != 1 {
		t.Errorf("the funder was sent the letter %d times, want once", n)
	}
}
