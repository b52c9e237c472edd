package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// dlOwed is dlLetter owed by a quota until notBefore.
func dlOwed(id, url string, notBefore time.Time) *grantretry.Letter {
	l := dlLetter(id, url, dlBody)
	l.StopReason, l.Reason, l.LastStatus = grantretry.StopOwedLater, "owed:429;quota", 429
	l.NotBefore = notBefore
	return l
}

// list shows when each letter is due ("now", or its not_before), the due
// letters first, then the others by when they are due.
func TestDeadLetterListShowsWhenEachLetterIsDue(t *testing.T) {
	later := time.Now().Add(48 * time.Hour).Truncate(time.Second).UTC()
	soon := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	dir := dlSeed(t,
		dlOwed("L-1later", "https://funder.example/a", later),
		dlOwed("L-2soon", "https://funder.example/a", soon),
		dlOwed("L-3past", "https://funder.example/a", time.Now().Add(-time.Hour)),
		dlLetter("L-4now", "https://funder.example/a", dlBody))
	stdout, _, err := dlRun("list", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 6 || !strings.Contains(lines[0], "DUE") {
		t.Fatalf("list printed:\n%s\nwant a header with DUE, four letters and the count", stdout)
	}
	for i, want := range []struct{ id, due string }{
		{"L-3past", "now"}, {"L-4now", "now"},
		{"L-2soon", soon.Format(time.RFC3339)}, {"L-1later", later.Format(time.RFC3339)},
	} {
		f := strings.Fields(lines[i+1])
		if f[0] != want.id || !strings.Contains(lines[i+1], " "+want.due+" ") {
			t.Errorf("line %d: %q; want %s due %s", i+1, lines[i+1], want.id, want.due)
		}
	}
	show, _, err := dlRun("show", dir, "L-2soon")
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", show, "due ", soon.Format(time.RFC3339))
	show, _, err = dlRun("show", dir, "L-4now")
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", show, "due ", "now")
}

// redeliver -all sends the due letters only, says when each of the others
// is due, and succeeds: they are not failures, just not yet.
func TestDeadLetterRedeliverAllSendsOnlyDueLetters(t *testing.T) {
	f := newDLFunder(t)
	until := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	due := dlOwed("L-due", f.URL+"/v1/applications", time.Now().Add(-time.Minute))
	owed := dlOwed("L-owed", f.URL+"/v1/applications", until)
	owed.Body, owed.BodyBytes, owed.BodySHA256, owed.IdempotencyKey = due.Body, due.BodyBytes, due.BodySHA256, "other-key"
	dir := dlSeed(t, due, owed)
	t.Setenv(dlKeyEnv, dlAPIKey)
	stdout, stderr, err := dlRun("redeliver", dir, "-all", "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, stderr)
	}
	wantAll(t, "redeliver", stdout, "redelivered letter L-due (submission GRANT-L-due)",
		"not due: letter L-owed (submission GRANT-L-owed) until "+until.Format(time.RFC3339))
	if requests, effects := f.stats(); requests != 1 || effects["other-key"] != 0 {
		t.Errorf("funder got %d requests, effects %v; want only the due letter", requests, effects)
	}
	if ids := dlPending(t, dir); len(ids) != 1 || ids[0] != "L-owed" {
		t.Errorf("letters waiting: %q, want L-owed", ids)
	}
}

// redeliver of a named letter that is not due refuses it, sending nothing,
// unless -early: the operator's explicit decision for that letter.
func TestDeadLetterRedeliverOfALetterNotDueNeedsEarly(t *testing.T) {
	f := newDLFunder(t)
	until := time.Now().Add(3 * time.Hour).Truncate(time.Second).UTC()
	dir := dlSeed(t, dlOwed("L-owed", f.URL+"/v1/applications", until))
	t.Setenv(dlKeyEnv, dlAPIKey)
	creds := []string{"-header", "Authorization: " + dlToken, "-header-env", "X-Api-Key=" + dlKeyEnv}
	_, stderr, err := dlRun(append([]string{"redeliver", dir, "L-owed"}, creds...)...)
	if err == nil {
		t.Fatal("redeliver of a letter not due succeeded")
	}
	wantAll(t, "redeliver", stderr, "letter L-owed (submission GRANT-L-owed) not sent: not due until "+until.Format(time.RFC3339), "-early")
	if requests, _ := f.stats(); requests != 0 {
		t.Fatalf("funder got %d requests, want none", requests)
	}
	stdout, stderr, err := dlRun(append([]string{"redeliver", dir, "L-owed", "-early"}, creds...)...)
	if err != nil {
		t.Fatalf("redeliver -early: %v\n%s", err, stderr)
	}
	wantAll(t, "redeliver -early", stdout, "redelivered letter L-owed")
	if requests, _ := f.stats(); requests != 1 {
		t.Errorf("funder got %d requests, want 1", requests)
	}
	_, _, err = dlRun("redeliver", dir, "-all", "-early")
	var uerr usageError
	if !errors.As(err, &uerr) {
		t.Errorf("-all -early: %v, want a usage error: -early is for letters named one by one", err)
	}
}
