package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// show finds a retired letter and shows its retirement: who, when and
// why.
func TestDeadLetterShowOfARetiredLetterSaysWhoRetiredItWhenAndWhy(t *testing.T) {
	l := dlLetter("L-gone", "https://funder.example/v1/applications", dlBody)
	dir := dlSeed(t, l)
	if out, stderr, code := runCmd(t, "deadletter", "retire", dir, l.ID, "-reason", "withdrawn by the applicant", "-by", "oncall@ops-1"); code != exitOK {
		t.Fatalf("retire: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code := runCmd(t, "deadletter", "show", dir, l.ID)
	if code != exitOK {
		t.Fatalf("show of a retired letter: exit %d\n%s", code, stderr)
	}
	wantAll(t, "show", out, "state            retired at 20", "by oncall@ops-1: withdrawn by the applicant", l.URL, l.SubmissionID)
	body, _, code := runCmd(t, "deadletter", "show", dir, l.ID, "-body")
	if code != exitOK || body != string(dlBody) {
		t.Errorf("show -body of a retired letter: exit %d, %q", code, body)
	}
}

// list -submission lists one submission's letters; redeliver -submission
// sends its due letters, and -include-refused its refused one too.
func TestDeadLetterSubmissionListsAndRedeliversOneSubmissionsLetters(t *testing.T) {
	f := storetest.NewFunder(t)
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	a := storetest.Letter("L-1a", f.URL+"/v1/applications", at)
	b := storetest.Refused(storetest.Letter("L-1b", f.URL+"/v1/applications", at.Add(time.Second)))
	c := storetest.Letter("L-2", f.URL+"/v1/applications", at.Add(2*time.Second))
	a.SubmissionID, b.SubmissionID = "GRANT-1", "GRANT-1"
	dir := dlSeed(t, a, b, c)
	list, _, code := runCmd(t, "deadletter", "list", dir, "-submission", "GRANT-1")
	if code != exitOK {
		t.Fatalf("list -submission: exit %d", code)
	}
	wantAll(t, "list -submission", list, "L-1a", "L-1b", "422 refused", "2 letters waiting in "+dir+": 1 refused\n")
	wantNone(t, "list -submission", list, "L-2")

	out, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-submission", "GRANT-1")
	if code != exitOK {
		t.Fatalf("redeliver -submission: exit %d\n%s%s", code, out, stderr)
	}
	if got := f.Got(); got[a.IdempotencyKey] != 1 || f.Requests() != 1 {
		t.Errorf("the funder got %v; want L-1a alone", got)
	}
	wantAll(t, "redeliver -submission", out, "refused: letter L-1b (submission GRANT-1) was last answered 422 refused",
		"summary: 3 letters waiting, 1 selected, 1 sent\n", "  left, refused: 1 (")
	out, stderr, code = runCmd(t, "deadletter", "redeliver", dir, "-submission", "GRANT-1", "-include-refused")
	if code != exitOK || f.Got()[b.IdempotencyKey] != 1 || f.Requests() != 2 {
		t.Errorf("redeliver -submission -include-refused: exit %d, the funder got %v\n%s%s", code, f.Got(), out, stderr)
	}
}

// The flags of pace and policy are checked before anything is opened or
// sent: a bad one is a usage error, exit 2.
func TestDeadLetterRedeliverChecksPaceAndPolicyFlags(t *testing.T) {
	f := storetest.NewFunder(t)
	dir := dlSeed(t, storetest.Letter("L-a", f.URL+"/v1/applications", time.Now().Add(-time.Hour)))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-all", "-rate", "0/s"}, "-rate"},
		{[]string{"-all", "-rate", "fast"}, "-rate"},
		{[]string{"-all", "-concurrency", "0"}, "-concurrency 0"},
		{[]string{"-all", "-budget", "-1"}, "-budget -1"},
		{[]string{"-all", "-deadline", "0s"}, "-deadline 0s"},
		{[]string{"-all", "-deadline", "2m", "-timeout", "1m"}, "-deadline 2m0s is longer than -timeout 1m0s"},
		{[]string{"L-a", "-submission", "GRANT-L-a"}, "letter ids or -all"},
		{[]string{"-submission", "GRANT-L-a", "-early"}, "-early sends the letters named"},
	} {
		args := append([]string{"deadletter", "redeliver", dir}, tc.args...)
		out, stderr, code := runCmd(t, args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "Run 'grantretry deadletter redeliver -help'") {
			t.Errorf("%q: exit %d\n%s%s; want a usage error saying %q", tc.args, code, out, stderr, tc.want)
		}
	}
	if f.Requests() != 0 {
		t.Errorf("the funder got %d requests, want none", f.Requests())
	}
	help, _, _ := runCmd(t, "deadletter", "redeliver", "-help")
	wantAll(t, "redeliver -help", help, "-rate", "-budget", "-deadline", "-submission", "-include-refused", "-concurrency",
		"summary: ", "left, refused", "Exit status: 0", "1 when", "2 when")
}

// -budget 0 makes each letter's call one attempt: a funder still down is
// asked once, and the letter is not delivered.
func TestDeadLetterRedeliverBudgetBoundsEachLettersRetries(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	dir := dlSeed(t, dlLetter("L-a", srv.URL+"/v1/applications", dlBody))
	out, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-all", "-budget", "0")
	if code != exitFailure || requests.Load() != 1 {
		t.Fatalf("redeliver -budget 0 to a funder down: exit %d, %d requests; want exit 1 after one\n%s%s", code, requests.Load(), out, stderr)
	}
	wantAll(t, "summary", out, "  delivered: 0\n", "  not delivered: 1 (answered 503 Service Unavailable: 1)\n")
}
