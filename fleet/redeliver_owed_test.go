package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// A redelivery that a host in quota holds sends nothing, and releases the
// letter with the host's time, as one owed again does: Claim leaves it
// until then, and the letter says when.
func TestRedeliveryHeldByAQuotaWaitsForTheHostsTime(t *testing.T) {
	pool := newPool(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "36000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tr := grantretry.New(nil)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	start := time.Now()
	resp, err := client.Post(srv.URL+"/other", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o, ok := grantretry.OutcomeOf(resp); !ok || o.StopReason != grantretry.StopOwedLater || o.NotBefore.IsZero() {
		t.Fatalf("first call: %+v; want owed_later with a NotBefore", o)
	}
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
	_, err = s.Redeliver(ctx, claims[0], client, nil)
	var ge *grantretry.Error
	if !errors.As(err, &ge) || ge.StopReason != grantretry.StopOwedLater || ge.Attempts != 0 {
		t.Fatalf("Redeliver: %v; want it held, nothing sent", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("funder got %d requests, want 1", n)
	}
	if !claims[0].Letter.NotBefore.Equal(ge.NotBefore) {
		t.Errorf("claim's letter NotBefore %v, want the host's %v", claims[0].Letter.NotBefore, ge.NotBefore)
	}
	again, err := s.Claim(ctx, "w", 1)
	if err != nil || len(again) != 0 {
		t.Errorf("Claim after a held redelivery: %d, %v; want none until the host's time", len(again), err)
	}
	got, _, err := s.Get(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.NotBefore.Sub(ge.NotBefore).Abs() >= time.Microsecond || got.NotBefore.Before(start.Add(9*time.Hour)) {
		t.Errorf("letter NotBefore %v, want the host's %v, about 10 h from %v", got.NotBefore, ge.NotBefore, start)
	}
	if got.Ambiguous || got.Attempts != l.Attempts {
		t.Errorf("letter %+v; want its attempts, not ambiguous", got)
	}
}
