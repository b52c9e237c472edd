package trail

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// trailLogger writes to trail as the Transport does: zap's JSON encoder
// with the trail's encoder config, its times from clk.
func trailLogger(trail *Trail, clk zapcore.Clock) *zap.Logger {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig()), trail, zap.DebugLevel)
	return zap.New(core, zap.WithClock(clk))
}

// fakeZapClock is the zap side of a fakeClock.
type fakeZapClock struct{ *fakeClock }

func (c fakeZapClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// logAttempt writes a realistic attempt record of call corr.
func logAttempt(log *zap.Logger, corr string, n int) {
	log.Info(grantretry.MsgAttempt,
		zap.String(grantretry.FieldCorrelationID, corr),
		zap.String(grantretry.FieldIdempotencyKey, "idem-"+corr),
		zap.String(grantretry.FieldSubmissionID, "GRANT-2026-0042"),
		zap.String(grantretry.FieldMethod, "POST"),
		zap.String(grantretry.FieldHost, "grants.example.gov"),
		zap.String(grantretry.FieldPath, "/v1/applications"),
		zap.Int(grantretry.FieldAttempt, n),
		zap.Int(grantretry.FieldStatus, 503),
		zap.String(grantretry.FieldError, ""),
		zap.String(grantretry.FieldReason, "transient:503"),
		zap.Bool(grantretry.FieldRetryable, true),
		zap.Duration(grantretry.FieldWait, 1500*time.Millisecond),
		zap.String(grantretry.FieldWaitSource, "backoff"),
		zap.Duration(grantretry.FieldLatency, 80*time.Millisecond),
		zap.Duration(grantretry.FieldElapsed, 2*time.Second),
	)
}

// logDisposition writes a realistic disposition record of call corr.
func logDisposition(log *zap.Logger, corr string, d grantretry.Disposition) {
	log.Warn(grantretry.MsgDisposition,
		zap.String(grantretry.FieldCorrelationID, corr),
		zap.String(grantretry.FieldIdempotencyKey, "idem-"+corr),
		zap.String(grantretry.FieldSubmissionID, "GRANT-2026-0042"),
		zap.String(grantretry.FieldMethod, "POST"),
		zap.String(grantretry.FieldHost, "grants.example.gov"),
		zap.String(grantretry.FieldPath, "/v1/applications"),
		zap.String(grantretry.FieldDisposition, string(d)),
		zap.Int(grantretry.FieldAttempts, 3),
		zap.String(grantretry.FieldStopReason, string(d)),
		zap.Int(grantretry.FieldStatus, 503),
		zap.String(grantretry.FieldPayloadSHA256, strings.Repeat("ab", 32)),
		zap.Int64(grantretry.FieldPayloadBytes, 1843),
		zap.Duration(grantretry.FieldElapsed, 4*time.Second),
	)
}

func openTestTrail(t *testing.T, path string, o Options) *Trail {
	t.Helper()
	trail, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trail.Close() })
	return trail
}

