package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// Claim hands out only the letters that are due: a letter whose NotBefore
// is ahead stays waiting until then; one whose NotBefore has passed, or
// that has none, is claimed.
func TestClaimTakesOnlyDueLetters(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	owed := testLetter("http://127.0.0.1:1", 1)
	owed.NotBefore = time.Now().Add(time.Hour).UTC()
	past := testLetter("http://127.0.0.1:1", 2)
	past.NotBefore = time.Now().Add(-time.Hour).UTC()
	now := testLetter("http://127.0.0.1:1", 3)
	for _, l := range []*grantretry.Letter{owed, past, now} {
		if err := s.PutDeadLetter(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := s.Claim(ctx, "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range claims {
		got[c.Letter.ID] = true
	}
	if len(claims) != 2 || !got[past.ID] || !got[now.ID] {
		t.Errorf("claimed %v; want %s and %s, not %s (not due)", got, past.ID, now.ID, owed.ID)
	}
}
