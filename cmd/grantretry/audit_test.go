package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// auditClock is the Transport's, the trail's and zap's clock: waits
// return at once and move it on.
type auditClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *auditClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *auditClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *auditClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

// cannedFunder answers each call, by correlation id, with its statuses in
// turn; a 429 says Retry-After: 3.
type cannedFunder struct {
	mu      sync.Mutex
	answers map[string][]int
}

func (f *cannedFunder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	f.mu.Lock()
	id := r.Header.Get(grantretry.HeaderCorrelationID)
	code := f.answers[id][0]
	if len(f.answers[id]) > 1 {
		f.answers[id] = f.answers[id][1:]
	}
	f.mu.Unlock()
	h := http.Header{}
	if code == http.StatusTooManyRequests {
		h.Set("Retry-After", "3")
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// tracedCalls are the calls writeTestTrail makes: correlation id,
// submission id, the funder's answers.
var tracedCalls = []struct {
	corr, sub string
	answers   []int
}{
	{"corr-a", "GRANT-2026-0042", []int{503, 429, 201}},
	{"corr-b", "GRANT-2026-0042", []int{422}},
	{"corr-c", "GRANT-2026-0099", []int{201}},
}

// writeTestTrail makes the tracedCalls through a real Transport that
// writes its audit trail to an AuditTrail in a new directory, and returns the live file and each call's Idempotency-Key.
func writeTestTrail(t *testing.T) (string, map[string]string) {
	t.Helper()
	path, funder, client := newTrailClient(t, grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	keys := map[string]string{}
	for _, c := range tracedCalls {
		funder.answers[c.corr] = c.answers
		keys[c.corr] = makeCall(t, client, c.corr, c.sub)
	}
	return path, keys
}

// newTrailClient returns a client whose Transport, built with opts, writes
// its audit trail to a new trail file at the returned path, and the canned
// funder behind it. The trail is closed, and checked for a failure, when
// the test ends.
func newTrailClient(t *testing.T, opts ...grantretry.Option) (string, *cannedFunder, *http.Client) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	clk := &auditClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	sink, err := trail.Open(path, trail.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sink.Err(); err != nil {
			t.Error(err)
		}
		sink.Close()
	})
	funder := &cannedFunder{answers: map[string][]int{}}
	all := append([]grantretry.Option{grantretry.WithAuditTrail(sink), grantretry.WithClock(clk)}, opts...)
	return path, funder, &http.Client{Transport: grantretry.New(funder, all...)}
}

// makeCall posts an application and returns its Idempotency-Key.
func makeCall(t *testing.T, client *http.Client, corr, sub string) string {
	t.Helper()
	ctx := grantretry.WithSubmissionID(context.Background(), sub)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://grants.example.gov/v1/applications?token=s3cret",
		strings.NewReader(`{"applicant":"Example Foundation","amount":250000,"call":"`+corr+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(grantretry.HeaderCorrelationID, corr)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	return o.IdempotencyKey
}

// editLine replaces old by new in the line-th line of the file at path.
func editLine(t *testing.T, path string, line int, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if !bytes.Contains(lines[line-1], []byte(old)) {
		t.Fatalf("line %d lacks %q: %s", line, old, lines[line-1])
	}
	lines[line-1] = bytes.Replace(lines[line-1], []byte(old), []byte(new), 1)
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func runAuditArgs(args ...string) (string, error) {
	var stdout bytes.Buffer
	err := runAudit(args, &stdout, io.Discard)
	return stdout.String(), err
}

// isFailure reports whether err makes run exit 1: not usage, not help.
func isFailure(err error) bool {
	var uerr usageError
	return err != nil && !errors.As(err, &uerr) && !errors.Is(err, flag.ErrHelp)
}

func TestAuditVerifyOK(t *testing.T) {
	path, _ := writeTestTrail(t)
	out, err := runAuditArgs("verify", path, path+".head")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"ok: 9 records in 1 file, seq 1..9, last hash ",
		"head: seq 9 synced",
		"records: grantretry.attempt 5, grantretry.disposition 3, grantretry.trail_opened 1",
		"dispositions: failed_terminal 1, succeeded 2",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

func TestAuditVerifyBrokenChain(t *testing.T) {
	path, _ := writeTestTrail(t)
	editLine(t, path, 3, `"status":429`, `"status":200`)
	out, err := runAuditArgs("verify", path)
	if !isFailure(err) {
		t.Fatalf("verify: %v, want a failure", err)
	}
	want := "verify: " + path + " line 3 (record seq 3): hash does not match the record (edited?) (2 records before it verify)"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	if out != "" {
		t.Errorf("output for a broken chain: %s", out)
	}
}

func TestAuditVerifyMissingFile(t *testing.T) {
	_, err := runAuditArgs("verify", filepath.Join(t.TempDir(), "nope.jsonl"))
	if !isFailure(err) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("verify of a missing file: %v, want a failure matching os.ErrNotExist", err)
	}
}

// Trace reconstructs the calls one selector picks, flags after the files
// or before them.
func TestAuditTraceSelectors(t *testing.T) {
	path, keys := writeTestTrail(t)
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"correlation", []string{"trace", path, "--correlation", "corr-a"},
			[]string{"call 1 of 1", "corr-a", "GRANT-2026-0042", keys["corr-a"], "POST grants.example.gov /v1/applications",
				"transient:503", "backoff", "transient:429", "retry_after", "ok:201", "succeeded", "stop reason success", "attempts 3", "disposition succeeded at 2026-11-30T09:00:0"},
			[]string{"corr-b", "corr-c", "s3cret"}},
		{"submission", []string{"trace", "--submission", "GRANT-2026-0042", path},
			[]string{"call 1 of 2", "call 2 of 2", "corr-a", "corr-b", "terminal:422", "failed_terminal"},
			[]string{"corr-c"}},
		{"files after --", []string{"trace", "--correlation", "corr-c", "--", path},
			[]string{"call 1 of 1", "corr-c"},
			[]string{"corr-a", "corr-b"}},
		{"key", []string{"trace", path, "-key=" + keys["corr-c"]},
			[]string{"call 1 of 1", "corr-c", "GRANT-2026-0099", "sha256 "},
			[]string{"corr-a", "corr-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runAuditArgs(tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, "chain verified: 9 records in 1 file") {
				t.Errorf("output does not start with the verification:\n%s", out)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, s := range tc.want {
				if !strings.Contains(flat, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(out, s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestAuditTraceNoMatch(t *testing.T) {
	path, _ := writeTestTrail(t)
	_, err := runAuditArgs("trace", path, "--correlation", "corr-z")
	if !isFailure(err) || !strings.Contains(err.Error(), `no call with correlation_id "corr-z" in 9 records`) {
		t.Errorf("trace of nothing: %v", err)
	}
}

// A broken chain still shows the calls read before the break, says so,
// and fails.
func TestAuditTraceBrokenChain(t *testing.T) {
	path, _ := writeTestTrail(t)
	editLine(t, path, 7, `"status":422`, `"status":201`)
	out, err := runAuditArgs("trace", path, "--submission", "GRANT-2026-0042")
	if !isFailure(err) || !strings.Contains(err.Error(), "line 7 (record seq 7): hash does not match") {
		t.Fatalf("trace of a broken chain: %v", err)
	}
	for _, s := range []string{"corr-a", "corr-b", "none recorded", "WARNING: the chain is broken"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	// corr-c comes after the break: nothing to show, only the break
	out, err = runAuditArgs("trace", path, "--correlation", "corr-c")
	if !isFailure(err) || !strings.Contains(err.Error(), "line 7 (record seq 7)") || out != "" {
		t.Errorf("trace of a call after the break: %v, output:\n%s", err, out)
	}
}

func TestAuditUsageErrors(t *testing.T) {
	path, _ := writeTestTrail(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "missing subcommand"},
		{"unknown subcommand", []string{"replay", path}, `unknown subcommand "replay"`},
		{"verify without files", []string{"verify"}, "verify: no trail file given"},
		{"trace without files", []string{"trace", "--key", "k"}, "trace: no trail file given"},
		{"trace without selector", []string{"trace", path}, "trace: give exactly one of"},
		{"trace with two selectors", []string{"trace", path, "--key", "k", "--correlation", "c"}, "give exactly one of"},
		{"unknown flag", []string{"verify", path, "--bogus"}, "flag provided but not defined: -bogus"},
		{"flag without value", []string{"trace", path, "--key"}, "flag needs an argument: -key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runAuditArgs(tc.args...)
			var uerr usageError
			if !errors.As(err, &uerr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("runAudit(%q): %v, want a usage error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// A usage error of a subcommand points to that subcommand's help, which
// lists its flags.
func TestAuditUsageErrorNamesSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "trail.jsonl", "--key"}, "Run 'grantretry audit trace -help' for its flags."},
		{[]string{"verify", "--bogus", "trail.jsonl"}, "Run 'grantretry audit verify -help' for its flags."},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"audit"}, tc.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "-help") != 1 {
			t.Errorf("audit %q: exit %d, stderr %q; want %d and one hint: %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
}

func TestAuditHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-help"}, "Usage: grantretry audit verify FILE..."},
		{[]string{"--help"}, "grantretry audit trace FILE..."},
		{[]string{"help"}, "docs/audit-trail.md"},
		{[]string{"verify", "--help"}, "Usage: grantretry audit verify FILE...\n\nChecks"},
		{[]string{"verify", "trail.jsonl", "-help"}, "Checks the hash chain"},
		{[]string{"trace", "-help"}, "-correlation string"},
		{[]string{"trace", "trail.jsonl", "--help"}, "-submission string"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := runAuditArgs(tc.args...)
			if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, tc.want) {
				t.Errorf("runAudit(%q): %v, output lacks %q:\n%s", tc.args, err, tc.want, out)
			}
		})
	}
}

// A correlation id used by two calls (a dead letter and its redelivery, or
// a caller reusing its own): a disposition ends a call, so trace shows two
// calls, each with its own attempts and disposition.
func TestAuditTraceSplitsCallsAtTheirDisposition(t *testing.T) {
	path, funder, client := newTrailClient(t,
		grantretry.WithBudget(1, time.Hour), grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	funder.answers["corr-r"] = []int{503}
	makeCall(t, client, "corr-r", "GRANT-2026-0007")
	funder.answers["corr-r"] = []int{201}
	makeCall(t, client, "corr-r", "GRANT-2026-0007")

	out, err := runAuditArgs("trace", path, "--correlation", "corr-r")
	if err != nil {
		t.Fatal(err)
	}
	first, second, ok := strings.Cut(out, "call 2 of 2")
	if !ok || !strings.Contains(first, "call 1 of 2") {
		t.Fatalf("want two calls:\n%s", out)
	}
	flat1, flat2 := strings.Join(strings.Fields(first), " "), strings.Join(strings.Fields(second), " ")
	if !strings.Contains(flat1, "disposition dead_letter") || !strings.Contains(flat1, "attempts 2") || strings.Contains(flat1, "ok:201") {
		t.Errorf("first call should be the dead letter, 2 attempts:\n%s", first)
	}
	if !strings.Contains(flat2, "disposition succeeded") || !strings.Contains(flat2, "attempts 1") || strings.Contains(flat2, "transient:503") {
		t.Errorf("second call should be the success, 1 attempt:\n%s", second)
	}
}

// A question to the reconciler is in the trail and in the trace, between
// the ambiguous attempt and the disposition it decided.
func TestAuditTraceShowsReconcile(t *testing.T) {
	reconcile := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("GRANT00012345"))}, nil
	}
	path, funder, client := newTrailClient(t, grantretry.WithReconciler(reconcile), grantretry.WithoutBreaker())
	funder.answers["corr-q"] = []int{502}
	makeCall(t, client, "corr-q", "GRANT-2026-0011")

	out, err := runAuditArgs("trace", path, "--correlation", "corr-q")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"transient:502", "asked 200 reconcile:applied", "disposition succeeded", "stop reason reconciled", "attempts 1", "reconciles 1"} {
		if !strings.Contains(flat, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}
	if _, err := runAuditArgs("verify", path); err != nil {
		t.Errorf("verify: %v", err)
	}
}

// redeliverCall sends the letter letterID again through client, as
// deadletter.NewRedeliveryRequest does: under the letter's correlation id,
// submission id and key, its context marked as the letter's redelivery.
func redeliverCall(t *testing.T, client *http.Client, corr, sub, key, letterID string) {
	t.Helper()
	ctx := grantretry.WithRedeliveryOf(grantretry.WithSubmissionID(context.Background(), sub), letterID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://grants.example.gov/v1/applications", strings.NewReader(`{"call":"`+corr+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(grantretry.HeaderCorrelationID, corr)
	req.Header.Set(grantretry.HeaderIdempotencyKey, key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// traceTimes returns the times of the attempt and disposition rows of
// trace's output, in the order printed.
func traceTimes(out string) []string {
	var times []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && strings.HasPrefix(f[0], "2026-"):
			times = append(times, f[0])
		case len(f) > 3 && f[0] == "disposition" && f[2] == "at":
			times = append(times, f[3])
		}
	}
	return times
}

// A dead letter's call and its redelivery, selected by their key: the
// call is printed first, then its redelivery, every row in time order.
func TestAuditTracePrintsACallBeforeItsRedelivery(t *testing.T) {
	path, funder, client := newTrailClient(t,
		grantretry.WithBudget(1, time.Hour), grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	funder.answers["corr-l"] = []int{503}
	key := makeCall(t, client, "corr-l", "GRANT-2026-0123")
	funder.answers["corr-l"] = []int{201}
	redeliverCall(t, client, "corr-l", "GRANT-2026-0123", key, "L-0123")

	out, err := runAuditArgs("trace", path, "-key", key)
	if err != nil {
		t.Fatal(err)
	}
	first, second, ok := strings.Cut(out, "call 2 of 2")
	if !ok {
		t.Fatalf("want two calls:\n%s", out)
	}
	wantAll(t, "the call", first, "call 1 of 2", "dead_letter at")
	wantNone(t, "the call", first, "redelivers")
	wantAll(t, "its redelivery", second, "redelivers", "dead letter L-0123", "succeeded at")
	times := traceTimes(out)
	if len(times) != 5 || !slices.IsSorted(times) {
		t.Errorf("rows at %q: want 5, in time order:\n%s", times, out)
	}
}

// redeliveringSink stands for a worker quick enough to send a letter
// again between the moment it is kept and the call's disposition record:
// it redelivers each letter as it is put, through redeliver.
type redeliveringSink struct{ redeliver func(l *grantretry.Letter) }

func (s redeliveringSink) PutDeadLetter(_ context.Context, l *grantretry.Letter) error {
	s.redeliver(l)
	return nil
}

// A redelivery that starts before the call that left its letter has
// recorded its disposition, under the same correlation id, is a call of
// its own: its records are not taken for the first call's, and the first
// call keeps its own disposition.
func TestAuditTraceKeepsARedeliveryApartFromTheCallThatLeftItsLetter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	clk := &auditClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	sink, err := trail.Open(path, trail.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	funder := &cannedFunder{answers: map[string][]int{"corr-w": {503}}}
	opts := []grantretry.Option{grantretry.WithAuditTrail(sink), grantretry.WithClock(clk),
		grantretry.WithBudget(1, time.Hour), grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle()}
	worker := &http.Client{Transport: grantretry.New(funder, opts...)}
	letters := redeliveringSink{func(l *grantretry.Letter) {
		funder.mu.Lock()
		funder.answers["corr-w"] = []int{201}
		funder.mu.Unlock()
		redeliverCall(t, worker, "corr-w", l.SubmissionID, l.IdempotencyKey, l.ID)
	}}
	pipeline := &http.Client{Transport: grantretry.New(funder, append(opts, grantretry.WithDeadLetter(letters))...)}
	makeCall(t, pipeline, "corr-w", "GRANT-2026-0124")

	out, err := runAuditArgs("trace", path, "-correlation", "corr-w")
	if err != nil {
		t.Fatal(err)
	}
	first, second, ok := strings.Cut(out, "call 2 of 2")
	if !ok {
		t.Fatalf("want two calls:\n%s", out)
	}
	flat1, flat2 := strings.Join(strings.Fields(first), " "), strings.Join(strings.Fields(second), " ")
	if !strings.Contains(flat1, "disposition dead_letter") || strings.Contains(flat1, "redelivers") || strings.Contains(flat1, "ok:201") {
		t.Errorf("the first call should be the dead letter's, without its redelivery's records:\n%s", first)
	}
	if !strings.Contains(flat2, "redelivers dead letter") || !strings.Contains(flat2, "disposition succeeded") || !strings.Contains(flat2, "attempts 1") {
		t.Errorf("the second call should be the redelivery, with its attempt and disposition:\n%s", second)
	}
}

// A call made under a closing time shows it, and whether the call was
// late; one that ended owed_later shows the funder's time. A call with
// neither shows none of them. (The call that ends owed comes last: it
// puts the host in quota.)
func TestAuditTraceShowsClosingTimeAndNotBefore(t *testing.T) {
	path, funder, client := newTrailClient(t,
		grantretry.WithBudget(1, 2*time.Second), grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	funder.answers["corr-plain"] = []int{201}
	makeCall(t, client, "corr-plain", "GRANT-2026-0014")
	due := time.Date(2026, 11, 30, 9, 0, 1, 0, time.UTC)
	funder.answers["corr-owed"] = []int{http.StatusTooManyRequests} // Retry-After: 3, past the deadline
	ctx := grantretry.WithClosingTime(grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0013"), due)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://grants.example.gov/v1/applications", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(grantretry.HeaderCorrelationID, "corr-owed")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if o.StopReason != grantretry.StopOwedLater || !o.Late || o.NotBefore.IsZero() {
		t.Fatalf("outcome %+v; want owed_later, late, with a NotBefore", o)
	}

	out, err := runAuditArgs("trace", path, "--correlation", "corr-owed")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"stop reason owed_later",
		"not before " + o.NotBefore.UTC().Format(time.RFC3339Nano),
		"due by " + due.Format(time.RFC3339Nano),
		"late yes: the work is still owed after its closing time",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}
	out, err = runAuditArgs("trace", path, "--correlation", "corr-plain")
	if err != nil {
		t.Fatal(err)
	}
	for _, not := range []string{"not before", "due by", "late"} {
		if strings.Contains(out, "  "+not+" ") {
			t.Errorf("trace of a call without a closing time shows %q:\n%s", not, out)
		}
	}
}
