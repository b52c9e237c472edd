package main

import (
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// dlLate is dlLetter with the closing time dueBy, marked late when late.
func dlLate(id, url string, dueBy time.Time, late bool) *grantretry.Letter {
	l := dlLetter(id, url, dlBody)
	l.DueBy, l.Late = dueBy, late
	return l
}

// list puts the late letters first and marks them in the LATE column;
// show says when a letter was due by and that it is late.
func TestDeadLetterListShowsLateLettersFirst(t *testing.T) {
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	ahead := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	dir := dlSeed(t,
		dlLetter("L-1now", "https://funder.example/a", dlBody),
		dlOwed("L-2owed", "https://funder.example/a", time.Now().Add(2*time.Hour)),
		dlLate("L-3passed", "https://funder.example/a", past, false),
		dlLate("L-4intime", "https://funder.example/a", ahead, false),
		dlLate("L-5judged", "https://funder.example/a", ahead, true))
	stdout, _, err := dlRun("list", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 7 || !strings.Contains(lines[0], " LATE ") {
		t.Fatalf("list printed:\n%s\nwant a header with LATE, five letters and the count", stdout)
	}
	for i, want := range []struct{ id, late string }{
		{"L-3passed", "late"}, {"L-5judged", "late"}, {"L-1now", "-"}, {"L-4intime", "-"}, {"L-2owed", "-"},
	} {
		f := strings.Fields(lines[i+1])
		if f[0] != want.id || f[3] != want.late {
			t.Errorf("line %d: %q; want %s with LATE %s", i+1, lines[i+1], want.id, want.late)
		}
	}
	show, _, err := dlRun("show", dir, "L-3passed")
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", show, "due by ", past.Format(time.RFC3339), "late ", "missed its closing time")
	show, _, err = dlRun("show", dir, "L-4intime")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(show, "closing time") {
		t.Errorf("show of a letter in time says it is late:\n%s", show)
	}
}

// redeliver -all leaves the late letters, naming each with its submission
// and due time, sends the others, and succeeds; -late sends them too.
func TestDeadLetterRedeliverAllSkipsLateLetters(t *testing.T) {
	f := newDLFunder(t)
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	inTime := dlLate("L-intime", f.URL+"/v1/applications", time.Now().Add(time.Hour), false)
	late := dlLate("L-late", f.URL+"/v1/applications", past, false)
	late.IdempotencyKey = "late-key"
	dir := dlSeed(t, inTime, late)
	t.Setenv(dlKeyEnv, dlAPIKey)
	creds := []string{"-header", "Authorization: " + dlToken, "-header-env", "X-Api-Key=" + dlKeyEnv}
	stdout, stderr, err := dlRun(append([]string{"redeliver", dir, "-all"}, creds...)...)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, stderr)
	}
	wantAll(t, "redeliver", stdout, "redelivered letter L-intime (submission GRANT-L-intime)",
		"late: letter L-late (submission GRANT-L-late) was due by "+past.Format(time.RFC3339))
	if requests, effects := f.stats(); requests != 1 || effects["late-key"] != 0 {
		t.Errorf("funder got %d requests, effects %v; want only the letter in time", requests, effects)
	}
	if ids := dlPending(t, dir); len(ids) != 1 || ids[0] != "L-late" {
		t.Errorf("letters waiting: %q, want L-late", ids)
	}
	stdout, stderr, err = dlRun(append([]string{"redeliver", dir, "-all", "-late"}, creds...)...)
	if err != nil {
		t.Fatalf("redeliver -all -late: %v\n%s", err, stderr)
	}
	wantAll(t, "redeliver -all -late", stdout, "redelivered letter L-late")
	if requests, _ := f.stats(); requests != 2 {
		t.Errorf("funder got %d requests, want 2", requests)
	}
}

// redeliver of a named late letter refuses it, sending nothing, unless
// -late: the operator's explicit choice.
func TestDeadLetterRedeliverOfALateLetterNeedsLate(t *testing.T) {
	f := newDLFunder(t)
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	dir := dlSeed(t, dlLate("L-late", f.URL+"/v1/applications", past, false))
	t.Setenv(dlKeyEnv, dlAPIKey)
	creds := []string{"-header", "Authorization: " + dlToken, "-header-env", "X-Api-Key=" + dlKeyEnv}
	_, stderr, err := dlRun(append([]string{"redeliver", dir, "L-late"}, creds...)...)
	if err == nil {
		t.Fatal("redeliver of a late letter succeeded")
	}
	wantAll(t, "redeliver", stderr, "letter L-late (submission GRANT-L-late) not sent: it was due by "+past.Format(time.RFC3339), "-late")
	if requests, _ := f.stats(); requests != 0 {
		t.Fatalf("funder got %d requests, want none", requests)
	}
	stdout, stderr, err := dlRun(append([]string{"redeliver", dir, "L-late", "-late"}, creds...)...)
	if err != nil {
		t.Fatalf("redeliver -late: %v\n%s", err, stderr)
	}
	wantAll(t, "redeliver -late", stdout, "redelivered letter L-late")
	if requests, _ := f.stats(); requests != 1 {
		t.Errorf("funder got %d requests, want 1", requests)
	}
}

// A dry run of a late or not-yet-due letter named one by one says it
// would be refused, and why, and exits 1, as the send would; -late and
// -early plan them.
func TestDeadLetterRedeliverDryRunRefusesANamedLateOrNotYetDueLetter(t *testing.T) {
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	until := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	dir := dlSeed(t,
		dlLate("L-late", "https://funder.example/a", past, false),
		dlOwed("L-owed", "https://funder.example/a", until))
	for _, tc := range []struct {
		id, flag, why string
	}{
		{"L-late", "-late", "was due by " + past.Format(time.RFC3339) + ", and is late"},
		{"L-owed", "-early", "not due until " + until.Format(time.RFC3339)},
	} {
		stdout, stderr, err := dlRun("redeliver", dir, tc.id, "-dry-run")
		if !isFailure(err) || !strings.Contains(stderr, tc.why) || !strings.Contains(stderr, tc.flag) || strings.Contains(stdout, "dry run") {
			t.Errorf("dry run of %s: %v\nstdout %s\nstderr %s\nwant it refused: %q, and %s", tc.id, err, stdout, stderr, tc.why, tc.flag)
		}
		stdout, _, err = dlRun("redeliver", dir, tc.id, "-dry-run", tc.flag)
		if err != nil || !strings.Contains(stdout, "letter "+tc.id+" (dry run: nothing sent)") {
			t.Errorf("dry run of %s with %s: %v\n%s", tc.id, tc.flag, err, stdout)
		}
	}
}
