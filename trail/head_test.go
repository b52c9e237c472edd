package trail

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry"
	"go.uber.org/zap/zapcore"
)

// ReadHead names the last record a Sync made durable, not a record
// written after it, from the live file's path or a rotated file's.
func TestReadHeadNamesTheLastSyncedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	if _, ok, err := ReadHead(path); ok || err != nil {
		t.Fatalf("a trail never opened: ok %v, %v; want no head and no error", ok, err)
	}
	trail := openTestTrail(t, path, Options{MaxFileSize: 1 << 10})
	log := trailLogger(trail, zapcore.DefaultClock)
	for range 6 {
		logDisposition(log, "a", grantretry.Succeeded)
	}
	if err := trail.Sync(); err != nil {
		t.Fatal(err)
	}
	trail.mu.Lock()
	seq, last := trail.seq, trail.last
	trail.mu.Unlock()
	logAttempt(log, "b", 1) // not synced
	for _, p := range []string{path, path + ".000001"} {
		h, ok, err := ReadHead(p)
		if err != nil || !ok || h.Seq != seq || h.Hash != last {
			t.Errorf("ReadHead(%s) = seq %d, ok %v, %v; want seq %d, the last synced, with its hash", p, h.Seq, ok, err, seq)
		}
	}
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path+".head", []byte("{"), 0o600)
	if _, _, err := ReadHead(path); err == nil {
		t.Error("ReadHead of a head that is not JSON: no error")
	}
}
