package worm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/grantretry/grantretry/trail"
)

type nopSink struct{}

func (nopSink) Write(p []byte) (int, error) { return len(p), nil }
func (nopSink) Sync() error                 { return nil }
func (nopSink) Err() error                  { return nil }

// A stream whose local chain breaks stops the shipper for good: its later
// records are never read, and FailClosed counts the time since the stop,
// so it refuses calls once the bound has passed.
func TestFailClosedCountsAStoppedShipper(t *testing.T) {
	dir := t.TempDir()
	files := recordFiles(makeTrail(t, dir, 80))
	src, _ := OpenFiles("", files...)
	// The queue says seq 10 was sealed (its hash taken from the files).
	var h10 [32]byte
	src.Scan(context.Background(), src.Stream(), 0, func(rec []byte, _ string, _ int) error {
		if l, ok := trail.ParseLink(rec); ok && l.Seq == 10 {
			h10 = l.Hash
		}
		return nil
	})
	qd := t.TempDir()
	os.MkdirAll(filepath.Join(qd, src.Stream()), 0o700)
	b, _ := json.Marshal(queueState{Seq: 10, Hash: hexHash(h10)})
	os.WriteFile(filepath.Join(qd, src.Stream(), stateFile), b, 0o600)
	// Record 11 edited locally.
	f, line := where(t, files, 11)
	rewriteLines(t, f, func(ls [][]byte) [][]byte {
		ls[line-1] = bytes.Replace(ls[line-1], []byte("GRANT"), []byte("GRENT"), 1)
		return ls
	})

	st, _ := NewStore(context.Background(), StoreConfig{Endpoint: "http://127.0.0.1:9", Bucket: "b"})
	clk := newManualClock()
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: qd, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	fc := FailClosed(nopSink{}, s, time.Minute)
	s.poll(context.Background(), false)
	clk.Advance(24 * time.Hour)
	if s.Err() == nil {
		t.Fatal("an edited record 11 did not stop the shipper")
	}
	if b := s.Backlog(); b.Stopped == nil || b.Age < 24*time.Hour {
		t.Errorf("Backlog = %+v; want Stopped, and the age since the stop", b)
	}
	if err := fc.Err(); !errors.Is(err, ErrUnanchored) {
		t.Errorf("FailClosed.Err = %v a day after the shipper stopped; want ErrUnanchored", err)
	}
}
