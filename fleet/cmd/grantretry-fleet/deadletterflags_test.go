package main

import (
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// redeliver's pace and policy flags are grantretry's: a value out of
// range is a usage error (exit 2) that points at redeliver's help, and
// nothing is sent.
func TestRedeliverRefusesPaceAndPolicyFlagsOutOfRange(t *testing.T) {
	dsn, pool := newDB(t)
	f := storetest.NewFunder(t)
	putLetters(t, pool, storetest.Letter("L-0", f.URL+"/v1/applications", time.Now().Add(-time.Hour).UTC()))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-all", "-rate", "0/s"}, "-rate"},
		{[]string{"-all", "-rate", "fast"}, "-rate"},
		{[]string{"-all", "-concurrency", "0"}, "-concurrency 0: want 1 or more"},
		{[]string{"-all", "-budget", "-1"}, "-budget -1: want 0 or more retries"},
		{[]string{"-all", "-deadline", "0s"}, "-deadline 0s: want a positive duration"},
		{[]string{"-all", "-deadline", "2m", "-timeout", "1m"}, "-deadline 2m0s is longer than -timeout 1m0s"},
		{[]string{"-submission", "GRANT-L-0", "-early"}, "-early sends the letters named, one by one"},
		{[]string{"L-0", "-all"}, "give letter ids or -all (or -submission ID), not both nor neither"},
	} {
		code, out, errOut := runCLI(append([]string{"deadletter", "redeliver", "-pg", dsn}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || !strings.HasSuffix(errOut, "\nRun 'grantretry-fleet deadletter redeliver -help' for its flags.\n") {
			t.Errorf("redeliver %q: exit %d\n%s%s\nwant exit %d, saying %q", tc.args, code, out, errOut, exitUsage, tc.want)
		}
	}
	if n := f.Requests(); n != 0 {
		t.Errorf("the funder got %d requests, want none", n)
	}
}

// -submission sends the due letters of one submission, as -all chooses
// them; -include-refused sends its refused letters too.
func TestRedeliverSubmissionSendsOneSubmissionsLetters(t *testing.T) {
	dsn, pool := newDB(t)
	f := storetest.NewFunder(t)
	created := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	mine := storetest.Letter("L-0-mine", f.URL+"/v1/applications", created)
	refused := storetest.Refused(storetest.Letter("L-1-mine-refused", f.URL+"/v1/applications", created.Add(time.Millisecond)))
	other := storetest.Letter("L-2-other", f.URL+"/v1/applications", created.Add(2*time.Millisecond))
	mine.SubmissionID, refused.SubmissionID = "GRANT-S1", "GRANT-S1"
	putLetters(t, pool, mine, refused, other)

	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-submission", "GRANT-S1")
	if code != exitOK || !strings.Contains(out, "redelivered letter L-0-mine (submission GRANT-S1)") ||
		!strings.Contains(out, "refused: letter L-1-mine-refused (submission GRANT-S1)") || !strings.Contains(out, "summary: 3 letters waiting, 1 selected, 1 sent\n") {
		t.Fatalf("redeliver -submission: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-submission", "GRANT-S1", "-include-refused")
	if code != exitOK || !strings.Contains(out, "redelivered letter L-1-mine-refused (submission GRANT-S1)") || !strings.Contains(out, "summary: 2 letters waiting, 1 selected, 1 sent\n") {
		t.Fatalf("redeliver -submission -include-refused: exit %d\n%s%s", code, out, errOut)
	}
	got := f.Got()
	if got[mine.IdempotencyKey] != 1 || got[refused.IdempotencyKey] != 1 || got[other.IdempotencyKey] != 0 {
		t.Errorf("the funder got %v; want GRANT-S1's two letters once each, and not the other", got)
	}
}
