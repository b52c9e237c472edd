package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// A redelivery is a call of its own whose records name the letter it
// sends again (FieldRedelivers): audit trace says so on each of its rows,
// as the root tool's trace does, and escapes the id like every field.
func TestAuditTraceShowsWhichLetterARedeliveryRedelivers(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated)
	l := testLetter(f.srv.URL, 0, false)
	l.SubmissionID = "GRANT-43"
	putLetters(t, pool, l)
	if code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, l.ID); code != exitOK {
		t.Fatalf("redeliver: exit %d\n%s%s", code, out, errOut)
	}
	// A record whose letter id carries control characters: a pipeline
	// may mark any context as a redelivery.
	ctx := context.Background()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const hostile = "L-\x1b[2J\tx"
	req, _ := http.NewRequestWithContext(grantretry.WithRedeliveryOf(grantretry.WithSubmissionID(ctx, "GRANT-43"), hostile),
		http.MethodPost, f.srv.URL, strings.NewReader("{}"))
	req.Header.Set(grantretry.HeaderIdempotencyKey, "key-hostile")
	resp, err := grantretry.New(nil, grantretry.WithAuditTrail(tr)).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	code, out, errOut := runCLI("audit", "trace", "-pg", dsn, "-submission", "GRANT-43")
	if code != exitOK {
		t.Fatalf("trace: exit %d\n%s%s", code, out, errOut)
	}
	if n := strings.Count(out, "redelivers dead letter "+l.ID+" "); n != 2 {
		t.Errorf("%d rows say they redeliver %s, want its attempt and its disposition:\n%s", n, l.ID, out)
	}
	if n := strings.Count(out, `redelivers dead letter "L-\x1b[2J\tx"`); n != 2 {
		t.Errorf("%d rows name the hostile letter id escaped, want 2:\n%s", n, out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("trace printed the letter id's escape sequence as it is:\n%q", out)
	}
}

// A local file that is not a trail at all (its first line has no seq,
// prev and hash) is named as such, as the root tool's audit verify does,
// not taken for a trail whose first record is torn.
func TestAuditVerifyOfALocalFileThatIsNotATrailSaysSo(t *testing.T) {
	dsn, _ := newDB(t)
	path := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(path, []byte("module example.com/x\n\ngo 1.23\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("audit", "verify", "-pg", dsn, path)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitFailure, out, errOut)
	}
	want := "grantretry-fleet: audit: verify: local trail " + path + " is not an audit trail: its first line is not a trail record (seq, prev, hash)\n"
	if errOut != want || strings.Contains(errOut, "torn") {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
}

// statusTransport answers every request with its status.
type statusTransport int

func (s statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: int(s), Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// stoppedClock reads a set time; a wait moves it on at once.
type stoppedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stoppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stoppedClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// Records of several writers print in time order, not writer by writer:
// a redelivery made by a worker whose writer id sorts before the
// pipeline's comes after the call that left its letter.
func TestAuditTracePrintsRecordsOfAllWritersInTimeOrder(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	newTrail := func(writer string) *fleet.Trail {
		tr, err := fleet.NewTrail(ctx, pool, fleet.WithWriter(writer), fleet.WithLimit(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	call := func(tp *grantretry.Transport, ctx context.Context) {
		req, _ := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, "GRANT-77"), http.MethodPost, "https://funder.example/apply", strings.NewReader("{}"))
		req.Header.Set(grantretry.HeaderIdempotencyKey, "key-77")
		resp, err := tp.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	call(grantretry.New(statusTransport(http.StatusServiceUnavailable), grantretry.WithAuditTrail(newTrail("z-pipeline")),
		grantretry.WithClock(&stoppedClock{now: start}), grantretry.WithBudget(1, time.Hour), grantretry.WithoutBreaker()), ctx)
	call(grantretry.New(statusTransport(http.StatusCreated), grantretry.WithAuditTrail(newTrail("a-worker")),
		grantretry.WithClock(&stoppedClock{now: start.Add(time.Hour)})), grantretry.WithRedeliveryOf(ctx, "L-77"))

	code, out, errOut := runCLI("audit", "trace", "-pg", dsn, "-submission", "GRANT-77")
	if code != exitOK {
		t.Fatalf("trace: exit %d\n%s%s", code, out, errOut)
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "2026-") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want the call's 2 attempts and disposition and its redelivery's attempt and disposition:\n%s", len(rows), out)
	}
	for i, row := range rows {
		redelivery := strings.Contains(row, "redelivers dead letter L-77")
		if redelivery != (i >= 3) {
			t.Fatalf("row %d is out of time order (the call's 3 rows first, then its redelivery's 2):\n%s", i+1, out)
		}
		if i > 0 && strings.Fields(row)[0] < strings.Fields(rows[i-1])[0] {
			t.Errorf("row %d is earlier than the row before it:\n%s", i+1, out)
		}
	}
}

// A disposition made under a closing time shows it and whether the call
// was late; one that ended owed_later shows the funder's time, or that it
// said none.
func TestAuditTraceShowsClosingTimeAndNotBefore(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "36000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer funder.Close()
	due := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	req, _ := http.NewRequestWithContext(grantretry.WithClosingTime(grantretry.WithSubmissionID(ctx, "GRANT-31"), due),
		http.MethodPost, funder.URL, strings.NewReader("{}"))
	resp, err := grantretry.New(nil, grantretry.WithAuditTrail(tr)).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if o.StopReason != grantretry.StopOwedLater || !o.Late || o.NotBefore.IsZero() {
		t.Fatalf("outcome %+v; want owed_later, late, with a NotBefore", o)
	}

	code, out, errOut := runCLI("audit", "trace", "-pg", dsn, "-submission", "GRANT-31")
	if code != exitOK {
		t.Fatalf("trace: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"not_before=" + o.NotBefore.UTC().Format(time.RFC3339Nano),
		"due_by=" + due.Format(time.RFC3339Nano),
		"late=true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("trace output lacks %s:\n%s", want, out)
		}
	}
}
