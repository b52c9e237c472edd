package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
)

// A database no fleet process migrated has no trail: the tool says what
// that means and what to check, not the server's "relation does not
// exist".
func TestAuditOnADatabaseNeverMigratedSaysToMigrate(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, args := range [][]string{
		{"audit", "verify", "-pg", dsn},
		{"audit", "trace", "-pg", dsn, "-submission", "GRANT-1"},
	} {
		code, out, errOut := runCLI(args...)
		if code != exitFailure {
			t.Errorf("%q: exit %d, want %d", args[:2], code, exitFailure)
		}
		if !strings.Contains(errOut, "fleet.Migrate") || !strings.Contains(errOut, "no fleet trail") || strings.Contains(errOut, "does not exist") {
			t.Errorf("%q: stderr %q, want it to say the schema was never created and how it is", args[:2], errOut)
		}
		if strings.Contains(out, "ok") {
			t.Errorf("%q: stdout %q", args[:2], out)
		}
	}
}

// failingTransport is an inner layer whose error quotes what the funder
// sent it.
type failingTransport struct{ text string }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, errors.New(f.text)
}

// The error and reason fields carry a funder's text: audit trace prints
// them escaped, so no terminal escape or control character reaches the
// operator's terminal.
func TestAuditTraceEscapesTheErrorAndReasonFields(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const hostile = "\x1b]0;owned\x07\x1b[2J\tfault\u202egnp.exe\r\n"
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(hostile))
	}))
	defer funder.Close()
	// A classifier that reports the funder's fault text as its reason.
	faultText := grantretry.WithClassifier(func(_ *http.Response, body []byte) (grantretry.Classification, bool) {
		return grantretry.Classification{Reason: string(body)}, true
	})
	call := func(tp *grantretry.Transport) {
		req, _ := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, "GRANT-9"), http.MethodPost, funder.URL, strings.NewReader("{}"))
		resp, err := tp.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	call(grantretry.New(nil, grantretry.WithAuditTrail(tr), grantretry.WithBudget(0, time.Minute), faultText))
	call(grantretry.New(failingTransport{"funder said " + hostile}, grantretry.WithAuditTrail(tr), grantretry.WithBudget(0, time.Minute)))

	code, out, errOut := runCLI("audit", "trace", "-pg", dsn, "-submission", "GRANT-9")
	if code != exitOK {
		t.Fatalf("trace: exit %d\n%s%s", code, out, errOut)
	}
	for i, r := range out {
		if (r < ' ' && r != '\n') || r == 0x7f || r == '\u202e' {
			t.Fatalf("trace printed control character %U at byte %d:\n%q", r, i, out)
		}
	}
	for _, want := range []string{`reason="terminal:500;\x1b]0;owned\a\x1b[2J\tfault\u202egnp.exe\r\n"`, `error="funder said \x1b]0;owned`} {
		if !strings.Contains(out, want) {
			t.Errorf("trace output lacks %s:\n%s", want, out)
		}
	}
}
