package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

// downThenUp is a loopback funder that answers 503 until it is brought
// up, then 201, and counts what it applied.
type downThenUp struct {
	*httptest.Server
	mu      sync.Mutex
	up      bool
	applied int
}

func newDownThenUp(t *testing.T) *downThenUp {
	f := &downThenUp{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.up {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		f.applied++
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *downThenUp) bringUp() { f.mu.Lock(); f.up = true; f.mu.Unlock() }

// pipelineCall makes one submission as a pipeline would, through a
// Transport that keeps letters in dir and writes the trail at path, then
// closes the trail, as a pipeline that stops does. It returns the letter's
// ID.
func pipelineCall(t *testing.T, url, dir, path, sub string) string {
	t.Helper()
	letters, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inner := &http.Transport{}
	defer inner.CloseIdleConnections()
	client := &http.Client{Transport: grantretry.New(inner, grantretry.WithDeadLetter(letters), grantretry.WithAuditTrail(tl),
		grantretry.WithBudget(1, time.Minute), grantretry.WithBackoff(time.Millisecond, time.Millisecond))}
	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(context.Background(), sub), http.MethodPost,
		url+"/v1/applications", strings.NewReader(`{"applicant":"Riverside Food Bank"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if o.Disposition != grantretry.DeadLetter || o.DeadLetterID == "" {
		t.Fatalf("outcome %+v, want a kept dead letter", o)
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	return o.DeadLetterID
}

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// verifiedRecords is the count "audit verify" prints.
func verifiedRecords(t *testing.T, path string) int {
	t.Helper()
	out, stderr, code := runCmd(t, "audit", "verify", path)
	if code != exitOK {
		t.Fatalf("audit verify: exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`^ok: (\d+) records`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("audit verify printed %q", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// The bound sequence: a call that left a dead letter, "deadletter
// redeliver DIR -all -trail PATH", then "audit verify PATH" counts the
// redelivery's records and "audit trace PATH -submission ID" shows the
// call and its redelivery, with attempts and the final disposition.
func TestDeadLetterRedeliverIsOnTheAuditTrail(t *testing.T) {
	f := newDownThenUp(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	const sub = "GRANT-2026-0042"
	id := pipelineCall(t, f.URL, dir, path, sub)
	before := verifiedRecords(t, path)

	f.bringUp()
	out, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-all", "-trail", path)
	if code != exitOK {
		t.Fatalf("redeliver: exit %d\n%s%s", code, out, stderr)
	}
	wantAll(t, "redeliver", out, "redelivered letter "+id+" (submission "+sub+"): answered 201 Created")
	if f.applied != 1 {
		t.Fatalf("the funder applied %d, want 1", f.applied)
	}
	after := verifiedRecords(t, path)
	if after < before+2 {
		t.Errorf("audit verify counts %d records after the redelivery, %d before: want its attempt and disposition too", after, before)
	}
	verify, _, _ := runCmd(t, "audit", "verify", path)
	wantAll(t, "audit verify", verify, "succeeded 1", "dead_letter 1")

	trace, stderr, code := runCmd(t, "audit", "trace", path, "-submission", sub)
	if code != exitOK {
		t.Fatalf("audit trace: exit %d: %s", code, stderr)
	}
	first, second, ok := strings.Cut(trace, "call 2 of 2")
	if !ok {
		t.Fatalf("audit trace shows no second call:\n%s", trace)
	}
	wantAll(t, "the call", first, "call 1 of 2", "dead_letter at", "dead letter id", id)
	wantNone(t, "the call", first, "redelivers")
	wantAll(t, "its redelivery", second, "redelivers", "dead letter "+id, "201", "succeeded at", "ok:201")
}

// Without -trail a redelivery is still on a record: the trail in the
// letter directory, which the command names. A dry run writes none, and a
// file that is not a trail is refused and left alone.
func TestDeadLetterRedeliverWithoutTrailRecordsInTheLetterDirectory(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-a", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	path := filepath.Join(dir, deadletter.RedeliveredDir, defaultRedeliveryTrail)
	if _, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-all", "-dry-run"); code != exitOK {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dry run left %s (err %v): want no trail written", path, err)
	}
	t.Setenv(dlKeyEnv, dlAPIKey)
	_, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-all", "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv)
	if code != exitOK {
		t.Fatalf("redeliver: exit %d: %s", code, stderr)
	}
	wantAll(t, "redeliver's stderr", stderr, path)
	if n := verifiedRecords(t, path); n < 2 {
		t.Errorf("the default trail holds %d records: want the redelivery's attempt and disposition", n)
	}
	trace, stderr, code := runCmd(t, "audit", "trace", path, "-correlation", l.CorrelationID)
	if code != exitOK {
		t.Fatalf("audit trace: exit %d: %s", code, stderr)
	}
	wantAll(t, "audit trace", trace, "redelivers", l.ID, "succeeded")

	notTrail := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notTrail, []byte("call the funder on Monday\n"), 0o600)
	dir = dlSeed(t, dlLetter("L-b", f.URL+"/v1/applications", dlBody))
	_, stderr, code = runCmd(t, "deadletter", "redeliver", dir, "-all", "-trail", notTrail)
	if data, _ := os.ReadFile(notTrail); code != exitFailure || !strings.Contains(stderr, "is not an audit trail") || string(data) != "call the funder on Monday\n" {
		t.Errorf("-trail on a text file: exit %d, stderr %q, file now %q: want it refused and left alone", code, stderr, data)
	}
}

// Redelivering a letter that was already redelivered says when, and with
// what answer, rather than that its file is missing.
func TestDeadLetterRedeliverOfARedeliveredLetterSaysWhen(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-done", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	auth := []string{"-header", "Authorization: " + dlToken, "-header-env", "X-Api-Key=" + dlKeyEnv}
	t.Setenv(dlKeyEnv, dlAPIKey)
	if _, stderr, err := dlRun(append([]string{"redeliver", dir, l.ID}, auth...)...); err != nil {
		t.Fatalf("first redelivery: %v\n%s", err, stderr)
	}
	_, stderr, err := dlRun(append([]string{"redeliver", dir, l.ID}, auth...)...)
	if err == nil {
		t.Fatal("the second redelivery succeeded")
	}
	wantAll(t, "second redelivery", stderr, "L-done was not sent: it was already redelivered 20", "answered 201", "succeeded after 1 attempt")
	wantNone(t, "second redelivery", stderr, "no such file or directory")
	if n, _ := f.stats(); n != 1 {
		t.Errorf("the funder received %d requests, want 1", n)
	}
}

// A redelivery that fails prints the library's "grantretry:" prefix once
// per line, not again inside the message.
func TestDeadLetterRedeliverFailurePrintsThePrefixOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	url := srv.URL
	srv.Close() // nothing listens: every attempt is refused
	l := dlLetter("L-refused", url+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	_, stderr, code := runCmd(t, "deadletter", "redeliver", dir, l.ID, "-timeout", "2s", "-trail", filepath.Join(t.TempDir(), "t.jsonl"))
	if code != exitFailure {
		t.Fatalf("exit %d, want %d: %s", code, exitFailure, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.Count(line, "grantretry:") != 1 {
			t.Errorf("line %q: want one grantretry: prefix", line)
		}
	}
}

// A usage error of a deadletter subcommand points at that subcommand's
// help, which lists its flags.
func TestDeadLetterUsageErrorPointsAtTheSubcommandsHelp(t *testing.T) {
	dir := dlSeed(t)
	for _, sub := range []string{"list", "show", "redeliver"} {
		_, stderr, code := runCmd(t, "deadletter", sub, dir, "-x")
		if code != exitUsage || !strings.Contains(stderr, "Run 'grantretry deadletter "+sub+" -help' for its flags.") {
			t.Errorf("deadletter %s -x: exit %d, stderr %q", sub, code, stderr)
		}
	}
}

// show, list and a dry run print a letter's text escaped: a header value in Latin-1
// and an error that quotes a funder's escape sequences reach the terminal
// as escapes, not as the bytes that would drive it.
func TestDeadLetterShowKeepsTheLettersBytesOffTheTerminal(t *testing.T) {
	l := dlLetter("L-latin1", "https://funder.example/x?applicant=Caf\xe9", dlBody)
	l.Header.Set("X-Applicant", "Caf\xe9 \x9b2J Nord")
	l.LastStatus, l.LastError = 0, "funder said \x1b[2J\x1b]0;owned\a"
	dir := dlSeed(t, l)
	for _, args := range [][]string{{"show", dir, l.ID}, {"list", dir}, {"redeliver", dir, l.ID, "-dry-run"}} {
		out, _, err := dlRun(args...)
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.IndexFunc(out, func(r rune) bool { return r == utf8.RuneError || r < ' ' && r != '\n' }); i >= 0 {
			t.Errorf("%s prints a raw byte at %d: %q", args[0], i, out[max(0, i-30):min(len(out), i+30)])
		}
	}
	out, _, _ := dlRun("show", dir, l.ID)
	wantAll(t, "show", out, `X-Applicant: Caf\xe9 \x9b2J Nord`, `applicant=Caf\xe9`, `funder said \x1b[2J\x1b]0;owned\a`)
}

// recordingDropper is a loopback funder that ignores Idempotency-Key: it
// reads each request whole, records it, and then, unless held, hangs up
// without answering (the connection hijacked and closed), so the client
// cannot tell whether it was applied. A held request waits, recorded, for
// the client to go away; its arrival is signalled on arrived.
type recordingDropper struct {
	*httptest.Server
	mu       sync.Mutex
	recorded []string // the Idempotency-Key of each request recorded
	hold     bool
	arrived  chan struct{}
	release  chan struct{} // closed to let a held request end: its connection is dropped
}

func newRecordingDropper(t *testing.T, hold bool) *recordingDropper {
	f := &recordingDropper{hold: hold, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.recorded = append(f.recorded, r.Header.Get(grantretry.HeaderIdempotencyKey))
		f.mu.Unlock()
		f.arrived <- struct{}{}
		if f.hold {
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *recordingDropper) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.recorded)
}

// letterOnDisk reads letter id's file as it is, without Dir's reading of
// its in-flight mark.
func letterOnDisk(t *testing.T, dir, id string) *grantretry.Letter {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	l := new(grantretry.Letter)
	if err := json.Unmarshal(data, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// A redelivery whose connection dropped after the funder recorded it may
// have been applied: the command sends it once, not again on its own, and
// leaves the letter waiting with that attempt added and marked ambiguous,
// so that the next "redeliver -all" does not send it without -trust-key.
func TestDeadLetterRedeliveryThatMayHaveReachedTheFunderLeavesTheLetterAmbiguous(t *testing.T) {
	f := newRecordingDropper(t, false)
	l := dlLetter("L-dropped", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	path := filepath.Join(t.TempDir(), "trail.jsonl")

	_, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-all", "-trail", path)
	if code != exitFailure {
		t.Fatalf("redeliver: exit %d, want %d\n%s", code, exitFailure, stderr)
	}
	if n := f.count(); n != 1 {
		t.Errorf("the funder recorded the letter %d times, want once", n)
	}
	got := letterOnDisk(t, dir, l.ID)
	if !got.Ambiguous || got.Attempts != l.Attempts+1 || got.LastError == "" || got.LastStatus != 0 {
		t.Errorf("the letter after the dropped redelivery: ambiguous %v, attempts %d, last status %d, last error %q; want ambiguous, %d attempts, the error",
			got.Ambiguous, got.Attempts, got.LastStatus, got.LastError, l.Attempts+1)
	}
	if pending := dlPending(t, dir); len(pending) != 1 {
		t.Errorf("waiting: %q, want the letter", pending)
	}
	if _, err := os.Stat(filepath.Join(dir, l.ID+".sending")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the letter is still marked in flight: %v", err)
	}
	wantAll(t, "stderr", stderr, l.ID, "now ambiguous")
	var disp []string
	for _, r := range readTrail(t, path) {
		if r.Fields[grantretry.FieldRedelivers] == l.ID && r.Msg == grantretry.MsgDisposition {
			disp = append(disp, fmt.Sprint(r.Fields[grantretry.FieldAmbiguous]))
		}
	}
	if len(disp) != 1 || disp[0] != "true" {
		t.Errorf("the trail's dispositions of the redelivery say ambiguous %q, want one, true", disp)
	}

	// -all leaves it, which is no failure; named, it is refused.
	out, stderr, code := runCmd(t, "deadletter", "redeliver", dir, "-all", "-trail", path)
	if code != exitOK || f.count() != 1 {
		t.Fatalf("the next redeliver -all: exit %d, the funder has %d; want it left, nothing sent\n%s%s", code, f.count(), out, stderr)
	}
	wantAll(t, "the next run's stdout", out, "ambiguous: letter "+l.ID+" (submission "+l.SubmissionID+")", "-trust-key", "left, ambiguous: 1")
	_, stderr, code = runCmd(t, "deadletter", "redeliver", dir, l.ID, "-trail", path)
	if code != exitFailure || f.count() != 1 {
		t.Fatalf("the next redeliver of the letter named: exit %d, the funder has %d; want it refused, nothing sent\n%s", code, f.count(), stderr)
	}
	wantAll(t, "the next run's stderr", stderr, l.ID+" (submission "+l.SubmissionID+") not sent", "-trust-key")
}

func readTrail(t *testing.T, path string) []trail.Record {
	t.Helper()
	var recs []trail.Record
	if _, err := trail.Read([]string{path}, func(r trail.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// SIGINT mid-send stops the run after the letter in flight, which is let
// finish (here the funder drops its connection once the signal has come)
// and is recorded: its attempt is on the trail with the redelivery's
// disposition, the letter holds it and is ambiguous (the funder may have
// it), the letters not tried are named and left as they were, and the
// command exits non-zero.
func TestDeadLetterRedeliverInterruptedMidSendRecordsTheAttemptInFlight(t *testing.T) {
	f := newRecordingDropper(t, true)
	released := false
	defer func() {
		if !released {
			close(f.release)
		}
	}()
	a := dlLetter("L-a", f.URL+"/v1/applications", dlBody)
	b := dlLetter("L-b", f.URL+"/v1/applications", dlBody)
	b.Created = b.Created.Add(time.Second)
	dir := dlSeed(t, a, b)
	path := filepath.Join(t.TempDir(), "trail.jsonl")

	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := run([]string{"deadletter", "redeliver", dir, "-all", "-budget", "0", "-trail", path}, &stdout, &stderr)
		done <- result{stdout.String(), stderr.String(), code}
	}()
	select {
	case <-f.arrived: // L-a is on the wire: the command catches SIGINT by now
	case r := <-done:
		t.Fatalf("the command ended before sending: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The test's own catch of SIGINT tells it the signal has come; the
	// letter in flight ends only after that.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT)
	defer signal.Stop(caught)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-caught:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not come")
	}
	close(f.release)
	released = true
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not stop after SIGINT")
	}
	if r.code == exitOK {
		t.Fatalf("exit %d after SIGINT, want non-zero\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := f.count(); n != 1 {
		t.Errorf("the funder received %d requests, want L-a's only", n)
	}
	wantAll(t, "stdout", r.stdout, "not tried: letter L-b", "summary: 2 letters waiting, 2 selected, 1 sent\n",
		"  not delivered: 1 (", "  not tried: 1\n", "  stopped: interrupt (SIGINT); the letters not tried stay waiting\n")
	wantAll(t, "stderr", r.stderr, "L-a", "now ambiguous", "1 of them not tried")
	if got := letterOnDisk(t, dir, a.ID); !got.Ambiguous || got.Attempts != a.Attempts+1 {
		t.Errorf("L-a after the interrupted send: ambiguous %v, attempts %d; want ambiguous, %d", got.Ambiguous, got.Attempts, a.Attempts+1)
	}
	if got := letterOnDisk(t, dir, b.ID); got.Ambiguous || got.Attempts != b.Attempts {
		t.Errorf("L-b, never tried: ambiguous %v, attempts %d; want it as it was", got.Ambiguous, got.Attempts)
	}
	var msgs []string
	for _, rec := range readTrail(t, path) {
		if rec.Fields[grantretry.FieldRedelivers] == a.ID {
			msgs = append(msgs, rec.Msg)
		}
	}
	if len(msgs) < 2 || msgs[0] != grantretry.MsgAttempt || msgs[len(msgs)-1] != grantretry.MsgDisposition {
		t.Errorf("the trail's lines of L-a's redelivery: %q; want its attempt, then its disposition", msgs)
	}
}
