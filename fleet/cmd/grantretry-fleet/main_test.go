package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newDB returns the DSN of a new database with the fleet's schema.
func newDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := fleet.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return dsn, pool
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageAndHelpExitStatuses(t *testing.T) {
	t.Setenv(envDSN, "")
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, exitUsage, ""},
		{[]string{"help"}, exitOK, "Commands:"},
		{[]string{"--help"}, exitOK, "Commands:"},
		{[]string{"nope"}, exitUsage, ""},
		{[]string{"audit"}, exitUsage, ""},
		{[]string{"audit", "verify", "-help"}, exitOK, "-pg"},
		{[]string{"audit", "trace", "-help"}, exitOK, "-correlation"},
		{[]string{"deadletter", "redeliver", "-help"}, exitOK, "-trust-key"},
		{[]string{"audit", "verify"}, exitUsage, ""}, // no DSN
		{[]string{"audit", "trace", "-pg", "postgres://x/y"}, exitUsage, ""},
		{[]string{"deadletter", "show", "-pg", "postgres://x/y"}, exitUsage, ""},
		{[]string{"deadletter", "redeliver", "-pg", "postgres://x/y"}, exitUsage, ""},
		{[]string{"deadletter", "list", "-bogus"}, exitUsage, ""},
	} {
		code, out, _ := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%q: exit %d, want %d; stdout %q", tc.args, code, tc.code, out)
		}
	}
}

func TestAuditVerifyAndTraceOnTheDatabase(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }))
	defer funder.Close()
	tp := grantretry.New(nil, grantretry.WithAuditTrail(tr))
	req, _ := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, "GRANT-7"), http.MethodPost, funder.URL, strings.NewReader("{}"))
	resp, err := tp.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	code, out, errOut := runCLI("audit", "verify", "-pg", dsn)
	if code != exitOK || !strings.Contains(out, "ok: 3 records from 1 writer") || !strings.Contains(out, tr.Writer()) {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv(envDSN, dsn)
	code, out, errOut = runCLI("audit", "trace", "--submission", "GRANT-7")
	if code != exitOK || !strings.Contains(out, "disposition=succeeded") || !strings.Contains(out, "2 records matched") {
		t.Fatalf("trace: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runCLI("audit", "trace", "--submission", "GRANT-8"); code != exitFailure {
		t.Fatalf("trace of nothing: exit %d, want 1", code)
	}
	// A superuser's edit is named, and fails the command.
	pool.Exec(ctx, `ALTER TABLE grantretry_trail DISABLE TRIGGER USER`)
	pool.Exec(ctx, `UPDATE grantretry_trail SET record = replace(record, '201', '500') WHERE seq = 2`)
	code, _, errOut = runCLI("audit", "verify")
	if code != exitFailure || !strings.Contains(errOut, tr.Writer()+", record seq 2") {
		t.Fatalf("verify after an edit: exit %d, %s", code, errOut)
	}
}

func testLetter(url string, i int, ambiguous bool) *grantretry.Letter {
	body := []byte(fmt.Sprintf(`{"application":%d}`, i))
	sum := sha256.Sum256(body)
	created := time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC)
	return &grantretry.Letter{
		Version: grantretry.LetterVersion, ID: fmt.Sprintf("letter-%d", i),
		Disposition: grantretry.DeadLetter, StopReason: grantretry.StopRetriesSpent,
		Method: http.MethodPost, URL: url + "/submit", Body: body,
		BodySHA256: hex.EncodeToString(sum[:]), BodyBytes: int64(len(body)),
		IdempotencyKey: fmt.Sprintf("key-%d", i), Attempts: 5, LastStatus: 503,
		Ambiguous: ambiguous, Created: created,
	}
}

