package worm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/grantretry/grantretry/trail"
)

// The tests run against a real S3 server with Object Lock: the one
// GRANTRETRY_S3_ENDPOINT names (with GRANTRETRY_S3_BUCKET, a bucket made
// with Object Lock, and the AWS_* credentials), else a versitygw the
// tests start themselves if they find its binary (GRANTRETRY_VERSITYGW,
// the CI cache, or PATH). Without either they skip, unless CI or
// GRANTRETRY_S3_REQUIRED asks for them: then a skip is a failure.

var gw struct {
	once     sync.Once
	cmd      *exec.Cmd
	dir      string
	endpoint string
	bucket   string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if gw.cmd != nil {
		gw.cmd.Process.Kill()
		gw.cmd.Wait()
		os.RemoveAll(gw.dir)
	}
	os.Exit(code)
}

func s3Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("GRANTRETRY_S3_REQUIRED") != ""
}

// s3Endpoint returns the endpoint and bucket the tests use, starting a
// versitygw if need be; it skips or fails the test if there is none.
func s3Endpoint(t testing.TB) (string, string) {
	t.Helper()
	if e := os.Getenv("GRANTRETRY_S3_ENDPOINT"); e != "" {
		b := os.Getenv("GRANTRETRY_S3_BUCKET")
		if b == "" {
			t.Fatal("GRANTRETRY_S3_ENDPOINT is set without GRANTRETRY_S3_BUCKET")
		}
		return e, b
	}
	gw.once.Do(startGateway)
	if gw.err != nil {
		if s3Required() {
			t.Fatalf("an S3 server is required (CI or GRANTRETRY_S3_REQUIRED): %v", gw.err)
		}
		t.Skipf("no S3 server: %v (set GRANTRETRY_S3_ENDPOINT, or put versitygw on PATH)", gw.err)
	}
	return gw.endpoint, gw.bucket
}

func versitygwPath() (string, error) {
	if p := os.Getenv("GRANTRETRY_VERSITYGW"); p != "" {
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	if p := filepath.Join(cache, "grantretry", "bin", "versitygw"); fileExists(p) {
		return p, nil
	}
	return exec.LookPath("versitygw")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startGateway starts versitygw on a free loopback port, with a posix
// backend and versioning (which Object Lock needs) in a temporary
// directory, and makes a bucket with Object Lock.
func startGateway() {
	bin, err := versitygwPath()
	if err != nil {
		gw.err = err
		return
	}
	gw.dir, err = os.MkdirTemp("", "worm-versitygw-")
	if err != nil {
		gw.err = err
		return
	}
	data, versions := filepath.Join(gw.dir, "data"), filepath.Join(gw.dir, "versions")
	os.Mkdir(data, 0o700)
	os.Mkdir(versions, 0o700)
	addr := freePort()
	os.Setenv("AWS_ACCESS_KEY_ID", "worm-test")
	os.Setenv("AWS_SECRET_ACCESS_KEY", "worm-test-secret")
	os.Setenv("AWS_REGION", "us-east-1")
	gw.cmd = exec.Command(bin, "--port", addr, "--quiet", "--access", "worm-test", "--secret", "worm-test-secret",
		"posix", "--versioning-dir", versions, data)
	gw.cmd.Stdout, gw.cmd.Stderr = os.Stderr, os.Stderr
	if gw.err = gw.cmd.Start(); gw.err != nil {
		gw.cmd = nil
		return
	}
	gw.endpoint, gw.bucket = "http://"+addr, "worm-test"
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			gw.err = createLockedBucket(context.Background(), gw.endpoint, gw.bucket)
			return
		}
		time.Sleep(50 * time.Millisecond) // the server starting, not a backoff
	}
	gw.err = fmt.Errorf("versitygw did not listen on %s", addr)
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func createLockedBucket(ctx context.Context, endpoint, bucket string) error {
	st, err := NewStore(ctx, StoreConfig{Endpoint: endpoint, Bucket: bucket})
	if err != nil {
		return err
	}
	_, err = st.c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket), ObjectLockEnabledForBucket: aws.Bool(true)})
	return err
}

// testStore returns a Store under a prefix of the test's own.
func testStore(t testing.TB) *Store {
	t.Helper()
	endpoint, bucket := s3Endpoint(t)
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
