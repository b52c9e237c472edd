package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
)

// appliedFixture is a funder that answers every submit as Simpler
// Grants.gov answers one for an application already submitted (the
// simplergrants/testdata sample, with its source), and a rules file
// that reads it.
func appliedFixture(t *testing.T) (url, rules string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "simplergrants", "testdata", "submit-not-in-progress.body"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	rules = filepath.Join(t.TempDir(), "rules.json")
	rule := `[{"Status": 403, "Contains": "\"not_in_progress\"", "Verdict": {"Applied": true, "Reason": "applied:not_in_progress"}}]`
	if err := os.WriteFile(rules, []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, rules
}

func TestDeadLetterRedeliverReportsAnAlreadyAppliedLetterAsDelivered(t *testing.T) {
	url, rules := appliedFixture(t)
	l := dlLetter("L-applied", url+"/alpha/applications/1/submit", dlBody)
	l.Ambiguous = true
	dir := dlSeed(t, l)
	stdout, stderr, err := dlRun("redeliver", dir, l.ID, "-trust-key", "-rules", rules)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, stderr)
	}
	wantAll(t, "stdout", stdout, "redelivered letter L-applied (submission GRANT-L-applied): answered 403 Forbidden (succeeded after 1 attempt); "+operator.AppliedNote)
	if got := dlPending(t, dir); len(got) != 0 {
		t.Errorf("waiting after the delivery: %q, want none", got)
	}
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, rec, err := d.Redelivered(l.ID); err != nil || rec.Status != http.StatusForbidden || rec.Note == "" {
		t.Errorf("the record of the redelivery: %+v, %v; want 403 with the already-applied note", rec, err)
	}
}

func TestDeadLetterRedeliverReportsTheSameAnswerToALetterThatIsNotAmbiguousAsARefusal(t *testing.T) {
	url, rules := appliedFixture(t)
	l := dlLetter("L-refused", url+"/alpha/applications/1/submit", dlBody)
	dir := dlSeed(t, l)
	_, stderr, err := dlRun("redeliver", dir, l.ID, "-rules", rules)
	if err == nil {
		t.Fatal("redeliver succeeded on a refusal")
	}
	wantAll(t, "stderr", stderr, "letter L-refused (submission GRANT-L-refused) not redelivered: answered 403 Forbidden (failed_terminal after 1 attempt)")
	if got := dlPending(t, dir); len(got) != 1 {
		t.Errorf("waiting after the refusal: %q, want L-refused", got)
	}
}

func TestDeadLetterRedeliverRefusesInvalidRules(t *testing.T) {
	dir := dlSeed(t, dlLetter("L-a", "http://127.0.0.1:1/submit", dlBody))
	rules := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(rules, []byte(`[{"Status": 403, "Verdict": {"Applied": true}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dlRun("redeliver", dir, "L-a", "-rules", rules); err == nil {
		t.Fatal("redeliver took a rule without a reason")
	}
	if got := dlPending(t, dir); len(got) != 1 {
		t.Errorf("waiting: %q, want L-a, not sent", got)
	}
}

func TestDeadLetterRedeliverNamesABadRulesFileAndSendsNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	dir := dlSeed(t, dlLetter("L-a", srv.URL+"/submit", dlBody))
	for _, c := range []struct{ name, text, want string }{
		{"not JSON", "{", "not a JSON array of rules"},
		{"no rule", "[]", "no rule in it"},
		{"a rule CheckRules refuses", `[{"Status": 403, "Verdict": {"Applied": true}}]`, "invalid rule: rule 0: Verdict.Reason"},
		{"missing", "", "no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rules := filepath.Join(t.TempDir(), "rules.json")
			if c.name != "missing" {
				if err := os.WriteFile(rules, []byte(c.text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "L-a", "-rules", rules)
			want := "grantretry: deadletter: -rules: rules file " + rules + ": "
			if code != exitUsage || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want %d (usage: nothing sent), starting %q and saying %q", code, stderr, exitUsage, want, c.want)
			}
			if n := strings.Count(stderr, "grantretry: "); n != 1 {
				t.Errorf("stderr %q says \"grantretry: \" %d times, want once", stderr, n)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent, want none", hits.Load())
	}
	if got := dlPending(t, dir); len(got) != 1 {
		t.Errorf("waiting: %q, want L-a, not sent", got)
	}
}
