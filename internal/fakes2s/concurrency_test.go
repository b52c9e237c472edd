package fakes2s_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

// 50 concurrent submissions of 10 ids, 5 each, on one kept-alive client,
// half of them dropped. Without an Idempotency-Key net/http resends
// nothing, so every count is exact.
func TestCountsAreExactUnderConcurrency(t *testing.T) {
	const ids, each = 10, 5
	f := start(t, fakes2s.Options{DropRate: 0.5, Seed: 7})
	client := newClient(t, f)
	results := make([]submission, ids*each)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = submit(context.Background(), client, f.URL(), id(i%ids), "")
		}()
	}
	wg.Wait()

	failed := 0
	var answered []string
	for i, s := range results {
		if s.err != nil {
			failed++
			continue
		}
		if !slices.Contains(f.TrackingNumbers(id(i%ids)), s.tracking) {
			t.Errorf("%s answered %q, which the funder did not record for it", id(i%ids), s.tracking)
		}
		answered = append(answered, s.tracking)
	}
	slices.Sort(answered)
	if len(slices.Compact(answered)) != len(results)-failed {
		t.Errorf("a tracking number was given twice: %v", answered)
	}
	if f.Received() != ids*each || f.TotalApplications() != ids*each || f.Duplicates() != ids*(each-1) {
		t.Errorf("received %d, total %d, duplicates %d; want %d, %d, %d",
			f.Received(), f.TotalApplications(), f.Duplicates(), ids*each, ids*each, ids*(each-1))
	}
	for i := range ids {
		if n := f.Applications(id(i)); n != each {
			t.Errorf("%s: %d applications, want %d", id(i), n, each)
		}
	}
	if f.Dropped() != failed || failed == 0 || failed == len(results) {
		t.Errorf("dropped %d, %d calls failed; want them equal, and some of each", f.Dropped(), failed)
	}
}

func TestCloseStopsPendingCalls(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1, Latency: time.Hour})
	client := newClient(t, f)
	done := make(chan submission)
	go func() { done <- submit(context.Background(), client, f.URL(), "GRANT-42", "") }()
	for deadline := time.Now().Add(10 * time.Second); f.Received() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the submission never arrived")
		}
	}
	f.Close() // returns long before Latency
	if s := <-done; s.err == nil {
		t.Errorf("submit answered %d, want an error", s.status)
	}
	if f.TotalApplications() != 0 {
		t.Errorf("recorded %d applications, want 0", f.TotalApplications())
	}
}
