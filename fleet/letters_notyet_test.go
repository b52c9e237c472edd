package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grantretry/grantretry/deadletter"
)

// Letters.Redeliver of a letter not yet due (claimed by its ID, as Claim
// leaves it) sends nothing, the error matches deadletter.ErrNotYet, and
// the letter is released as it was: not ambiguous, since nothing left.
func TestLettersRedeliverOfALetterNotYetDueLeavesItUnambiguous(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := testLetter(f.srv.URL, 1)
	l.NotBefore = time.Now().Add(time.Hour).UTC()
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	claims, err := s.ClaimIDs(ctx, "w", []string{l.ID})
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	if _, err := s.Redeliver(ctx, claims[0], f.srv.Client(), nil); !errors.Is(err, deadletter.ErrNotYet) {
		t.Fatalf("Redeliver: %v, want ErrNotYet", err)
	}
	if n := f.counts()[l.IdempotencyKey]; n != 0 {
		t.Fatalf("the funder was sent the letter %d times, want never", n)
	}
	got, _, err := s.Get(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ambiguous {
		t.Errorf("the letter is ambiguous after a refusal that sent nothing")
	}
}
