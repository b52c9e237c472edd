package trail

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.uber.org/zap/zapcore"
)

// Reopening a trail continues its chain, with trail_reopened.
func TestAuditTrailReopenContinuesChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.jsonl")
	for range 2 {
		trail := openTestTrail(t, path, Options{})
		logAttempt(trailLogger(trail, zapcore.DefaultClock), "c", 1)
		if err := trail.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{MsgOpened, grantretry.MsgAttempt, MsgReopened, grantretry.MsgAttempt}
	if got := messages(t, dir); !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
}

// A torn last line (a crash in the middle of an append) is cut off on
// open and recorded, with its size and hash; the chain goes on whole.
func TestAuditTrailRecoversTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		torn func(last []byte) []byte
	}{
		{"partial line", func(last []byte) []byte { return last[:len(last)/2] }},
		{"line that does not verify", func(last []byte) []byte {
			return bytes.Replace(last, []byte("grantretry.attempt"), []byte("grantretry.attemPt"), 1)
		}},
		{"zeros", func(last []byte) []byte { return make([]byte, 300) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "trail.jsonl")
			trail := openTestTrail(t, path, Options{})
			logAttempt(trailLogger(trail, zapcore.DefaultClock), "c", 1)
			trail.Close()
			lines := readLines(t, path)
			// the record that was being appended when the crash came
			torn := tc.torn(bytes.Replace(lines[1], []byte(`"seq":2`), []byte(`"seq":3`), 1))
			appendBytes(t, path, torn)
			trail = openTestTrail(t, path, Options{})
			trail.Close()
			want := []string{MsgOpened, grantretry.MsgAttempt, MsgRecovered, MsgReopened}
			if got := messages(t, dir); !slices.Equal(got, want) {
				t.Errorf("records %q, want %q", got, want)
			}
			sum := sha256.Sum256(torn)
			rec := string(readLines(t, path)[2])
			for _, s := range []string{fmt.Sprintf(`"torn_bytes":%d`, len(torn)), `"torn_sha256":"` + hex.EncodeToString(sum[:])} {
				if !strings.Contains(rec, s) {
					t.Errorf("trail_recovered lacks %s: %s", s, rec)
				}
			}
		})
	}
}

// A trail that lost synced records, or is damaged before its last line, is
// not opened: cutting it would hide the damage.
func TestAuditTrailRefusesDamagedTrail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"synced records cut at a line boundary", func(t *testing.T, path string) {
			lines := readLines(t, path)
			writeLines(t, path, lines[:len(lines)-2])
		}},
		{"a record before the last edited", func(t *testing.T, path string) {
			lines := readLines(t, path)
			lines[1] = bytes.Replace(lines[1], []byte(`"attempt":1`), []byte(`"attempt":7`), 1)
			writeLines(t, path, lines)
		}},
		{"synced last record edited", func(t *testing.T, path string) {
			lines := readLines(t, path)
			lines[len(lines)-1] = bytes.Replace(lines[len(lines)-1], []byte(`"attempt":3`), []byte(`"attempt":7`), 1)
			writeLines(t, path, lines)
		}},
		{"live file deleted", func(t *testing.T, path string) { os.Remove(path) }},
		{"a line before the last zeroed, no head", func(t *testing.T, path string) {
			os.Remove(path + ".head")
			lines := readLines(t, path)
			lines[2] = append(make([]byte, len(lines[2])-1), '\n')
			writeLines(t, path, lines)
		}},
		{"head not JSON", func(t *testing.T, path string) { os.WriteFile(path+".head", []byte("{"), 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trail.jsonl")
			trail := openTestTrail(t, path, Options{})
			log := trailLogger(trail, zapcore.DefaultClock)
			for i := range 3 {
				logAttempt(log, "c", i+1)
			}
			trail.Close()
			tc.damage(t, path)
			before, _ := os.ReadFile(path)
			if tr, err := Open(path, Options{}); !errors.Is(err, grantretry.ErrAuditTrail) {
				if tr != nil {
					tr.Close()
				}
				t.Fatalf("OpenAuditTrail: %v, want ErrAuditTrail", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
				t.Error("the refused open changed the live file")
			}
		})
	}
}

// A crash between renaming the live file and creating the next one leaves
// no live file: the chain goes on from the newest rotated file.
func TestAuditTrailReopenAfterCrashMidRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	logAttempt(trailLogger(trail, zapcore.DefaultClock), "c", 1)
	trail.Close()
	if err := os.Rename(path, path+".000001"); err != nil {
		t.Fatal(err)
	}
	trail = openTestTrail(t, path, Options{})
	trail.Close()
	want := []string{MsgOpened, grantretry.MsgAttempt, MsgContinued, MsgReopened}
	if got := messages(t, dir); !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
}

// crashDirEnv switches TestAuditTrailCrashChild on, in a child process,
// with the trail's directory.
const crashDirEnv = "GRANTRETRY_TEST_TRAIL_CRASH_DIR"

