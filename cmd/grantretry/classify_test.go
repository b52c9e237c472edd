package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// classifyRun runs "grantretry classify args..." and returns its exit
// status and output.
func classifyRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"classify"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// The real answers kept in the repository, through the command: what it
// prints is what a Transport does with each.
func TestClassifyPrintsWhatTheTransportDoes(t *testing.T) {
	limits := filepath.Join("..", "..", "testdata", "limits")
	soap := filepath.Join("..", "..", "testdata", "soapfaults")
	corpus := filepath.Join("..", "..", "grantsgov", "testdata", "corpus")
	cases := []struct {
		name  string
		args  []string
		lines []string
	}{
		{"aws quota", []string{"-status", "429", "-headers", filepath.Join(limits, "aws-apigateway-quota.headers"), filepath.Join(limits, "aws-apigateway-quota.body")},
			[]string{"verdict:     owed:429;aws:LimitExceededException", "retried:     no", "owed:        yes, the funder did not say until when", "ends:        dead_letter (owed_later) after 1 attempt"}},
		{"aws throttle", []string{"-status", "429", "-header", "x-amzn-ErrorType: TooManyRequestsException", filepath.Join(limits, "aws-apigateway-throttle.body")},
			[]string{"verdict:     transient:429;aws:TooManyRequestsException", "retried:     yes, 4 times, after ", "ends:        dead_letter (retries_exhausted) after 5 attempts"}},
		{"sam.gov daily quota", []string{"-now", "2026-12-04T18:00:00Z", "-status", "429", "-headers", filepath.Join(limits, "samgov-quota.headers"), filepath.Join(limits, "samgov-quota.body")},
			[]string{"verdict:     owed:429;retry_after", "owed:        yes, not before 2026-12-05T00:00:00Z"}},
		{"salesforce daily limit", []string{"-status", "403", filepath.Join(limits, "salesforce-rest-total-requests.body")},
			[]string{"verdict:     owed:403;salesforce:REQUEST_LIMIT_EXCEEDED", "meaning:     not refused: the funder takes the same request later"}},
		{"a 403 read by no rule", []string{"-status", "403", filepath.Join(soap, "savon-cxf-server.body")},
			[]string{"verdict:     terminal:403", "meaning:     a refusal: the same request meets this answer again", "ends:        failed_terminal (terminal) after 1 attempt"}},
		{"metro schema validation, soap", []string{"-classifier", "soap", filepath.Join(soap, "metro-server-schema-validation.body")},
			[]string{"answer:      500 (assumed: ", "verdict:     terminal:500;xsd:validation", "retried:     no"}},
		{"metro schema validation, no classifier", []string{filepath.Join(soap, "metro-server-schema-validation.body")},
			[]string{"verdict:     transient:500", "retried:     yes, 4 times"}},
		{"simpler soap certificate, grantsgov", []string{"-classifier", "grantsgov", filepath.Join(corpus, "simpler-soap-certificate-not-configured.body")},
			[]string{"verdict:     terminal:500;grantsgov:certificate", "ends:        failed_terminal (terminal) after 1 attempt"}},
		{"a short deadline", []string{"-status", "503", "-header", "Retry-After: 60", "-deadline", "30s", filepath.Join(limits, "simpler-maintenance.body")},
			[]string{"verdict:     owed:503;retry_after", "owed:        yes, not before ", "(in 1m0s)"}},
		{"a long deadline", []string{"-status", "503", "-header", "Retry-After: 60", "-deadline", "5m", "-retries", "1", filepath.Join(limits, "simpler-maintenance.body")},
			[]string{"retried:     yes, 1 time, after 1m0s", "ends:        dead_letter (retries_exhausted) after 2 attempts"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := classifyRun(t, c.args...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, l := range c.lines {
				if !strings.Contains(out, l) {
					t.Errorf("output lacks %q:\n%s", l, out)
				}
			}
		})
	}
}

// A header file as curl -D writes it: the status line gives the status.
func TestClassifyReadsAStatusLine(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "answer.headers")
	b := filepath.Join(dir, "answer.body")
	// The answer's Date is days stale: the quota counts from when the
	// answer arrives, on the Transport's clock, not from it.
	os.WriteFile(h, []byte("HTTP/1.1 403 Quota Exceeded\r\ncontent-type: application/json\r\ndate: Mon, 30 Nov 2026 03:00:00 GMT\r\nretry-after: 504\r\n\r\n"), 0o600)
	os.WriteFile(b, []byte(`{"statusCode": 403, "message": "Out of call volume quota. Quota will be replenished in 00:08:24."}`), 0o600)
	code, out, _ := classifyRun(t, "-headers", h, b)
	if code != exitOK || !strings.Contains(out, "verdict:     owed:403;azure:quota") || !strings.Contains(out, "(in 8m24s)") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	// -status wins over the status line.
	if _, out, _ := classifyRun(t, "-status", "500", "-headers", h, b); !strings.Contains(out, "verdict:     owed:500;retry_after") {
		t.Errorf("-status 500 with the file's 403: output:\n%s", out)
	}
}

