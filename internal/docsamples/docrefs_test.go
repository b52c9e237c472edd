package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The pages a reader gets: README.md and every text file under docs/.
// They are guides for the version in front of the reader, so they name no
// tracker issue and no commit: the history lives in the commits.

// trackerRefs are the ways a page can point at this project's tracker:
// "issue 15", "Issues 9 to 12", "the defects issue", "the issue's load",
// and histories of the sessions that worked on it.
var trackerRefs = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bissues?\s+#?\d+`),
	regexp.MustCompile(`(?i)\b(the|this|that|an|an earlier|a later)\s+([a-z-]+\s+)?issue('s)?\b`),
	regexp.MustCompile(`(?i)\b(this|that|a later|an earlier|the earlier|the later|the previous|the review's|a)\s+session\b`),
}

// hashRef is a bare "#12". One is a tracker reference unless it follows a
// name with a '-', '/' or '.' in it: another project's issue cited as a
// source ("go-retryablehttp #247, #127", "dotnet/extensions #5248") or a
// flag's index in a program's output ("-header-env #2").
var hashRef = regexp.MustCompile(`#\d+\b`)

var citedBefore = regexp.MustCompile(`(?:^|\s|\(|\[)[\w.]*[-/.][\w./-]*\s?(?:#\d+,\s)*$`)

// hexWord is a word that could be a commit hash, short or full.
var hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".md", ".txt", ".yml", ".yaml", ".svg":
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// eachLine calls f with each line of each page and where it is.
func eachLine(t *testing.T, root string, f func(where, line string)) {
	t.Helper()
	for _, path := range docFiles(t, root) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for n := 1; sc.Scan(); n++ {
			f(fmt.Sprintf("%s:%d", rel, n), sc.Text())
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
}

func TestDocsNameNoTrackerIssue(t *testing.T) {
	root := repoRoot(t)
	eachLine(t, root, func(where, line string) {
		for _, re := range trackerRefs {
			for _, m := range re.FindAllString(line, -1) {
				t.Errorf("%s: %q: a tracker reference (the page is a guide for this version; the history is in the commits)", where, m)
			}
		}
		if strings.HasSuffix(where[:strings.LastIndex(where, ":")], ".svg") {
			return // "#444444" is a colour there
		}
		for _, loc := range hashRef.FindAllStringIndex(line, -1) {
			if citedBefore.MatchString(line[:loc[0]]) {
				continue
			}
			t.Errorf("%s: %q: a tracker reference", where, line[loc[0]:loc[1]])
		}
	})
}

func TestDocsNameNoCommit(t *testing.T) {
	root := repoRoot(t)
	hashes := commitHashes(t, root)
	eachLine(t, root, func(where, line string) {
		for _, w := range hexWord.FindAllString(line, -1) {
			i := sort.SearchStrings(hashes, w)
			if i < len(hashes) && strings.HasPrefix(hashes[i], w) {
				t.Errorf("%s: %q is commit %s (the page is a guide for this version; the history is in the commits)", where, w, hashes[i][:12])
			}
		}
	})
}

// commitHashes returns the full hash of every commit git knows of,
// sorted. Without git or the history the test is skipped, except under
// CI, where the history must be there.
func commitHashes(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "log", "--all", "--format=%H").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		msg := fmt.Sprintf("no git history to take commit hashes from (git log: %v)", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; CI must check out the history")
		}
		t.Skip(msg)
	}
	hashes := strings.Fields(string(out))
	sort.Strings(hashes)
	return hashes
}

// repoRoot is the module's root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository's root: %v", err)
	}
	return root
}
