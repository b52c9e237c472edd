package worm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry/trail"
)

// writeAttempts writes n attempt records and does not sync them, as the
// Transport writes the attempts of a call still in flight.
func writeAttempts(t testing.TB, tr *trail.Trail, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		rec := fmt.Sprintf(`{"level":"info","ts":"2026-12-01T10:01:%02d.%06dZ","msg":"grantretry.attempt","submission":"GRANT-%04d","attempt":1}`+"\n", i%60, i, i)
		if _, err := tr.Write([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
}

// synced is what a trail's files hold on disk once a power loss has
// taken every page not synced: the live file up to its last synced
// record, and the head that names it.
type synced struct {
	live string
	size int64
	head []byte
}

func syncedState(t testing.TB, live string) synced {
	t.Helper()
	fi, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	head, err := os.ReadFile(live + ".head")
	if err != nil {
		t.Fatal(err)
	}
	return synced{live: live, size: fi.Size(), head: head}
}

// powerLoss puts the trail's files back as the disk holds them after a
// power loss: what was synced, then a page that was never written.
func (s synced) powerLoss(t testing.TB) {
	t.Helper()
	if err := os.Truncate(s.live, s.size); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s.live, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 512))
	f.Close()
	if err := os.WriteFile(s.live+".head", s.head, 0o600); err != nil {
		t.Fatal(err)
	}
}

// shipFollowing runs a Shipper on the live trail once, with queue, and
// returns its failure, if it stopped for good.
func shipFollowing(t *testing.T, st *Store, live, queue string) error {
	t.Helper()
	src, err := FollowFiles("", live)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: queue, Retention: testRetention})
	if err != nil {
		t.Fatal(err)
	}
	return s.Close(context.Background())
}

// After a power loss a trail goes on from its last synced record, under
// the seqs of the records the loss took. The shipper anchors only what
// the trail's head says was synced, so the trail that went on verifies
// against the store and a restarted shipper anchors the rest.
func TestShipperAnchorsOnlyWhatTheTrailSynced(t *testing.T) {
	st := testStore(t)
	live := filepath.Join(t.TempDir(), "audit.jsonl")
	tr, err := trail.Open(live, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, tr, 0, 5) // dispositions, synced
	disk := syncedState(t, live)
	writeAttempts(t, tr, 5, 4) // attempts of calls in flight, never synced
	queue := t.TempDir()
	if err := shipFollowing(t, st, live, queue); err != nil {
		t.Fatalf("the first shipper: %v", err)
	}
	tr.Close()
	disk.powerLoss(t)

	tr, err = trail.Open(live, trail.Options{})
	if err != nil {
		t.Fatalf("the trail after the power loss: %v", err)
	}
	writeRecords(t, tr, 5, 3)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	files := trailFiles(t, live)
	sum, err := trail.Verify(files...)
	if err != nil {
		t.Fatalf("trail.Verify after the power loss: %v", err)
	}
	if err := shipFollowing(t, st, live, queue); err != nil {
		t.Fatalf("the restarted shipper stopped: %v", err)
	}
	rep, err := verify(t, st, files, VerifyOptions{})
	if err != nil {
		t.Fatalf("worm.Verify of the trail that went on after the power loss: %v", err)
	}
	if s := rep.Streams[0]; s.LastSeq != sum.LastSeq || s.AtRisk != 0 {
		t.Fatalf("anchored to seq %d with %d records at risk; want the trail's last, seq %d, and none", s.LastSeq, s.AtRisk, sum.LastSeq)
	}
}

// A Files source passes a record only once the trail's head says it was
// synced: never a record written after the last Sync, nor the bytes a
// power loss left after it.
func TestFilesPassOnlySyncedRecords(t *testing.T) {
	live := filepath.Join(t.TempDir(), "audit.jsonl")
	tr, err := trail.Open(live, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	writeRecords(t, tr, 0, 5)
	disk := syncedState(t, live)
	writeAttempts(t, tr, 5, 4)
	follow, err := FollowFiles("", live)
	if err != nil {
		t.Fatal(err)
	}
	open, err := OpenFiles("", trailFiles(t, live)...)
	if err != nil {
		t.Fatal(err)
	}
	lastPassed := func(src *Files) uint64 {
		var last uint64
		err := src.Scan(context.Background(), src.Stream(), 0, func(rec []byte, file string, line int) error {
			l, ok := trail.ParseLink(rec)
			if !ok || bytes.Contains(rec, []byte("grantretry.attempt")) {
				t.Errorf("%s line %d passed, never synced: %.60s", file, line, rec)
			}
			last = l.Seq
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return last
	}
	head := disk.headSeq(t)
	for name, src := range map[string]*Files{"FollowFiles": follow, "OpenFiles": open} {
		if got := lastPassed(src); got != head {
			t.Errorf("%s: the last record passed is seq %d, the head's is seq %d", name, got, head)
		}
	}
	// The pages a power loss did not write are not passed either.
	tr.Close()
	disk.powerLoss(t)
	follow, _ = FollowFiles("", live)
	if got := lastPassed(follow); got != head {
		t.Errorf("after a power loss: the last record passed is seq %d, the head's is seq %d", got, head)
	}
}

func (s synced) headSeq(t testing.TB) uint64 {
	t.Helper()
	var h struct{ Seq uint64 }
	if err := json.Unmarshal(s.head, &h); err != nil || h.Seq == 0 {
		t.Fatalf("head %q: %v", s.head, err)
	}
	return h.Seq
}