// A funder's own rules, from a JSON file, come before the classifier.
func TestClassifyAsksTheFundersRulesFirst(t *testing.T) {
	soap := filepath.Join("..", "..", "testdata", "soapfaults", "savon-cxf-server.body")
	rules := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(rules, []byte(`[{"Status": 500, "Contains": "Fault occurred while processing.", "Verdict": {"Reason": "funder:processing"}}]`), 0o600)
	code, out, _ := classifyRun(t, "-rules", rules, "-classifier", "soap", soap)
	if code != exitOK || !strings.Contains(out, "verdict:     terminal:500;funder:processing") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if _, out, _ := classifyRun(t, "-classifier", "soap", soap); !strings.Contains(out, "verdict:     transient:500;soap:Server") {
		t.Errorf("without the rules: output:\n%s", out)
	}
}

func TestClassifyRefusesBadInput(t *testing.T) {
	body := filepath.Join("..", "..", "testdata", "limits", "aws-apigateway-quota.body")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no file", nil, exitUsage, "grantretry: classify: give one FILE"},
		{"two files", []string{body, body}, exitUsage, "grantretry: classify: give one FILE"},
		{"unknown classifier", []string{"-classifier", "xml", body}, exitUsage, `-classifier "xml": want none, soap or grantsgov`},
		{"bad header", []string{"-header", "Retry-After 5", body}, exitUsage, `want "Name: value"`},
		{"bad status", []string{"-status", "42", body}, exitUsage, "-status 42: not an HTTP status"},
		{"bad budget", []string{"-retries", "-1", body}, exitUsage, "grantretry: classify: grantretry: invalid option"},
		{"missing file", []string{filepath.Join(t.TempDir(), "none.body")}, exitFailure, "grantretry: classify: open "},
		{"missing headers", []string{"-headers", filepath.Join(t.TempDir(), "none.headers"), body}, exitFailure, "grantretry: classify: open "},
		{"rules not JSON", []string{"-rules", badRules(t, `Status: 500`), body}, exitFailure, "not a JSON array of rules"},
		{"rules with a field no Rule has", []string{"-rules", badRules(t, `[{"Code": 500, "Contains": "x", "Verdict": {"Reason": "f"}}]`), body}, exitFailure, `unknown field "Code"`},
		{"rules CheckRules refuses", []string{"-rules", badRules(t, `[{"Status": 500, "Verdict": {"Reason": "f"}}, {"Status": 500, "Contains": "x", "Verdict": {"Reason": "g"}}]`), body}, exitFailure, ": invalid rule: rule 1: rule 0 (any 500)"},
	}
	for _, c := range cases {
		code, out, errOut := classifyRun(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.stderr) || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d saying %q", c.name, code, out, errOut, c.code, c.stderr)
		}
	}
	if code, out, _ := classifyRun(t, "-help"); code != exitOK || !strings.Contains(out, "Usage: grantretry classify") {
		t.Errorf("-help: exit %d, output %q", code, out)
	}
}

// badRules writes text to a rules file and returns its path.
func badRules(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An answer a rule marks Applied is a refusal on its own, and the output
// says what it means after an ambiguous attempt.
func TestClassifySaysWhatAnAppliedAnswerMeans(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.json")
	rule := `[{"Status": 403, "Contains": "\"not_in_progress\"", "Verdict": {"Applied": true, "Reason": "applied:not_in_progress"}}]`
	if err := os.WriteFile(rules, []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	body := filepath.Join("..", "..", "simplergrants", "testdata", "submit-not-in-progress.body")
	code, out, errOut := classifyRun(t, "-status", "403", "-rules", rules, body)
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, l := range []string{
		"verdict:     terminal:403;applied:not_in_progress",
		"applied:     yes: a refusal on its own, as here; after an attempt that may have been applied, or to the redelivery of an ambiguous letter, the call ends succeeded (already_applied)",
		"ends:        failed_terminal (terminal) after 1 attempt",
	} {
		if !strings.Contains(out, l) {
			t.Errorf("output lacks %q:\n%s", l, out)
		}
	}
}
