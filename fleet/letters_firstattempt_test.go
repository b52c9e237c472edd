package fleet

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// unsentLetter is a letter that was never sent (a circuit_open one): no
// attempts, no FirstAttempt.
func unsentLetter(url string, i int) *grantretry.Letter {
	l := testLetter(url, i)
	l.Attempts, l.LastStatus = 0, 0
	l.Disposition, l.StopReason = grantretry.CircuitOpen, grantretry.StopCircuitOpen
	return l
}

// A letter's first send gives it its FirstAttempt, the send's start: a
// redelivery of a never-sent letter that may have reached the funder
// leaves it ambiguous and dated, and the reconciler is asked about it
// with that date, not zero (which a dating reconciler reads as any time,
// so that an earlier record under the same title would count).
func TestLettersFirstSendRecordsTheLettersFirstAttempt(t *testing.T) {
	pool := newPool(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the request was read, and no answer comes
		}
	}))
	defer srv.Close()
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := unsentLetter(srv.URL, 9101)
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	claims, err := s.Claim(ctx, "w", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	before := time.Now().Add(-time.Second) // the database's clock may differ a little
	if _, err := s.Redeliver(ctx, claims[0], client, nil); err == nil {
		t.Fatal("a dropped redelivery succeeded")
	}
	after := time.Now().Add(time.Second)
	again, err := s.Claim(ctx, "w", 1)
	if err != nil || len(again) != 1 {
		t.Fatalf("Claim again: %d, %v", len(again), err)
	}
	got := again[0].Letter
	if !got.Ambiguous || got.FirstAttempt.Before(before) || got.FirstAttempt.After(after) {
		t.Fatalf("after a dropped first send: ambiguous %v, FirstAttempt %v; want ambiguous, first attempt between %v and %v",
			got.Ambiguous, got.FirstAttempt, before, after)
	}
	var asked []time.Time
	rec := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
		asked = append(asked, q.FirstAttempt)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
	}
	if _, err := s.Redeliver(ctx, again[0], client, rec); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !asked[0].Equal(got.FirstAttempt) {
		t.Errorf("asked with FirstAttempt %v, want the first send's %v", asked, got.FirstAttempt)
	}
}

// A never-sent letter whose worker died with its send in flight comes
// back ambiguous, dated by that send's start.
func TestLetterOfADeadSenderTakesItsSendsStartAsFirstAttempt(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := unsentLetter("http://127.0.0.1:1", 9102)
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	if claims, err := s.Claim(ctx, "dies", 1); err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	// The worker marked its send in flight, and died before the lease ended.
	since := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `UPDATE grantretry_letters SET sending_since = $2,
		lease_until = clock_timestamp() - interval '1 second' WHERE id = $1`, l.ID, since); err != nil {
		t.Fatal(err)
	}
	again, err := s.Claim(ctx, "other", 1)
	if err != nil || len(again) != 1 {
		t.Fatalf("Claim after the lease: %d, %v", len(again), err)
	}
	if c := again[0]; !c.InFlight || !c.Letter.Ambiguous || !c.Letter.FirstAttempt.Equal(since) {
		t.Errorf("claimed again: InFlight %v, ambiguous %v, FirstAttempt %v; want both, and %v",
			c.InFlight, c.Letter.Ambiguous, c.Letter.FirstAttempt, since)
	}
	if got, _, err := s.Get(ctx, l.ID); err != nil || !got.FirstAttempt.Equal(since) {
		t.Errorf("Get: FirstAttempt %v, %v; want the database to keep %v", got.FirstAttempt, err, since)
	}
}
