package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A process redelivers with the client it submits with, whose Transport
// keeps letters in the same Letters. A redelivery that fails again leaves
// a second letter of the same submission beside the first, released: two
// workers can then claim one each and both send it.
func TestFailedRedeliveryLeavesOneLetterPerSubmission(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	s := NewLetters(pool, WithLimit(time.Second))
	defer s.Close()
	if err := s.PutDeadLetter(ctx, testLetter(srv.URL, 7)); err != nil {
		t.Fatal(err)
	}
	tr := grantretry.New(nil, grantretry.WithDeadLetter(s), grantretry.WithBudget(1, 5*time.Second),
		grantretry.WithBackoff(time.Millisecond, 2*time.Millisecond))
	client := &http.Client{Transport: tr}
	claims, err := s.Claim(ctx, "worker-a", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}
	_, err = s.Redeliver(ctx, claims[0], client, nil)
	t.Logf("redeliver: %v (funder received %d)", err, got.Load())
	left, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, l := range left {
		keys[l.IdempotencyKey]++
	}
	for k, n := range keys {
		if n != 1 {
			t.Fatalf("%d waiting letters carry key %s: two workers can send the submission at once", n, k)
		}
	}
	if len(left) != 1 || left[0].ID != claims[0].Letter.ID {
		t.Fatalf("%d letters waiting, want the one redelivered, %s", len(left), claims[0].Letter.ID)
	}
}