// TestAuditTrailCrashChild is the process the crash tests kill: it writes
// records as fast as it can, every 5th a disposition after which it syncs,
// and prints "synced SEQ HASH" only once Sync has returned.
func TestAuditTrailCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the crash tests' child process")
	}
	trail, err := Open(filepath.Join(dir, "trail.jsonl"), Options{MaxFileSize: 8 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	log := trailLogger(trail, zapcore.DefaultClock)
	for n := 1; ; n++ {
		corr := fmt.Sprintf("call-%d", (n+4)/5)
		if n%5 != 0 {
			logAttempt(log, corr, n%5)
			continue
		}
		logDisposition(log, corr, grantretry.Succeeded)
		if err := trail.Sync(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		trail.mu.Lock()
		seq, last := trail.seq, trail.last
		trail.mu.Unlock()
		fmt.Printf("synced %d %x\n", seq, last)
	}
}

// killChild runs TestAuditTrailCrashChild on dir, SIGKILLs it once it has
// reported n syncs, and returns the hash of each synced seq.
func killChild(t *testing.T, dir string, n int) map[uint64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAuditTrailCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	synced := map[uint64]string{}
	sc := bufio.NewScanner(out)
	for len(synced) < n && sc.Scan() {
		var seq uint64
		var h string
		if _, err := fmt.Sscanf(sc.Text(), "synced %d %s", &seq, &h); err == nil {
			synced[seq] = h
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if len(synced) < n {
		t.Fatalf("the child reported %d syncs, want %d; its stderr:\n%s", len(synced), n, stderr.String())
	}
	return synced
}

// checkSynced reopens the trail in dir, verifies it, and checks that every
// record reported synced is in it, unchanged.
func checkSynced(t *testing.T, dir string, synced map[uint64]string) []string {
	t.Helper()
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{})
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	var msgs []string
	_, err := Read(trailFiles(t, dir), func(r Record) error {
		got[r.Seq] = r.Hash
		msgs = append(msgs, r.Msg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for seq, h := range synced {
		if got[seq] != h {
			t.Errorf("synced record seq %d: hash %q in the trail, %q reported", seq, got[seq], h)
		}
	}
	return msgs
}

// A process killed while writing loses no record it had synced: after a
// reopen the trail verifies and holds every one, unchanged.
func TestAuditTrailCrashKeepsSyncedRecords(t *testing.T) {
	dir := t.TempDir()
	synced := killChild(t, dir, 40)
	msgs := checkSynced(t, dir, synced)
	if !slices.Contains(msgs, MsgReopened) {
		t.Error("no trail_reopened after the crash")
	}
}

// A crash in the middle of an append, which a kill leaves as a torn last
// line, is cut off on reopen and recorded; no synced record is lost.
func TestAuditTrailCrashMidAppendRecovers(t *testing.T) {
	dir := t.TempDir()
	synced := killChild(t, dir, 30)
	appendBytes(t, filepath.Join(dir, "trail.jsonl"), []byte(`{"level":"info","ts":"2026-11-30T09:00:00Z","msg":"grantretry.attempt","correlation_id":"call-`))
	msgs := checkSynced(t, dir, synced)
	if !slices.Contains(msgs, MsgRecovered) {
		t.Error("no trail_recovered after the torn append")
	}
}

// killTrail leaves trail as a process killed mid-stream would: records
// written, the last ones never synced, nothing closed cleanly.
func killTrail(t *testing.T, trail *Trail) {
	t.Helper()
	trail.mu.Lock()
	defer trail.mu.Unlock()
	trail.f.Close()
	trail.fault.CompareAndSwap(nil, &trailFault{first: errClosed, later: errClosed})
	trail.closed = true
}

// After a power loss the unsynced tail, after the record the head says
// was synced, may hold pages never written (zeros) or garbage, followed by
// more lines: it is cut from its first bad line to the end, recorded, and
// the chain goes on.
func TestAuditTrailCutsDamagedTailAfterHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(lines [][]byte) // lines[3] and on were never synced
	}{
		{"a zeroed page across two records", func(lines [][]byte) {
			page := make([]byte, len(lines[3])+len(lines[4])/2)
			copy(lines[4], page[len(lines[3]):])
			copy(lines[3], page)
		}},
		{"a line longer than a record", func(lines [][]byte) {
			lines[3] = append(bytes.Repeat([]byte{'x'}, 2*maxRecordBytes), '\n')
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "trail.jsonl")
			trail := openTestTrail(t, path, Options{})
			log := trailLogger(trail, zapcore.DefaultClock)
			logDisposition(log, "a", grantretry.Succeeded)
			if err := trail.Sync(); err != nil {
				t.Fatal(err)
			}
			for i := range 4 { // attempts of calls in flight
				logAttempt(log, "b", i+1)
			}
			killTrail(t, trail)
			lines := readLines(t, path)
			tc.damage(lines)
			writeLines(t, path, lines)
			offset := len(lines[0]) + len(lines[1]) + len(lines[2])
			torn := bytes.Join(lines[3:], nil)

			trail = openTestTrail(t, path, Options{})
			if err := trail.Close(); err != nil {
				t.Fatal(err)
			}
			want := []string{MsgOpened, grantretry.MsgDisposition, grantretry.MsgAttempt, MsgRecovered, MsgReopened}
			if got := messages(t, dir); !slices.Equal(got, want) {
				t.Fatalf("records %q, want %q", got, want)
			}
			sum := sha256.Sum256(torn)
			rec := string(readLines(t, path)[3])
			for _, s := range []string{fmt.Sprintf(`"torn_offset":%d`, offset), fmt.Sprintf(`"torn_bytes":%d`, len(torn)),
				`"torn_sha256":"` + hex.EncodeToString(sum[:])} {
				if !strings.Contains(rec, s) {
					t.Errorf("trail_recovered lacks %s: %s", s, rec)
				}
			}
		})
	}
}
