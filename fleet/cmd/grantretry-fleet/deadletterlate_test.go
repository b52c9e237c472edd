package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// list puts the late letters first and marks them in the LATE column, as
// grantretry deadletter list does.
func TestListShowsLateLettersFirst(t *testing.T) {
	dsn, pool := newDB(t)
	due, late := testLetter("https://funder.example/submit", 0, false), testLetter("https://funder.example/submit", 1, false)
	due.SubmissionID, due.DueBy = "GRANT-2026-0071", time.Now().Add(time.Hour).UTC()
	late.SubmissionID, late.DueBy = "GRANT-2026-0072", time.Now().Add(-time.Hour).UTC()
	putLetters(t, pool, due, late)

	code, out, errOut := runCLI("deadletter", "list", "-pg", dsn)
	if code != exitOK {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], " LATE ") {
		t.Fatalf("no LATE column:\n%s", out)
	}
	for i, want := range []struct{ sub, late string }{{"GRANT-2026-0072", "late"}, {"GRANT-2026-0071", "-"}} {
		f := strings.Fields(lines[i+1])
		if len(f) < 4 || f[1] != want.sub || f[3] != want.late {
			t.Errorf("row %d %q, want %s with LATE %s", i+1, lines[i+1], want.sub, want.late)
		}
	}
}

// redeliver -all leaves the late letters and names each; a late letter
// named is refused unless -late, which sends late letters, named or with
// -all.
func TestRedeliverSendsLateLettersOnlyWithLate(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated)
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	inTime, late, other := testLetter(f.srv.URL, 0, false), testLetter(f.srv.URL, 1, false), testLetter(f.srv.URL, 2, false)
	inTime.DueBy = time.Now().Add(time.Hour).UTC()
	late.SubmissionID, late.DueBy = "GRANT-2026-0081", past
	other.DueBy, other.Late = time.Now().Add(time.Hour).UTC(), true
	putLetters(t, pool, inTime, late, other)

	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all")
	if code != exitOK {
		t.Fatalf("redeliver -all: exit %d\n%s%s", code, out, errOut)
	}
	if want := "late: letter " + late.ID + " (submission GRANT-2026-0081) was due by " + past.Format(time.RFC3339) + "\n"; !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
	if n := f.counts(); n[inTime.IdempotencyKey] != 1 || n[late.IdempotencyKey] != 0 || n[other.IdempotencyKey] != 0 {
		t.Fatalf("funder saw %v; want the letter in time once and the late ones never", n)
	}

	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, late.ID)
	if code != exitFailure || !strings.Contains(errOut, "was due by "+past.Format(time.RFC3339)) || !strings.Contains(errOut, "-late") {
		t.Fatalf("redeliver %s: exit %d, want %d and why\n%s%s", late.ID, code, exitFailure, out, errOut)
	}
	if n := f.counts(); n[late.IdempotencyKey] != 0 {
		t.Fatalf("the late letter was sent %d times", n[late.IdempotencyKey])
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, late.ID, "-late")
	if code != exitOK {
		t.Fatalf("redeliver -late: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-late")
	if code != exitOK {
		t.Fatalf("redeliver -all -late: exit %d\n%s%s", code, out, errOut)
	}
	if n := f.counts(); n[late.IdempotencyKey] != 1 || n[other.IdempotencyKey] != 1 {
		t.Errorf("funder saw %v; want each late letter once", n)
	}
}

// A dry run of a late or not-yet-due letter named one by one says it
// would be refused, and why, and exits 1, as the send would (and as
// grantretry's dry run does); -late and -early plan them.
func TestRedeliverDryRunRefusesANamedLateOrNotYetDueLetter(t *testing.T) {
	dsn, pool := newDB(t)
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	until := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	late, owed := testLetter("https://funder.example/submit", 0, false), testLetter("https://funder.example/submit", 1, false)
	late.DueBy = past
	owed.StopReason, owed.NotBefore = grantretry.StopOwedLater, until
	putLetters(t, pool, late, owed)
	for _, tc := range []struct {
		id, flag, why string
	}{
		{late.ID, "-late", "was due by " + past.Format(time.RFC3339) + ", and is late"},
		{owed.ID, "-early", "not due until " + until.Format(time.RFC3339)},
	} {
		code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-dry-run", tc.id)
		if code != exitFailure || !strings.Contains(errOut, tc.why) || !strings.Contains(errOut, tc.flag) ||
			!strings.Contains(errOut, "; it stays in the database\n") || strings.Contains(out, "dry run") {
			t.Errorf("dry run of %s: exit %d\nstdout %s\nstderr %s\nwant it refused: %q, and %s", tc.id, code, out, errOut, tc.why, tc.flag)
		}
		code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-dry-run", tc.flag, tc.id)
		if code != exitOK || !strings.Contains(out, "letter "+tc.id+" (dry run: nothing sent)") {
			t.Errorf("dry run of %s with %s: exit %d\n%s%s", tc.id, tc.flag, code, out, errOut)
		}
	}
}
