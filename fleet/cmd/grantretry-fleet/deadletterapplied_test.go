package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/grantretry/grantretry/internal/operator"
)

// A funder that answers every submit as Simpler Grants.gov answers one
// for an application already submitted (the simplergrants/testdata
// sample, with its source), and a rules file that reads it: the
// ambiguous letter is delivered and reported "already applied"; the
// letter that is not ambiguous is refused and released.
func TestRedeliverReportsAnAlreadyAppliedLetterAsDelivered(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "simplergrants", "testdata", "submit-not-in-progress.body"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write(body)
	}))
	defer srv.Close()
	rules := filepath.Join(t.TempDir(), "rules.json")
	rule := `[{"Status": 403, "Contains": "\"not_in_progress\"", "Verdict": {"Applied": true, "Reason": "applied:not_in_progress"}}]`
	if err := os.WriteFile(rules, []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn, pool := newDB(t)
	putLetters(t, pool, testLetter(srv.URL, 0, true), testLetter(srv.URL, 1, false))

	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-trust-key", "-rules", rules)
	if code != exitFailure {
		t.Fatalf("redeliver: exit %d, want %d (one refusal)\n%s%s", code, exitFailure, out, errOut)
	}
	if want := "redelivered letter letter-0: answered 403 Forbidden (succeeded after 1 attempt); " + operator.AppliedNote + "\n"; !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
	if want := "letter letter-1 not redelivered: answered 403 Forbidden (failed_terminal after 1 attempt)"; !strings.Contains(errOut, want) {
		t.Errorf("want %q in\n%s", want, errOut)
	}
	var state0, state1 string
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT state FROM grantretry_letters WHERE id = 'letter-0'`).Scan(&state0); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT state FROM grantretry_letters WHERE id = 'letter-1'`).Scan(&state1); err != nil {
		t.Fatal(err)
	}
	if state0 == "waiting" || state1 != "waiting" {
		t.Errorf("states %q and %q: want letter-0 redelivered, letter-1 waiting", state0, state1)
	}
}

func TestRedeliverNamesABadRulesFileAndSendsNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	dsn, pool := newDB(t)
	putLetters(t, pool, testLetter(srv.URL, 0, false))
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
			code, _, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-rules", rules)
			want := "grantretry-fleet: deadletter: redeliver: -rules: rules file " + rules + ": "
			if code != exitUsage || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want %d, starting %q and saying %q", code, errOut, exitUsage, want, c.want)
			}
			if strings.Contains(errOut, "grantretry: ") {
				t.Errorf("stderr %q quotes the library's prefix", errOut)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent, want none", hits.Load())
	}
	var state string
	if err := pool.QueryRow(context.Background(), `SELECT state FROM grantretry_letters WHERE id = 'letter-0'`).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "waiting" {
		t.Errorf("state %q, want waiting", state)
	}
}
