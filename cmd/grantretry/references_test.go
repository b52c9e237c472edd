package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackerRef matches a reference to an issue tracker: "issue 11",
// "issues 9-12", "#179".
var trackerRef = regexp.MustCompile(`(?i)\bissues?\s+#?\d+|#\d+`)

// hexWord matches a word that could be an abbreviated commit hash.
var hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// commitHashes returns the hashes of every commit in the repository's
// history. Without one it skips the test, or fails it under CI, where
// the history must be there.
func commitHashes(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "log", "--all", "--format=%H").Output()
	hashes := strings.Fields(string(out))
	if err != nil || len(hashes) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("no git history to take commit hashes from (%v); CI must check out the history", err)
		}
		t.Skipf("no git history to take commit hashes from: %v", err)
	}
	return hashes
}

// The help of every command and subcommand, the version and the output of
// short sim runs (with their Markdown) name no tracker issue and no commit:
// the tools speak of the version in front of the reader, not of the
// history behind it.
func TestOutputNamesNoIssueOrCommit(t *testing.T) {
	hashes := commitHashes(t)
	dir := t.TempDir()
	md, lowMD := filepath.Join(dir, "run.md"), filepath.Join(dir, "low.md")
	var all bytes.Buffer
	for _, args := range [][]string{
		{"help"}, {"version"}, {"version", "-help"},
		{"sim", "-help"}, {"audit", "-help"}, {"audit", "verify", "-help"}, {"audit", "trace", "-help"},
		{"deadletter", "-help"}, {"deadletter", "list", "-help"}, {"deadletter", "show", "-help"},
		{"deadletter", "redeliver", "-help"},
		{"sim", "-policies", "naive,default", "-workers", "4", "-capacity", "5",
			"-outage-start", "2s", "-outage", "3s", "-run", "8s", "-scale", "100", "-md", md},
		{"sim", "-scenario", "low-volume", "-policies", "default", "-run", "12m", "-blip-at", "2m",
			"-seeds", "1", "-probes", "2m", "-md", lowMD},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: exit status %d; stderr:\n%s", strings.Join(args, " "), code, stderr.String())
		}
		all.Write(stdout.Bytes())
		all.Write(stderr.Bytes())
	}
	for _, p := range []string{md, lowMD} {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(doc)
	}
	text := all.String()
	if !strings.Contains(text, "Storm targets") || !strings.Contains(text, "Low-volume targets") {
		t.Fatalf("the sim runs printed no targets:\n%s", text)
	}
	for _, m := range trackerRef.FindAllString(text, -1) {
		t.Errorf("the output names a tracker issue: %q", m)
	}
	for _, w := range hexWord.FindAllString(text, -1) {
		for _, h := range hashes {
			if strings.HasPrefix(h, w) {
				t.Errorf("the output names commit %s: %q", h, w)
				break
			}
		}
	}
}

// The patterns catch what they are for, and not what the output holds
// for other reasons.
func TestReferencePatterns(t *testing.T) {
	for _, s := range []string{"targets of issue 11", "Issue 3's", "issues 9-12", "see #179", "ISSUE #4"} {
		if !trackerRef.MatchString(s) {
			t.Errorf("%q is not caught", s)
		}
	}
	for _, s := range []string{"gRFC A6", "# Storm simulator run", "issue a retry", "RFC 9110"} {
		if trackerRef.MatchString(s) {
			t.Errorf("%q is caught", s)
		}
	}
	if got := hexWord.FindAllString("commit bcc4ca1, seed 1, 1m0s, deadbeef00", -1); strings.Join(got, ",") != "bcc4ca1,deadbeef00" {
		t.Errorf("hex words %q", got)
	}
}
