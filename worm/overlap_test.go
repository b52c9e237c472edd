package worm

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A queue left by a shipper while the store was down, after another run
// (ship once, its own temporary queue) anchored the same records in other
// segments: uploaded, the queued segments would overlap the store's for
// good, so the shipper stops and says why, and the store still verifies.
func TestStaleQueueIsNotUploadedOverTheStore(t *testing.T) {
	st := testStore(t)
	files := recordFiles(makeTrail(t, t.TempDir(), 80))
	src, _ := OpenFiles("", files...)
	qd := t.TempDir()
	// A shipper seals the records into its queue and never uploads them.
	a, _ := NewShipper(Options{Store: st, Source: src, QueueDir: qd, SegmentSize: 2 << 10, Retention: testRetention})
	a.pollMu.Lock()
	a.pollStream(context.Background(), &stream{name: src.Stream()}, true)
	a.pollMu.Unlock()
	// Another run ships the files once, under other segment boundaries.
	ship(t, st, files, Options{SegmentSize: 8 << 10})
	// a restarts on its queue.
	a2, err := NewShipper(Options{Store: st, Source: src, QueueDir: qd, SegmentSize: 2 << 10, Retention: testRetention})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a2.Close(ctx); err == nil || !strings.Contains(err.Error(), "another shipper anchored them") {
		t.Errorf("Close on the stale queue = %v; want it to refuse the upload, naming another shipper", err)
	}
	if _, verr := verify(t, st, files, VerifyOptions{}); verr != nil {
		t.Errorf("the store no longer verifies: %v", verr)
	}
}
