package worm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry/trail"
	"github.com/grantretry/grantretry/worm/s3test"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// testStore returns a Store under a prefix of the test's own.
func testStore(t testing.TB) *Store {
	t.Helper()
	endpoint, bucket := s3test.Endpoint(t)
	var b [6]byte
	rand.Read(b[:])
	prefix := "test/" + StreamName(t.Name()) + "-" + hex.EncodeToString(b[:])
	st, err := NewStore(context.Background(), StoreConfig{Endpoint: endpoint, Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Test retention: long enough for the verifier's minimum, short enough
// that nothing outlives a day. Objects in COMPLIANCE mode cannot be
// deleted before it ends, so each test writes under a prefix of its own
// and leaves it.
const (
	testRetention    = 2 * time.Hour
	testMinRetention = time.Hour
)

// makeTrail writes n records through a trail.Trail in dir, rotating
// every few KiB, and returns its files (the head included).
func makeTrail(t testing.TB, dir string, n int) []string {
	t.Helper()
	live := filepath.Join(dir, "audit.jsonl")
	tr, err := trail.Open(live, trail.Options{MaxFileSize: 6 << 10})
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, tr, 0, n)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	return trailFiles(t, live)
}

func writeRecords(t testing.TB, tr *trail.Trail, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		rec := fmt.Sprintf(`{"level":"info","ts":"2026-12-01T10:00:%02d.%06dZ","msg":"grantretry.disposition","disposition":"succeeded","submission":"GRANT-%04d","attempts":1}`+"\n", i%60, i, i)
		if _, err := tr.Write([]byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Sync(); err != nil {
		t.Fatal(err)
	}
}

func trailFiles(t testing.TB, live string) []string {
	t.Helper()
	m, err := filepath.Glob(live + "*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recordFiles is files without the head.
func recordFiles(files []string) []string {
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".head") {
			out = append(out, f)
		}
	}
	return out
}

// ship anchors the files once and closes the shipper.
func ship(t testing.TB, st *Store, files []string, o Options) {
	t.Helper()
	src, err := OpenFiles("", files...)
	if err != nil {
		t.Fatal(err)
	}
	o.Store, o.Source = st, src
	if o.QueueDir == "" {
		o.QueueDir = t.TempDir()
	}
	setDefault(&o.Retention, testRetention)
	setDefault(&o.SegmentSize, 4<<10)
	s, err := NewShipper(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func verify(t testing.TB, st *Store, files []string, o VerifyOptions) (Report, error) {
	t.Helper()
	if files != nil {
		src, err := OpenFiles("", files...)
		if err != nil {
			t.Fatal(err)
		}
		o.Local = src
	}
	setDefault(&o.MinRetention, testMinRetention)
	return Verify(context.Background(), st, o)
}

// where is the file and line of record seq among the files.
func where(t testing.TB, files []string, seq uint64) (string, int) {
	t.Helper()
	src, err := OpenFiles("", files...)
	if err != nil {
		t.Fatal(err)
	}
	file, line := "", 0
	src.Scan(context.Background(), src.Stream(), 0, func(rec []byte, f string, l int) error {
		if lk, ok := trail.ParseLink(rec); ok && lk.Seq == seq {
			file, line = f, l
		}
		return nil
	})
	if file == "" {
		t.Fatalf("no record seq %d in the files", seq)
	}
	return file, line
}
