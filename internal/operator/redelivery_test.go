package operator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A letter named to a command that is late is refused with what makes it
// late, said once: its closing time when it has one, or that it was
// judged late when it has none.
func TestNotSentLateSaysWhyOnce(t *testing.T) {
	due := time.Date(2026, 3, 1, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		dueBy time.Time
		want  string
	}{
		{"with_a_closing_time", due, "letter L1 (submission S1) not sent: it was due by 2026-03-01T17:00:00Z, and is late: send it only if the funder agreed to take it late, with -late; it stays"},
		{"judged_late_without_one", time.Time{}, "letter L1 (submission S1) not sent: it is late: send it only if the funder agreed to take it late, with -late; it stays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &grantretry.Letter{ID: "L1", SubmissionID: "S1", DueBy: tc.dueBy, Late: true}
			got := NotSentLate(l, "-late", "it stays").Error()
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// rulesFile writes text to a rules file and returns its path.
func rulesFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadRules(t *testing.T) {
	path := rulesFile(t, `[{"Status": 403, "Contains": "\"not_in_progress\"", "Verdict": {"Applied": true, "Reason": "applied:not_in_progress"}}]`+"\n")
	rules, err := ReadRules(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].Status != 403 || !rules[0].Verdict.Applied {
		t.Errorf("rules %+v, want the file's one rule", rules)
	}
}

func TestReadRulesRefusesWhatIsNoSetOfRules(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"empty file", "", "not a JSON array of rules"},
		{"cut short", "[{", "not a JSON array of rules"},
		{"an object", `{"Status": 403}`, "not a JSON array of rules"},
		{"null", "null", "not a JSON array of rules"},
		{"no rule", " [ ]\n", "no rule"},
		{"a field no Rule has", `[{"Code": 500, "Verdict": {"Reason": "f"}}]`, `unknown field "Code"`},
		{"more after the array", `[{"Status": 500, "Verdict": {"Reason": "f"}}] [{"Status": 502, "Verdict": {"Reason": "g"}}]`, "after the array"},
		{"junk after the array", `[{"Status": 500, "Verdict": {"Reason": "f"}}] x`, "after the array"},
		{"a rule CheckRules refuses", `[{"Status": 403, "Verdict": {"Applied": true}}]`, "invalid rule: rule 0: Verdict.Reason"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := rulesFile(t, c.text)
			rules, err := ReadRules(path)
			if err == nil {
				t.Fatalf("rules %+v, no error", rules)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "grantretry: rules file "+path+": ") || !strings.Contains(msg, c.want) {
				t.Errorf("error %q, want one that starts %q and says %q", msg, "grantretry: rules file "+path+": ", c.want)
			}
			if strings.Count(msg, "grantretry: ") != 1 {
				t.Errorf("error %q says \"grantretry: \" more than once", msg)
			}
		})
	}
}

func TestReadRulesOfAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.json")
	_, err := ReadRules(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want one that matches os.ErrNotExist", err)
	}
	if want := "grantretry: rules file " + path + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want one that starts %q", err, want)
	}
}

func TestReadRulesKeepsCheckRulesError(t *testing.T) {
	_, err := ReadRules(rulesFile(t, `[{"Status": 200, "Verdict": {"Reason": "f"}}]`))
	if !errors.Is(err, grantretry.ErrInvalidRule) {
		t.Errorf("error %v, want one that matches grantretry.ErrInvalidRule", err)
	}
}
