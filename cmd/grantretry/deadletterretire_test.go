package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/deadletter"
)

// Retiring two letters takes them out of list, keeps each one's record
// (reason and who), and ends 'audit trace -submission' with the
// retirement's line on the trail named by -trail.
func TestDeadLetterRetireTakesLettersOutOnTheRecord(t *testing.T) {
	f := newDownThenUp(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	const subA, subB = "GRANT-2026-0101", "GRANT-2026-0102"
	idA := pipelineCall(t, f.URL, dir, path, subA)
	idB := pipelineCall(t, f.URL, dir, path, subB)
	const reason = "funder refused: 422 duplicate application"

	out, stderr, code := runCmd(t, "deadletter", "retire", dir, idA, idB, "-reason", reason, "-by", "oncall@ops-1", "-trail", path)
	if code != exitOK {
		t.Fatalf("retire: exit %d\n%s%s", code, out, stderr)
	}
	wantAll(t, "retire", out,
		"retired: letter "+idA+" (submission "+subA+"): "+reason+"\n",
		"retired: letter "+idB+" (submission "+subB+"): "+reason+"\n",
		"retired 2 of 2 letters\n")

	list, stderr, code := runCmd(t, "deadletter", "list", dir)
	if code != exitOK {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	wantNone(t, "list", list, idA, idB)
	wantAll(t, "list", list, "0 letters waiting in ")

	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{idA, idB} {
		r, err := d.Retirement(id)
		if err != nil {
			t.Fatalf("letter %s: %v", id, err)
		}
		if r.Reason != reason || r.RetiredBy != "oncall@ops-1" || r.Letter == nil || r.Letter.ID != id {
			t.Errorf("letter %s: record %+v, want the reason, by oncall@ops-1 and the letter", id, r)
		}
	}

	trace, stderr, code := runCmd(t, "audit", "trace", path, "-submission", subB)
	if code != exitOK {
		t.Fatalf("audit trace: exit %d: %s", code, stderr)
	}
	call, retired, ok := strings.Cut(trace, "\nretired\n")
	if !ok {
		t.Fatalf("audit trace shows no retirement:\n%s", trace)
	}
	wantAll(t, "the call", call, "call 1 of 1", idB)
	wantAll(t, "the retirement", retired, idB, "by oncall@ops-1", reason)
	wantNone(t, "the retirement", retired, "call ", idA)
}

// Without -reason nothing is retired, nothing is written, and the
// command exits 2.
func TestDeadLetterRetireWithoutReasonIsAUsageError(t *testing.T) {
	f := newDownThenUp(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	id := pipelineCall(t, f.URL, dir, path, "GRANT-2026-0103")
	before, _ := os.ReadFile(path)
	for _, args := range [][]string{
		{"deadletter", "retire", dir, id, "-trail", path},
		{"deadletter", "retire", dir, id, "-reason", "  ", "-trail", path},
		{"deadletter", "retire", dir, "-reason", "withdrawn", "-trail", path},
	} {
		out, stderr, code := runCmd(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "grantretry: deadletter: ") {
			t.Errorf("%q: exit %d\n%s%s: want a usage error, exit 2", args, code, out, stderr)
		}
	}
	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(id); err != nil {
		t.Errorf("the letter is no longer waiting: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, deadletter.RetiredDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists (err %v): want nothing retired", deadletter.RetiredDir, err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the trail changed:\n%s\nwant it as it was:\n%s", after, before)
	}
}

// An unknown id among good ones gets its own line and makes the command
// exit 1; the good ones are retired all the same, and a second retirement
// of one says who retired it.
func TestDeadLetterRetireUnknownIDAmongGoodOnes(t *testing.T) {
	f := newDownThenUp(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	idA := pipelineCall(t, f.URL, dir, path, "GRANT-2026-0104")
	idB := pipelineCall(t, f.URL, dir, path, "GRANT-2026-0105")
	const unknown = "L-no-such-letter"

	out, stderr, code := runCmd(t, "deadletter", "retire", dir, idA, unknown, idB, "-reason", "withdrawn by the applicant", "-by", "oncall@ops-1", "-trail", path)
	if code != exitFailure {
		t.Fatalf("retire: exit %d\n%s%s: want 1", code, out, stderr)
	}
	wantAll(t, "retire's stdout", out, "retired: letter "+idA+" ", "retired: letter "+idB+" ", "retired 2 of 3 letters\n")
	wantAll(t, "retire's stderr", stderr, "not retired: letter "+unknown+": there is no such letter waiting in "+dir+"\n",
		"grantretry: deadletter: 1 of 3 letters not retired\n")
	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := d.Retired(); err != nil || len(rs) != 2 {
		t.Errorf("%d retirements (err %v), want 2", len(rs), err)
	}

	out, stderr, code = runCmd(t, "deadletter", "retire", dir, idA, "-reason", "again", "-trail", path)
	if code != exitFailure {
		t.Fatalf("second retire: exit %d\n%s%s: want 1", code, out, stderr)
	}
	wantAll(t, "second retire", stderr, "not retired: letter "+idA+": it was retired at ", "by oncall@ops-1: withdrawn by the applicant\n")
	wantAll(t, "second retire", out, "retired 0 of 1 letter\n")
}
