package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

// A letter retired with its line on the pipeline's trail ends the
// submission's trace: after the call that left it, the retirement, with
// who retired it and why.
func TestAuditTraceEndsWithTheRetirement(t *testing.T) {
	f := newDownThenUp(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	const sub = "GRANT-2026-0077"
	id := pipelineCall(t, f.URL, dir, path, sub)

	letters, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := letters.RetireWith(id, "withdrawn by the applicant", deadletter.RetireOptions{By: "oncall@ops-1", Trail: tl}); err != nil {
		t.Fatal(err)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCmd(t, "audit", "trace", path, "-submission", sub)
	if code != exitOK {
		t.Fatalf("audit trace: exit %d: %s", code, stderr)
	}
	call, retired, ok := strings.Cut(out, "\nretired\n")
	if !ok {
		t.Fatalf("audit trace shows no retirement:\n%s", out)
	}
	wantAll(t, "the call", call, "call 1 of 1", "dead_letter at", id)
	wantAll(t, "the retirement", retired, "dead letter", id, sub, "by oncall@ops-1", "withdrawn by the applicant", "POST", "/v1/applications")
	wantNone(t, "the retirement", retired, "call ")
}
