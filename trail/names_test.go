package trail_test

import (
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry/trail"
)

// The names a Trail gives its files, as other tools read them.
func TestRotatedIndexAndLiveFile(t *testing.T) {
	for _, c := range []struct {
		live, name string
		index      int
		ok         bool
	}{
		{"audit.jsonl", "audit.jsonl.000012", 12, true},
		{"audit.jsonl", "audit.jsonl.1234567", 1234567, true},
		{"audit.jsonl", "audit.jsonl.12", 0, false},
		{"audit.jsonl", "audit.jsonl.head", 0, false},
		{"audit.jsonl", "audit.jsonl.00001x", 0, false},
		{"audit.jsonl", "other.jsonl.000001", 0, false},
	} {
		if n, ok := trail.RotatedIndex(c.live, c.name); n != c.index || ok != c.ok {
			t.Errorf("RotatedIndex(%q, %q) = %d, %v; want %d, %v", c.live, c.name, n, ok, c.index, c.ok)
		}
	}
	dir := filepath.Join("var", "lib", "grants")
	for p, want := range map[string]string{
		filepath.Join(dir, "audit.jsonl.000003"): filepath.Join(dir, "audit.jsonl"),
		filepath.Join(dir, "audit.jsonl"):        filepath.Join(dir, "audit.jsonl"),
		filepath.Join(dir, "audit.jsonl.head"):   filepath.Join(dir, "audit.jsonl.head"),
	} {
		if got := trail.LiveFile(p); got != want {
			t.Errorf("LiveFile(%q) = %q, want %q", p, got, want)
		}
	}
}
