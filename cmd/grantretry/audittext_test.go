package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// audit trace's usage and its flag list spell the selectors alike.
func TestAuditTraceUsageAndFlagListAgree(t *testing.T) {
	for _, args := range [][]string{{"-help"}, {"trace", "-help"}} {
		out, _ := runAuditArgs(args...)
		if strings.Contains(out, "--") {
			t.Errorf("audit %q: the usage spells a flag with two dashes, the flag list with one:\n%s", args, out)
		}
		wantAll(t, "audit help", out, "-correlation ID | -submission ID | -key KEY")
	}
	_, err := runAuditArgs("trace", "trail.jsonl")
	if err == nil || !strings.Contains(err.Error(), "give exactly one of -correlation, -submission, -key") {
		t.Errorf("trace without a selector: %v", err)
	}
}

// audit verify of a file that is not a trail says so, rather than that a
// trail was torn or edited.
func TestAuditVerifyOfAFileThatIsNotATrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "go.mod")
	os.WriteFile(path, []byte("module example.com/pipeline\n\ngo 1.26\n"), 0o600)
	for _, sub := range []string{"verify", "trace"} {
		args := []string{sub, path}
		if sub == "trace" {
			args = append(args, "-submission", "GRANT-1")
		}
		_, err := runAuditArgs(args...)
		if !isFailure(err) || !strings.Contains(err.Error(), path+" is not an audit trail") || strings.Contains(err.Error(), "torn or edited") {
			t.Errorf("audit %s of go.mod: %v, want it called not an audit trail", sub, err)
		}
	}
}

// erringFunder fails every attempt with an error that quotes the funder's
// text, escape sequences and all.
type erringFunder struct{ text string }

func (f erringFunder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, errors.New(f.text)
}

// audit trace shows a funder's text with its control characters escaped:
// an error that carries terminal escapes cannot drive the terminal.
func TestAuditTraceEscapesControlCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	clk := &auditClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	sink, err := trail.Open(path, trail.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const evil = "upstream said \x1b[2J\x1b]0;owned\a\tdone\r\n\u0085"
	client := &http.Client{Transport: grantretry.New(erringFunder{evil}, grantretry.WithAuditTrail(sink),
		grantretry.WithClock(clk), grantretry.WithBudget(0, time.Minute))}
	req, _ := http.NewRequest(http.MethodGet, "https://grants.example.gov/v1/status", nil)
	req.Header.Set(grantretry.HeaderCorrelationID, "corr-evil")
	if _, err := client.Do(req); err == nil {
		t.Fatal("the call succeeded")
	}
	sink.Close()
	out, err := runAuditArgs("trace", path, "-correlation", "corr-evil")
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.IndexFunc(out, func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' || r == 0x85 }); i >= 0 {
		t.Errorf("trace prints a control character at %d: %q", i, out[max(0, i-40):min(len(out), i+40)])
	}
	if !bytes.Contains([]byte(out), []byte(`upstream said \x1b[2J\x1b]0;owned\a\tdone\r\n\u0085`)) {
		t.Errorf("trace does not show the text escaped:\n%s", out)
	}
}
