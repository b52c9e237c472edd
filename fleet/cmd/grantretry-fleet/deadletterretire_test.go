package main

import (
	"context"
	"strings"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
)

// Retiring two letters takes them out of list, keeps each one's record
// (reason and who) in the database, and ends 'audit trace -submission'
// with the retirement's line on the fleet's trail.
func TestFleetDeadLetterRetireTakesLettersOutOnTheRecord(t *testing.T) {
	dsn, pool := newDB(t)
	a, b, c := testLetter("https://funder.example", 0, false), testLetter("https://funder.example", 1, false), testLetter("https://funder.example", 2, false)
	a.SubmissionID, b.SubmissionID = "GRANT-201", "GRANT-202"
	putLetters(t, pool, a, b, c)
	t.Setenv(envDSN, dsn)
	const reason = "funder refused: 422 duplicate application"

	code, out, errOut := runCLI("deadletter", "retire", a.ID, b.ID, "-reason", reason, "-by", "oncall@ops-1")
	if code != exitOK {
		t.Fatalf("retire: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"retired: letter " + a.ID + " (submission GRANT-201): " + reason + "\n",
		"retired: letter " + b.ID + " (submission GRANT-202): " + reason + "\n",
		"retired 2 of 2 letters\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("retire's output does not say %q:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI("deadletter", "list")
	if code != exitOK || strings.Contains(out, a.ID+" ") || strings.Contains(out, b.ID+" ") || !strings.Contains(out, "1 letter waiting") {
		t.Errorf("list: exit %d\n%s%s: want only %s", code, out, errOut, c.ID)
	}
	ctx := context.Background()
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	for _, l := range []*grantretry.Letter{a, b} {
		r, err := letters.Retirement(ctx, l.ID)
		if err != nil {
			t.Fatalf("letter %s: %v", l.ID, err)
		}
		if r.Reason != reason || r.RetiredBy != "oncall@ops-1" || r.Letter.IdempotencyKey != l.IdempotencyKey {
			t.Errorf("letter %s: record %+v, want the reason, by oncall@ops-1 and the letter", l.ID, r)
		}
	}

	code, out, errOut = runCLI("audit", "trace", "-submission", "GRANT-202")
	if code != exitOK {
		t.Fatalf("audit trace: exit %d\n%s%s", code, out, errOut)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "grantretry.") {
			rows = append(rows, line)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("audit trace shows no line:\n%s", out)
	}
	last := rows[len(rows)-1]
	for _, want := range []string{grantretry.MsgRetired, "dead_letter_id=" + b.ID, "retired_by=oncall@ops-1", "retired_reason="} {
		if !strings.Contains(last, want) {
			t.Errorf("the last row %q does not say %q:\n%s", last, want, out)
		}
	}
}

// Without -reason nothing is retired and the command exits 2; an unknown
// id among good ones gets its own line and makes it exit 1, and the good
// ones are retired all the same.
func TestFleetDeadLetterRetireRefusals(t *testing.T) {
	dsn, pool := newDB(t)
	a, b := testLetter("https://funder.example", 0, false), testLetter("https://funder.example", 1, false)
	putLetters(t, pool, a, b)
	t.Setenv(envDSN, dsn)
	for _, args := range [][]string{
		{"deadletter", "retire", a.ID, b.ID},
		{"deadletter", "retire", a.ID, "-reason", " "},
		{"deadletter", "retire", "-reason", "withdrawn"},
	} {
		code, out, errOut := runCLI(args...)
		if code != exitUsage || !strings.Contains(errOut, "grantretry-fleet: deadletter: ") {
			t.Errorf("%q: exit %d\n%s%s: want a usage error, exit 2", args, code, out, errOut)
		}
	}
	ctx := context.Background()
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	if rs, err := letters.Retired(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("%d retired (err %v) after the usage errors, want none", len(rs), err)
	}

	const unknown = "letter-99"
	code, out, errOut := runCLI("deadletter", "retire", a.ID, unknown, b.ID, "-reason", "withdrawn by the applicant", "-by", "oncall@ops-1")
	if code != exitFailure {
		t.Fatalf("retire: exit %d\n%s%s: want 1", code, out, errOut)
	}
	for _, want := range []string{"retired: letter " + a.ID + ": ", "retired: letter " + b.ID + ": ", "retired 2 of 3 letters\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("retire's stdout does not say %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"not retired: letter " + unknown + ": there is no such letter in the database\n", "grantretry-fleet: deadletter: 1 of 3 letters not retired\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("retire's stderr does not say %q:\n%s", want, errOut)
		}
	}
	if rs, err := letters.Retired(ctx); err != nil || len(rs) != 2 {
		t.Errorf("%d retired (err %v), want 2", len(rs), err)
	}
	code, _, errOut = runCLI("deadletter", "retire", a.ID, "-reason", "again")
	if code != exitFailure || !strings.Contains(errOut, "not retired: letter "+a.ID+": it was retired at ") || !strings.Contains(errOut, "by oncall@ops-1: withdrawn by the applicant\n") {
		t.Errorf("second retire: exit %d\n%s: want 1, saying who retired it and why", code, errOut)
	}
}
