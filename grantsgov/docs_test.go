package grantsgov

import (
	"os"
	"strings"
	"testing"
)

// TestRulesTableIsDocumented keeps docs/grantsgov.md's table and the rules
// one: every rule is a row there, with its verdict.
func TestRulesTableIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/grantsgov.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `grantsgov:") {
			rows++
		}
	}
	if rows != len(rules) {
		t.Errorf("docs/grantsgov.md has %d rule rows, rules.go %d", rows, len(rules))
	}
	for _, r := range rules {
		verdict := "terminal"
		if r.retryable {
			verdict = "transient"
		}
		found := false
		for _, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(line, "| `"+r.name+"` | `"+r.match+"`") && strings.Contains(line, "| "+verdict+" |") {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/grantsgov.md has no row for %s %q (%s)", r.name, r.match, verdict)
		}
		if r.source == "" {
			t.Errorf("rule %s %q has no source", r.name, r.match)
		}
	}
}
