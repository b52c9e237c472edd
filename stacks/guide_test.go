package stacks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a markdown file.
func goBlocks(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^```go\n(.*?)^```$").FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestGuidesShowTheCodeTheTestsCompile holds docs/stacking.md's code
// blocks, and the README's quick start, to the code this module compiles
// and tests: each block stands in one of its files as it is, or indented
// by one tab (a piece of a test's body).
func TestGuidesShowTheCodeTheTestsCompile(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(data)
	}
	code := src.String()
	indented := regexp.MustCompile("(?m)^(.)").ReplaceAllString
	for _, doc := range []struct {
		path string
		min  int
		pick func(string) bool
	}{
		{"../docs/stacking.md", 11, func(string) bool { return true }},
		// The README's other blocks are fragments; its quick start is whole.
		{"../README.md", 1, func(b string) bool { return strings.HasPrefix(b, "import (") }},
	} {
		n := 0
		for _, b := range goBlocks(t, doc.path) {
			if !doc.pick(b) {
				continue
			}
			n++
			if !strings.Contains(code, b) && !strings.Contains(code, indented(b, "\t$1")) {
				t.Errorf("%s: this block is in no file of stacks/:\n%s", doc.path, b)
			}
		}
		if n < doc.min {
			t.Errorf("%s: %d code blocks checked, want at least %d", doc.path, n, doc.min)
		}
	}
}
