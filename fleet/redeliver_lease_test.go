package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// holdingTransport sends through http.DefaultTransport, then holds the
// funder's answer, whatever the request's context says, until release is
// closed: as a grantretry Transport holds it until its trail has
// committed it, on the trail's own limit.
type holdingTransport struct {
	answered, release chan struct{}
}

func (h *holdingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	close(h.answered)
	<-h.release
	return resp, err
}

// Redeliver keeps its claim's lease while it finishes a send: a client
// that holds the answer past the lease it had at its confirmation does
// not lose the letter to another worker, which can claim it neither
// with Claim nor ClaimIDs, and the letter is Done once the answer comes.
func TestRedeliverKeepsItsLeaseUntilItsSendEnds(t *testing.T) {
	const lease = 600 * time.Millisecond
	ctx := context.Background()
	s := NewLetters(newPool(t), WithLease(lease))
	defer s.Close()
	var received atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	l := testLetter(srv.URL, 1)
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimIDs(ctx, "A", []string{l.ID})
	if err != nil || len(cs) != 1 {
		t.Fatalf("ClaimIDs: %d, %v", len(cs), err)
	}
	h := &holdingTransport{answered: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.Redeliver(ctx, cs[0], &http.Client{Transport: h}, nil)
		done <- err
	}()
	<-h.answered
	time.Sleep(2 * lease) // past the lease A had when it confirmed its claim
	other, err := s.Claim(ctx, "B", 10)
	if err != nil || len(other) != 0 {
		t.Errorf("another worker's Claim, while A still finishes its send: %d letters, %v; want none", len(other), err)
	}
	other, err = s.ClaimIDs(ctx, "B", []string{l.ID})
	if err != nil || len(other) != 0 {
		t.Errorf("another worker's ClaimIDs, while A still finishes its send: %d letters, %v; want none", len(other), err)
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Errorf("Redeliver of a letter answered 201 after its first lease: %v; want it Done", err)
	}
	if _, rec, err := s.Get(ctx, l.ID); err != nil || rec == nil || rec.Status != http.StatusCreated {
		t.Errorf("the letter after its send: record %+v, %v; want redelivered, 201", rec, err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("the funder received the letter %d times, want once", n)
	}
}
