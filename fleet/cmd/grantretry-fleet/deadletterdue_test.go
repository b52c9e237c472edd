package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// redeliver -all sends only the letters that are due and says when each
// of the others is; a letter named that is not due is refused unless
// -early, which goes with named letters only.
func TestRedeliverSendsOnlyDueLettersUnlessEarly(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated)
	until := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	due, owed := testLetter(f.srv.URL, 0, false), testLetter(f.srv.URL, 1, false)
	owed.SubmissionID, owed.NotBefore = "GRANT-2026-0051", until
	putLetters(t, pool, due, owed)

	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all")
	if code != exitOK {
		t.Fatalf("redeliver -all: exit %d\n%s%s", code, out, errOut)
	}
	if want := "not due: letter " + owed.ID + " (submission GRANT-2026-0051) until " + until.Format(time.RFC3339) + "\n"; !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
	if n := f.counts(); n[due.IdempotencyKey] != 1 || n[owed.IdempotencyKey] != 0 {
		t.Fatalf("funder saw %v; want the due letter once and the other never", n)
	}

	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, owed.ID)
	if code != exitFailure || !strings.Contains(errOut, "not due until "+until.Format(time.RFC3339)) || !strings.Contains(errOut, "-early") {
		t.Fatalf("redeliver %s: exit %d, want %d and why\n%s%s", owed.ID, code, exitFailure, out, errOut)
	}
	if n := f.counts(); n[owed.IdempotencyKey] != 0 {
		t.Fatalf("the letter not due was sent %d times", n[owed.IdempotencyKey])
	}
	if code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-early"); code != exitUsage {
		t.Errorf("-all -early: exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, owed.ID, "-early")
	if code != exitOK {
		t.Fatalf("redeliver -early: exit %d\n%s%s", code, out, errOut)
	}
	if n := f.counts(); n[owed.IdempotencyKey] != 1 {
		t.Errorf("sent early %d times, want once", n[owed.IdempotencyKey])
	}
}

// list shows when each letter is due and puts the due letters first, as
// grantretry deadletter list does.
func TestListShowsWhenEachLetterIsDueDueFirst(t *testing.T) {
	dsn, pool := newDB(t)
	until := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	owed, due := testLetter("https://funder.example/submit", 0, false), testLetter("https://funder.example/submit", 1, false)
	owed.SubmissionID, owed.NotBefore = "GRANT-2026-0061", until
	due.SubmissionID = "GRANT-2026-0062"
	putLetters(t, pool, owed, due)

	code, out, errOut := runCLI("deadletter", "list", "-pg", dsn)
	if code != exitOK {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], "DUE") {
		t.Fatalf("no DUE column:\n%s", out)
	}
	if !strings.Contains(lines[1], "GRANT-2026-0062") || !strings.Contains(lines[1], " now ") {
		t.Errorf("first row %q, want the letter due now", lines[1])
	}
	if !strings.Contains(lines[2], "GRANT-2026-0061") || !strings.Contains(lines[2], until.Format(time.RFC3339)) {
		t.Errorf("second row %q, want the letter not due, until %s", lines[2], until.Format(time.RFC3339))
	}
}
