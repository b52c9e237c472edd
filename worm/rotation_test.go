package worm

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry/trail"
)

// A rotation between Files.Scan's listing and its opening of the live
// file: the scan stops before the new live file rather than skip the old
// one's records, and the next Scan goes on from where it stopped.
func TestScanListsAgainAfterARotationDuringIt(t *testing.T) {
	dir := t.TempDir()
	makeTrail(t, dir, 80)
	live := filepath.Join(dir, "audit.jsonl")
	src, err := FollowFiles("", live)
	if err != nil {
		t.Fatal(err)
	}
	rotated := false
	var last uint64
	var gap string
	err = src.Scan(context.Background(), src.Stream(), 0, func(rec []byte, file string, line int) error {
		l, ok := trail.ParseLink(rec)
		if ok && last != 0 && l.Seq != last+1 && gap == "" {
			gap = file
			t.Errorf("scan passed seq %d after seq %d (%s line %d): records between were skipped", l.Seq, last, file, line)
		}
		if ok {
			last = l.Seq
		}
		if !rotated { // the pipeline writes and rotates while the shipper reads an old file
			rotated = true
			tr, err := trail.Open(live, trail.Options{MaxFileSize: 6 << 10})
			if err != nil {
				t.Fatal(err)
			}
			writeRecords(t, tr, 80, 40)
			tr.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The next Scan goes on from the last record passed, through the
	// rotated files, to the end.
	err = src.Scan(context.Background(), src.Stream(), last, func(rec []byte, file string, line int) error {
		l, ok := trail.ParseLink(rec)
		if ok && l.Seq != last+1 {
			t.Errorf("the next scan passed seq %d after seq %d (%s line %d)", l.Seq, last, file, line)
		}
		if ok {
			last = l.Seq
		}
		return nil
	})
	if err != nil || last < 120 {
		t.Errorf("the scans ended at seq %d (%v); want all 120 calls' records and the trail's own", last, err)
	}
}