func TestDeadLetterListShowRedeliver(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	var sent atomic.Int32
	var auth atomic.Value
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		w.WriteHeader(201)
	}))
	defer funder.Close()
	// The test's inserts are not what it tests: a limit a loaded
	// machine's durable insert stays within.
	letters := fleet.NewLetters(pool, fleet.WithLimit(time.Second))
	for i := range 3 {
		if err := letters.PutDeadLetter(ctx, testLetter(funder.URL, i, i == 2)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(envDSN, dsn)
	code, out, _ := runCLI("deadletter", "list")
	if code != exitOK || !strings.Contains(out, "letter-1") || !strings.Contains(out, "3 letters waiting") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI("deadletter", "show", "letter-0")
	if code != exitOK || !strings.Contains(out, "key-0") || !strings.Contains(out, "waiting") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI("deadletter", "show", "letter-9"); code != exitFailure {
		t.Fatalf("show of a missing letter: exit %d, want 1", code)
	}
	code, out, errOut := runCLI("deadletter", "redeliver", "letter-0", "-header", "Authorization: Bearer t")
	if code != exitOK || !strings.Contains(out, "redelivered letter letter-0: answered 201") || auth.Load() != "Bearer t" {
		t.Fatalf("redeliver one: exit %d\n%s%s", code, out, errOut)
	}
	// -all: letter-1 goes; letter-2 is ambiguous, and -all leaves it.
	code, out, errOut = runCLI("deadletter", "redeliver", "-all")
	if code != exitOK || !strings.Contains(out, "redelivered letter letter-1") || !strings.Contains(out, "ambiguous: letter letter-2: ") {
		t.Fatalf("redeliver -all: exit %d\n%s%s", code, out, errOut)
	}
	if sent.Load() != 2 {
		t.Fatalf("the funder got %d requests, want 2", sent.Load())
	}
	code, out, _ = runCLI("deadletter", "show", "letter-0")
	if code != exitOK || !strings.Contains(out, "redelivered 20") {
		t.Fatalf("show after redelivery: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI("deadletter", "redeliver", "-all", "-trust-key"); code != exitOK || !strings.Contains(out, "letter-2") {
		t.Fatalf("redeliver -trust-key: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI("deadletter", "redeliver", "letter-0"); code != exitFailure {
		t.Fatalf("redelivering a redelivered letter: exit %d, want 1", code)
	}
}

func TestSimWritesTheChartWithItsCommand(t *testing.T) {
	dsn := pgtest.DSN(t)
	chart := filepath.Join(t.TempDir(), "storm.svg")
	code, out, errOut := runCLI("sim", "-pg", dsn, "-p", "2", "-workers", "1",
		"-before", "200ms", "-outage", "400ms", "-after", "200ms", "-chart", chart)
	if code != exitOK || !strings.Contains(out, "wrote "+chart) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	pic, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	want := `<!-- $ cd fleet && go run ./cmd/grantretry-fleet sim -pg "$GRANTRETRY_PG_DSN" -after 200ms -before 200ms -chart ` +
		chart + ` -outage 400ms -p 2 -workers 1 -->` + "\n<svg "
	if !bytes.HasPrefix(pic, []byte(want)) || bytes.Contains(pic, []byte(dsn)) {
		t.Fatalf("chart begins %q, want %q", pic[:min(len(pic), 300)], want)
	}
	for _, series := range []string{`id="local-full-ok"`, `id="fleet-zoom-failed"`, `id="single-full-failed"`} {
		if !bytes.Contains(pic, []byte(series)) {
			t.Errorf("no %s", series)
		}
	}
}

func TestSimRefusesAChartItCannotWriteBeforeRunning(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "missing", "storm.svg")
	if code, _, errOut := runCLI("sim", "-pg", "postgres://x/y", "-chart", chart); code != exitUsage || !strings.Contains(errOut, "no directory") {
		t.Fatalf("exit %d, %s", code, errOut)
	}
}

// A usage error of a subcommand points at that subcommand's own help,
// which lists its flags, as the root tool does; that help exists.
func TestSubcommandUsageErrorsPointAtTheSubcommandsHelp(t *testing.T) {
	t.Setenv(envDSN, "")
	for _, tc := range []struct {
		args []string
		help string
	}{
		{[]string{"deadletter", "list", "-x"}, "deadletter list"},
		{[]string{"deadletter", "show", "-pg", "postgres://x/y"}, "deadletter show"},
		{[]string{"deadletter", "redeliver", "-all", "-timeout", "0"}, "deadletter redeliver"},
		{[]string{"deadletter", "redeliver", "-all", "-header-env", "Authorization"}, "deadletter redeliver"},
		{[]string{"deadletter", "drain"}, "deadletter drain"},
		{[]string{"deadletter", "list"}, "deadletter list"}, // no database given
		{[]string{"audit", "trace", "-bogus"}, "audit trace"},
		{[]string{"audit", "verify", "-bogus"}, "audit verify"},
		{[]string{"deadletter", "purge"}, "deadletter"},
		{[]string{"audit"}, "audit"},
	} {
		code, _, errOut := runCLI(tc.args...)
		want := "\nRun 'grantretry-fleet " + tc.help + " -help' for its flags.\n"
		if code != exitUsage || !strings.HasSuffix(errOut, want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, exitUsage, want)
		}
		if code, out, _ := runCLI(append(strings.Fields(tc.help), "-help")...); code != exitOK || !strings.Contains(out, "Usage: grantretry-fleet "+tc.help) {
			t.Errorf("%s -help: exit %d\n%s", tc.help, code, out)
		}
	}
}

// The synopses of the help are text an operator reads at a terminal: no
// line is wider than 80 columns, and a paragraph's line is broken only
// where its next word would not fit (a line with room for it and 8
// columns to spare reads as a sentence cut in the middle).
func TestHelpSynopsesFitEightyColumnsAndBreakNoSentenceMidLine(t *testing.T) {
	for _, args := range [][]string{
		{"audit", "-help"}, {"audit", "verify", "-help"}, {"audit", "trace", "-help"},
		{"deadletter", "-help"}, {"deadletter", "list", "-help"}, {"deadletter", "show", "-help"},
		{"deadletter", "redeliver", "-help"}, {"deadletter", "retire", "-help"}, {"deadletter", "drain", "-help"},
	} {
		_, out, _ := runCLI(args...)
		synopsis, _, _ := strings.Cut(out, "\nFlags:\n")
		checkFilled(t, fmt.Sprintf("%q", args), synopsis)
	}
}

// checkFilled reports a line of text wider than 80 columns, and a line of
// a paragraph (lines not indented, between blank lines) followed by one
// whose first word it had room for.
func checkFilled(t *testing.T, name, text string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("%s: a line of %d columns: %q", name, n, line)
		}
		if i+1 == len(lines) || line == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(lines[i+1], " ") {
			continue
		}
		next := strings.Fields(lines[i+1])
		if len(next) > 0 && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(next[0]) <= 72 {
			t.Errorf("%s: %q is broken before %q, which fits on it", name, line, next[0])
		}
	}
}
