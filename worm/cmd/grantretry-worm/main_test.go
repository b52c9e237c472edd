package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
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

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "-version"} {
		code, out, _ := runCmd(arg)
		if code != 0 || out != "grantretry-worm (devel)\n" {
			t.Errorf("%s: exit %d, %q; want 0 and the module version, (devel) from a checkout", arg, code, out)
		}
	}
}

func TestMisuseExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"ship", "-bucket", "b"},
		{"verify", "x.jsonl"},
		{"ship", "-nope", "-bucket", "b", "x"},
		{"ship", "-follow", "-bucket", "b", "a", "b"},
	} {
		code, _, stderr := runCmd(args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, stderr)
		}
		if len(args) > 0 && !strings.HasPrefix(stderr, "grantretry-worm") && !strings.Contains(stderr, "flag provided but not defined") {
			t.Errorf("%q: stderr %q, want it to start grantretry-worm:", args, stderr)
		}
	}
}

// A verify that cannot look exits 2, not 1: 1 is kept for a problem found.
func TestVerifyThatCannotLookExitsTwo(t *testing.T) {
	live := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(live, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"verify", "-endpoint", "http://127.0.0.1:9", "-bucket", "b", "-prefix", "p", live},
		{"verify", "-endpoint", "http://127.0.0.1:9", "-bucket", "b", "-prefix", "p", filepath.Join(t.TempDir(), "missing.jsonl")},
	} {
		if code, _, stderr := runCmd(args...); code != 2 || !strings.Contains(stderr, "not verified") {
			t.Errorf("%q: exit %d, %q; want 2, not verified", args, code, stderr)
		}
	}
}

// ship then verify, as checks outside the repository run them; then a
// record edited: exit 1, naming it.
func TestShipVerifyAndTamper(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t)
	var b [6]byte
	rand.Read(b[:])
	prefix := "cmd-" + hex.EncodeToString(b[:])
	dir := t.TempDir()
	live := filepath.Join(dir, "audit.jsonl")
	tr, err := trail.Open(live, trail.Options{MaxFileSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		tr.Write([]byte(`{"level":"info","ts":"2026-12-01T10:00:00Z","msg":"grantretry.disposition","disposition":"succeeded","n":` + string(rune('0'+i%10)) + `}` + "\n"))
	}
	tr.Close()
	files, _ := filepath.Glob(live + "*")
	flags := []string{"-endpoint", endpoint, "-bucket", bucket, "-prefix", prefix, "-retention", "2h"}
	if code, out, stderr := runCmd(append(append([]string{"ship"}, flags...), files...)...); code != 0 {
		t.Fatalf("ship: exit %d\n%s%s", code, out, stderr)
	}
	vflags := append(flags[:6:6], "-min-retention", "1h")
	code, out, stderr := runCmd(append(append([]string{"verify"}, vflags...), files...)...)
	if code != 0 || !strings.Contains(out, "stream audit.jsonl: ") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, stderr)
	}
	data, _ := os.ReadFile(live)
	os.WriteFile(live, bytes.Replace(data, []byte(`"succeeded"`), []byte(`"abandoned"`), 1), 0o600)
	code, out, stderr = runCmd(append(append([]string{"verify"}, vflags...), files...)...)
	if code != 1 || !strings.Contains(out, "FAIL tampered: stream audit.jsonl seq ") || !strings.Contains(out, live+" line ") ||
		!strings.HasPrefix(stderr, "grantretry-worm: verify: ") {
		t.Fatalf("verify after an edit: exit %d\n%s%s", code, out, stderr)
	}
}

// testPrefix is a prefix of the test's own in the test bucket.
func testPrefix(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:])
	return "cmd-" + hex.EncodeToString(b[:])
}

// writeTrail writes n records through a trail in dir and returns its
// files, the head included.
func writeTrail(t *testing.T, dir string, n int) []string {
	t.Helper()
	live := filepath.Join(dir, "audit.jsonl")
	tr, err := trail.Open(live, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := tr.Write([]byte(`{"level":"info","ts":"2026-12-01T10:00:00Z","msg":"grantretry.disposition","disposition":"succeeded","n":` + strconv.Itoa(i) + "}\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(live + "*")
	return files
}

// ship -follow stops, exiting 1, when the shipper stops for good (a local
// record that does not continue the anchored chain), rather than run on
// writing heartbeats; its error is a plain line, and a verify of the
// store alone says the stream stopped.
func TestShipFollowExitsWhenTheStreamStops(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t)
	flags := []string{"-endpoint", endpoint, "-bucket", bucket, "-prefix", testPrefix(t)}
	shipped := writeTrail(t, t.TempDir(), 10)
	if code, out, stderr := runCmd(append(append([]string{"ship", "-retention", "2h"}, flags...), shipped...)...); code != 0 {
		t.Fatalf("ship: exit %d\n%s%s", code, out, stderr)
	}
	// Another trail under the same name, whose records after the
	// anchored ones do not continue the anchored chain.
	other := writeTrail(t, t.TempDir(), 20)
	live := trail.LiveFile(other[0])
	done := make(chan [3]string, 1)
	go func() {
		code, out, stderr := runCmd(append(append([]string{"ship", "-follow", "-retention", "2h", "-queue", t.TempDir()}, flags...), live)...)
		done <- [3]string{strconv.Itoa(code), out, stderr}
	}()
	var res [3]string
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Signal(os.Interrupt) // caught by the command, which then returns
		}
		<-done
		t.Fatal("ship -follow runs on after the shipper stopped the stream for good")
	}
	if res[0] != "1" || !strings.HasPrefix(res[2], "grantretry") || strings.Contains(res[2], "{") || strings.Contains(res[2], "stacktrace") || strings.Contains(res[2], ".go:") {
		t.Fatalf("ship -follow of a stream that stops: exit %s, stderr %q; want 1 and plain lines, no JSON or stack trace", res[0], res[2])
	}
	code, out, stderr := runCmd(append([]string{"verify", "-min-retention", "1h"}, flags...)...)
	if code != 1 || !strings.Contains(out, "FAIL stopped: stream audit.jsonl") || !strings.Contains(out, "(stopped)") || !strings.Contains(out, " in 1 segment, ") {
		t.Fatalf("verify of the store alone after the stop: exit %d\n%s%s; want 1, the stream stopped, its one segment", code, out, stderr)
	}
}

// A verify that finds nothing anchored fails: an empty or mistyped prefix
// must not pass an auditor's scheduled check, with or without the local
// files.
func TestVerifyOfNothingAnchoredFails(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t)
	flags := []string{"verify", "-endpoint", endpoint, "-bucket", bucket, "-prefix", testPrefix(t)}
	for _, args := range [][]string{flags, append(flags, writeTrail(t, t.TempDir(), 5)...)} {
		code, out, stderr := runCmd(args...)
		if code != 1 || !strings.Contains(out, "FAIL nothing-anchored: ") {
			t.Errorf("%q: exit %d\n%s%s; want 1, nothing anchored", args[len(flags)-1:], code, out, stderr)
		}
	}
}