// trailFiles returns the trail files in dir, rotated ones first, in
// rotation order, then the live one.
func trailFiles(t *testing.T, dir string) []string {
	t.Helper()
	rotated, err := filepath.Glob(filepath.Join(dir, "trail.jsonl.[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rotated)
	live := filepath.Join(dir, "trail.jsonl")
	if _, err := os.Stat(live); err == nil {
		rotated = append(rotated, live)
	}
	return rotated
}

// readLines returns the file's lines, each with its newline.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func writeLines(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func mustLink(t *testing.T, line []byte) link {
	t.Helper()
	l, ok := parseLink(bytes.TrimSuffix(line, []byte("\n")))
	if !ok {
		t.Fatalf("no chain fields in %s", line)
	}
	return l
}

// messages returns the msg of every record of the trail in dir, in order,
// after verifying it.
func messages(t *testing.T, dir string) []string {
	t.Helper()
	var msgs []string
	_, err := Read(trailFiles(t, dir), func(r Record) error {
		msgs = append(msgs, r.Msg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A record is encoded as the doc says: RFC 3339 UTC time with
// nanoseconds, lowercase level, durations as text, no caller or logger.
func TestTrailEncoderConfig(t *testing.T) {
	dir := t.TempDir()
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{})
	clk := newFakeClock()
	clk.now = time.Date(2026, 11, 30, 4, 0, 0, 500_000_000, time.FixedZone("EST", -5*3600))
	log := trailLogger(trail, fakeZapClock{clk}).Named("audit").WithOptions(zap.AddCaller(), zap.AddStacktrace(zap.InfoLevel))
	logAttempt(log, "c1", 1)
	lines := readLines(t, filepath.Join(dir, "trail.jsonl"))
	got := string(lines[1])
	want := `{"level":"info","ts":"2026-11-30T09:00:00.5Z","msg":"grantretry.attempt","correlation_id":"c1",`
	if !strings.HasPrefix(got, want) {
		t.Errorf("record starts\n%s\nwant\n%s", got, want)
	}
	for _, s := range []string{`"wait":"1.5s"`, `"latency":"80ms"`, `"retryable":true`} {
		if !strings.Contains(got, s) {
			t.Errorf("record lacks %s: %s", s, got)
		}
	}
	for _, k := range []string{`"caller"`, `"logger"`, `"stacktrace"`, `"function"`} {
		if strings.Contains(got, k) {
			t.Errorf("record has %s: %s", k, got)
		}
	}
}

// Each record ends with seq, prev and hash; hash is SHA-256 over the
// previous link and the record up to ,"hash":"; the first is trail_opened
// with seq 1 and a zero prev.
func TestAuditTrailChainFields(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock()
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{Clock: clk})
	logAttempt(trailLogger(trail, fakeZapClock{clk}), "c1", 1)
	lines := readLines(t, filepath.Join(dir, "trail.jsonl"))
	if len(lines) != 2 {
		t.Fatalf("%d records, want 2", len(lines))
	}
	first := string(lines[0])
	wantFirst := fmt.Sprintf(`{"level":"info","ts":"2026-11-30T09:00:00Z","msg":"grantretry.trail_opened","version":1,"file":"trail.jsonl","pid":%d,"seq":1,"prev":"%s","hash":"`,
		os.Getpid(), strings.Repeat("0", 64))
	if !strings.HasPrefix(first, wantFirst) {
		t.Errorf("first record\n%s\nwant it to start\n%s", first, wantFirst)
	}
	l1, l2 := mustLink(t, lines[0]), mustLink(t, lines[1])
	if l2.seq != 2 || l2.prev != l1.hash {
		t.Errorf("second record has seq %d prev %x, want 2 and %x", l2.seq, l2.prev, l1.hash)
	}
	cut := bytes.LastIndex(lines[1], []byte(`,"hash":"`))
	want := sha256.Sum256(append(l1.hash[:], lines[1][:cut]...))
	if !strings.HasSuffix(string(lines[1]), `,"hash":"`+hex.EncodeToString(want[:])+"\"}\n") {
		t.Errorf("second record's hash is not SHA-256(prev || record up to hash): %s", lines[1])
	}
}

// Thousands of records from many goroutines, rotated over several files,
// form one chain, each record once.
func TestAuditTrailConcurrentWritesFormOneChain(t *testing.T) {
	const writers, each = 50, 100
	dir := t.TempDir()
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{MaxFileSize: 256 << 10})
	log := trailLogger(trail, zapcore.DefaultClock)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				logAttempt(log, fmt.Sprintf("w%d-%d", w, i), i+1)
			}
		}()
	}
	wg.Wait()
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	files := trailFiles(t, dir)
	seen := map[string]int{}
	sum, err := Read(files, func(r Record) error {
		if c, ok := r.Fields[grantretry.FieldCorrelationID].(string); ok {
			seen[c]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 || len(sum.Files) != len(files) {
		t.Errorf("%d files, %d in the summary, want 3 or more", len(files), len(sum.Files))
	}
	// trail_opened, then one trail_continued per rotated file
	if want := writers*each + len(files); sum.Records != want || sum.Messages[grantretry.MsgAttempt] != writers*each {
		t.Errorf("%d records (%d attempts), want %d (%d)", sum.Records, sum.Messages[grantretry.MsgAttempt], want, writers*each)
	}
	for c, n := range seen {
		if n != 1 {
			t.Errorf("%s recorded %d times", c, n)
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct records, want %d", len(seen), writers*each)
	}
}

// Many goroutines each write a record and sync, as concurrent calls end,
// while the trail rotates. Sync holds no lock on writers during its fsync;
// still, when a Sync returns, the head covers the record written before it
// (so that record is durable), the heads only move forward, and the chain
// is whole.
func TestAuditTrailConcurrentSyncsCoverTheirRecords(t *testing.T) {
	const writers, each = 8, 25
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.jsonl")
	trail := openTestTrail(t, path, Options{MaxFileSize: 8 << 10})
	log := trailLogger(trail, zapcore.DefaultClock)
	var mu sync.Mutex
	headAfter := map[string]uint64{} // record -> head seq once its Sync returned
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				corr := fmt.Sprintf("w%d-%d", w, i)
				logAttempt(log, corr, 1)
				if err := trail.Sync(); err != nil {
					t.Error(err)
					return
				}
				head, err := readTrailHead(path + ".head")
				if err != nil || head == nil {
					t.Errorf("head after a sync: %v, %v", head, err)
					return
				}
				mu.Lock()
				headAfter[corr] = head.Seq
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	seqOf := map[string]uint64{}
	sum, err := Read(trailFiles(t, dir), func(r Record) error {
		if c, ok := r.Fields[grantretry.FieldCorrelationID].(string); ok {
			seqOf[c] = r.Seq
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Files) < 2 || len(seqOf) != writers*each {
		t.Fatalf("%d files, %d records of the writers; want a rotation and %d", len(sum.Files), len(seqOf), writers*each)
	}
	for corr, seq := range seqOf {
		if headAfter[corr] < seq {
			t.Errorf("record %s is seq %d, but the head said seq %d once its Sync returned", corr, seq, headAfter[corr])
		}
	}
}

// Rotation renames the live file to the next six-digit index and starts
// the new one with trail_continued, naming the file the chain comes from.
func TestAuditTrailRotationContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{MaxFileSize: 2000})
	log := trailLogger(trail, zapcore.DefaultClock)
	for i := range 12 {
		logAttempt(log, "c", i+1)
	}
	trail.Close()
	files := trailFiles(t, dir)
	if len(files) < 3 || filepath.Base(files[0]) != "trail.jsonl.000001" || filepath.Base(files[1]) != "trail.jsonl.000002" {
		t.Fatalf("files %q", files)
	}
	for i, f := range files[1:] {
		first := string(readLines(t, f)[0])
		want := fmt.Sprintf(`"msg":"%s","file":"trail.jsonl","prev_file":"%s"`, MsgContinued, filepath.Base(files[i]))
		if !strings.Contains(first, want) {
			t.Errorf("%s starts with %s, want %s", f, first, want)
		}
	}
	if _, err := Verify(files...); err != nil {
		t.Error(err)
	}
}

// Write refuses, writing nothing, anything that is not a sequence of
// one-line JSON objects it can chain, and the trail is broken from then on.
func TestAuditTrailRefusesMalformedRecords(t *testing.T) {
	for _, tc := range []struct {
		name, p string
	}{
		{"no newline", `{"msg":"x"}`},
		{"not JSON", "not json\n"},
		{"JSON array", "[1,2]\n"},
		{"invalid JSON", `{"msg":"x",}` + "\n"},
		{"empty object", "{ }\n"},
		{"second line bad", `{"msg":"x"}` + "\n" + `{"msg":` + "\n"},
		{"blank line", `{"msg":"x"}` + "\n\n"},
		{"space after brace", `{"msg":"x"} ` + "\n"},
		{"seq key", `{"msg":"x","seq":3}` + "\n"},
		{"nested hash key", `{"msg":"x","o":{"hash":"h"}}` + "\n"},
		{"seq key, space before the colon", `{"msg":"x","seq" :7}` + "\n"},
		{"prev key, tab before the colon", "{\"msg\":\"x\",\"prev\"\t:\"p\"}\n"},
		{"hash key escaped", `{"msg":"x","\u0068ash":"h"}` + "\n"},
		{"nested seq key escaped", `{"msg":"x","o":[{"s\u0065q" : 1}]}` + "\n"},
		{"too long", `{"msg":"` + strings.Repeat("x", maxRecordBytes) + `"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trail.jsonl")
			trail := openTestTrail(t, path, Options{})
			before := readLines(t, path)
			n, err := trail.Write([]byte(tc.p))
			if n != 0 || !errors.Is(err, grantretry.ErrAuditTrail) {
				t.Fatalf("Write = %d, %v; want 0 and ErrAuditTrail", n, err)
			}
			if after := readLines(t, path); len(after) != len(before) {
				t.Errorf("%d records after the refusal, want %d", len(after), len(before))
			}
			if !errors.Is(trail.Err(), err) {
				t.Errorf("Err() = %v, want the refusal", trail.Err())
			}
		})
	}
}

// Keys that only look like the chain's are not refused: a quote escaped
// inside a key, the name inside a value, a longer name.
func TestAuditTrailAcceptsKeysThatOnlyLookReserved(t *testing.T) {
	for _, rec := range []string{
		`{"msg":"x","a\"seq":1}`,
		`{"msg":"x","a\\\"hash" :1}`,
		`{"msg":"\"seq\":","v":"\"prev\" :"}`,
		`{"msg":"x","\u0073eqs":1,"hash_of":"h"}`,
		`{"msg":"x","v":"\u0068ash"}`,
	} {
		t.Run(rec, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trail.jsonl")
			trail := openTestTrail(t, path, Options{})
			if _, err := trail.Write([]byte(rec + "\n")); err != nil {
				t.Fatalf("Write: %v", err)
			}
			trail.Close()
			if _, err := Verify(path); err != nil {
				t.Error(err)
			}
		})
	}
}

// Several records in one Write are each chained.
func TestAuditTrailWriteChainsEachLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	p := []byte(`{"msg":"a"}` + "\n" + `{"msg":"b"}` + "\n")
	if n, err := trail.Write(p); n != len(p) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	trail.Close()
	if got := messages(t, filepath.Dir(path)); !slices.Equal(got, []string{MsgOpened, "a", "b"}) {
		t.Errorf("records %q", got)
	}
}

// A write failure is returned, and every later Write and Sync fails with
// an error wrapping it: a chain with a hole does not go on.
func TestAuditTrailWriteFailureIsSticky(t *testing.T) {
	trail := openTestTrail(t, filepath.Join(t.TempDir(), "trail.jsonl"), Options{})
	trail.mu.Lock()
	trail.f.Close() // the disk goes away under the trail
	trail.mu.Unlock()
	rec := []byte(`{"msg":"a"}` + "\n")
	_, first := trail.Write(rec)
	if !errors.Is(first, grantretry.ErrAuditTrail) || !errors.Is(first, os.ErrClosed) {
		t.Fatalf("Write: %v, want ErrAuditTrail wrapping os.ErrClosed", first)
	}
	if trail.Err() != first {
		t.Errorf("Err() = %v, want %v", trail.Err(), first)
	}
	_, later := trail.Write(rec)
	if err := trail.Sync(); !errors.Is(err, first) {
		t.Errorf("Sync after the failure: %v, want it to wrap %v", err, first)
	}
	if !errors.Is(later, first) || !errors.Is(later, grantretry.ErrAuditTrail) {
		t.Errorf("Write after the failure: %v, want it to wrap %v", later, first)
	}
	if err := trail.Close(); !errors.Is(err, first) {
		t.Errorf("Close: %v, want it to wrap %v", err, first)
	}
}

// Close syncs; writes after it fail, and Err says the trail is closed.
func TestAuditTrailClosedRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	if _, err := trail.Write([]byte(`{"msg":"a"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := trail.Write([]byte(`{"msg":"b"}` + "\n")); !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Errorf("Write after Close: %v", err)
	}
	if !errors.Is(trail.Err(), grantretry.ErrAuditTrail) {
		t.Errorf("Err() after Close = %v", trail.Err())
	}
	if err := trail.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if sum, err := Verify(path); err != nil || sum.HeadSeq != 2 {
		t.Errorf("after Close: head seq %d, %v; want 2 (synced)", sum.HeadSeq, err)
	}
}

// Sync records the last record in the head file; with nothing written
// since, it does not touch the disk.
func TestAuditTrailSyncWritesHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	if _, err := trail.Write([]byte(`{"msg":"a"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := trail.Sync(); err != nil {
		t.Fatal(err)
	}
	head, err := readTrailHead(path + ".head")
	if err != nil || head == nil {
		t.Fatalf("head: %v, %v", head, err)
	}
	last := mustLink(t, readLines(t, path)[1])
	if head.Seq != 2 || head.Hash != hex.EncodeToString(last.hash[:]) || head.File != "trail.jsonl" {
		t.Errorf("head %+v, want seq 2 hash %x in trail.jsonl", head, last.hash)
	}
	os.Remove(path + ".head")
	if err := trail.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".head"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a Sync with nothing new wrote the head: %v", err)
	}
}

func TestOpenAuditTrailRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		o    Options
	}{
		{"empty path", "", Options{}},
		{"negative size", "trail.jsonl", Options{MaxFileSize: -1}},
		{"missing directory", "no/such/dir/trail.jsonl", Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path != "" {
				path = filepath.Join(t.TempDir(), path)
			}
			if tr, err := Open(path, tc.o); !errors.Is(err, grantretry.ErrAuditTrail) || tr != nil {
				t.Errorf("OpenAuditTrail = %v, %v; want nil and ErrAuditTrail", tr, err)
			}
		})
	}
}

// A rotation that closes the live file while Sync is between its snapshot
// and its fsync: Sync goes on to the new live file, returns nil with the
// head at the last record, and a later Sync syncs the new file.
func TestAuditTrailSyncCoversARotationDuringItsFsync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.jsonl")
	trail := openTestTrail(t, path, Options{MaxFileSize: 2000})
	log := trailLogger(trail, zapcore.DefaultClock)
	logAttempt(log, "a", 1)
	var synced []*os.File // the file each fsync was about to sync
	trail.beforeFsync = func() {
		trail.mu.Lock()
		synced = append(synced, trail.f)
		trail.mu.Unlock()
		if len(synced) == 1 {
			for i := range 4 { // enough to rotate
				logAttempt(log, "b", i+1)
			}
		}
	}
	if err := trail.Sync(); err != nil {
		t.Fatalf("Sync with a rotation during its fsync: %v", err)
	}
	if len(trailFiles(t, dir)) != 2 || len(synced) != 2 || synced[0] == synced[1] {
		t.Fatalf("%d files, fsyncs of %v: want a rotation and a second fsync of the new live file", len(trailFiles(t, dir)), synced)
	}
	checkHeadAtLast(t, trail)
	logAttempt(log, "c", 1)
	if err := trail.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 3 || synced[2] != synced[1] {
		t.Errorf("the later Sync did not sync the new live file")
	}
	checkHeadAtLast(t, trail)
	if _, err := Verify(trailFiles(t, dir)...); err != nil {
		t.Error(err)
	}
}

// checkHeadAtLast checks that the head names the last record written.
func checkHeadAtLast(t *testing.T, trail *Trail) {
	t.Helper()
	trail.mu.Lock()
	seq, last := trail.seq, trail.last
	trail.mu.Unlock()
	head, err := readTrailHead(trail.head)
	if err != nil || head == nil || head.Seq != seq || head.Hash != hex.EncodeToString(last[:]) {
		t.Errorf("head %+v (%v), want seq %d hash %x", head, err, seq, last)
	}
}

// lockCheckClock counts the calls of Now made while its trail's mu was
// held, which STYLE forbids: a Clock is the caller's code.
type lockCheckClock struct {
	trail       atomic.Pointer[Trail]
	calls, held atomic.Int32
}

func (c *lockCheckClock) Now() time.Time {
	if t := c.trail.Load(); t != nil {
		c.calls.Add(1)
		if !t.mu.TryLock() {
			c.held.Add(1)
		} else {
			t.mu.Unlock()
		}
	}
	return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
}

func (c *lockCheckClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// The trail reads its Clock before it takes mu, also for the
// trail_continued of a rotation a Write causes.
func TestAuditTrailReadsClockWithoutLock(t *testing.T) {
	dir := t.TempDir()
	clk := &lockCheckClock{}
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{MaxFileSize: 2000, Clock: clk})
	clk.trail.Store(trail)
	log := trailLogger(trail, zapcore.DefaultClock)
	for i := range 8 {
		logAttempt(log, "c", i+1)
	}
	if n := len(trailFiles(t, dir)); n < 2 {
		t.Fatalf("%d files: no rotation", n)
	}
	if clk.calls.Load() == 0 || clk.held.Load() != 0 {
		t.Errorf("Clock.Now called %d times, %d of them with mu held", clk.calls.Load(), clk.held.Load())
	}
}
