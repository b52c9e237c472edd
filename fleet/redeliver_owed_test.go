package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A redelivery that the funder owes for later again (a quota, a
// Retry-After past the deadline) releases the letter with the funder's new
// time: Claim leaves it until then, and the letter says when.
func TestRedeliveryOwedAgainWaitsForTheNewTime(t *testing.T) {
	pool := newPool(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "36000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := testLetter(srv.URL, 1)
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	claims, err := s.Claim(ctx, "w", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	tr := grantretry.New(nil)
	defer tr.CloseIdleConnections()
	start := time.Now()
	r, err := s.Redeliver(ctx, claims[0], &http.Client{Transport: tr}, nil)
	if err == nil || r.Status != http.StatusTooManyRequests {
		t.Fatalf("Redeliver: %+v, %v; want a 429 and an error", r, err)
	}
	again, err := s.Claim(ctx, "w", 1)
	if err != nil || len(again) != 0 {
		t.Errorf("Claim after an owed redelivery: %d, %v; want none until the funder's time", len(again), err)
	}
	got, _, err := s.Get(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.NotBefore.Before(start.Add(9 * time.Hour)) {
		t.Errorf("NotBefore %v, want about 10 h from %v", got.NotBefore, start)
	}
}
