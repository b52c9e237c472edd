package grantretry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every sample of testdata/limits says what in it was captured and what
// was assembled, and a sample captured whole keeps its status line.
func TestLimitSamplesSayWhatWasCapturedAndWhatAssembled(t *testing.T) {
	sources, _ := filepath.Glob(filepath.Join("testdata", "limits", "*.source"))
	if len(sources) == 0 {
		t.Fatal("no samples")
	}
	for _, f := range sources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".source")
		var captured, assembled string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "captured: "); ok {
				captured = v
			}
			if v, ok := strings.CutPrefix(line, "assembled: "); ok && assembled == "" {
				assembled = v
			}
		}
		if captured == "" || assembled == "" {
			t.Errorf("%s.source lacks a captured: or an assembled: line", name)
			continue
		}
		if !strings.HasPrefix(captured, "the whole answer") || assembled != "nothing." {
			continue
		}
		h, err := os.ReadFile(filepath.Join("testdata", "limits", name+".headers"))
		if err != nil || !strings.HasPrefix(string(h), "HTTP/") {
			t.Errorf("%s is captured whole: its headers file must start with the status line", name)
		}
	}
}
