package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/foundationportal/portal"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain checks that the demo leaves no goroutine behind: its server,
// connections and grantretry's timers all end with run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// instant is a grantretry.Clock whose waits return at once, so the tests
// sleep neither the backoff nor the portal's Retry-After. It records the
// waits it was asked for.
type instant struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (*instant) Now() time.Time { return time.Now() }

func (c *instant) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return ctx.Err()
}

// simRun is one simulation: its results, portal, audit lines and clock.
type simRun struct {
	results []result
	portal  *fakePortal
	logs    *observer.ObservedLogs
	clock   *instant
}

func simulateForTest(t *testing.T) simRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	core, logs := observer.New(zapcore.InfoLevel)
	clk := &instant{}
	results, p, err := simulate(ctx, zap.New(core), grantretry.WithClock(clk))
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	if len(results) != len(applications) {
		t.Fatalf("got %d results, want %d", len(results), len(applications))
	}
	return simRun{results, p, logs, clk}
}

func (s simRun) result(t *testing.T, id string) result {
	t.Helper()
	for _, r := range s.results {
		if r.app.ExternalID == id {
			return r
		}
	}
	t.Fatalf("no result for %s", id)
	return result{}
}

func TestPortalRecordsEachApplicationOnce(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	recorded, dups := s.portal.duplicates()
	if dups != 0 {
		t.Errorf("portal recorded %d duplicates, want 0", dups)
	}
	// FP-2026-0005 was invalid and FP-2026-0006 never got through.
	if want := len(applications) - 2; recorded != want {
		t.Errorf("portal recorded %d applications, want %d", recorded, want)
	}
	for _, r := range s.results {
		ids := s.portal.records[r.app.ExternalID]
		if r.receipt != nil && (len(ids) != 1 || ids[0] != r.receipt.ApplicationID) {
			t.Errorf("%s: portal records %v, SDK returned receipt %s; want exactly that one",
				r.app.ExternalID, ids, r.receipt.ApplicationID)
		}
	}
}

// returned is what the SDK handed back, by kind.
type returned int

const (
	gotReceipt  returned = iota + 1 // a *Receipt, nil error
	gotAPIError                     // an error holding *portal.APIError
	gotNoAnswer                     // an error holding *grantretry.Error
)

func kindOf(r result) returned {
	switch {
	case r.err == nil && r.receipt != nil:
		return gotReceipt
	case r.apiErr != nil && r.grErr == nil:
		return gotAPIError
	case r.grErr != nil && r.apiErr == nil:
		return gotNoAnswer
	}
	return 0
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	want := map[string]struct {
		sdk      returned
		status   int // the APIError's status, for gotAPIError
		disp     grantretry.Disposition
		stop     string
		attempts int
		next     action
	}{
		"FP-2026-0001": {gotReceipt, 0, grantretry.Succeeded, grantretry.StopSuccess, 1, done},
		"FP-2026-0002": {gotReceipt, 0, grantretry.Succeeded, grantretry.StopSuccess, 3, done},
		"FP-2026-0003": {gotReceipt, 0, grantretry.Succeeded, grantretry.StopSuccess, 2, done},
		"FP-2026-0004": {gotReceipt, 0, grantretry.Succeeded, grantretry.StopSuccess, 2, done},
		"FP-2026-0005": {gotAPIError, 422, grantretry.FailedTerminal, grantretry.StopTerminal, 1, rejected},
		// The faults before took 4 of the host's 10 retry-throttle
		// tokens and gave 0.3 back: the outage's second 503 leaves 4.3,
		// at or below half, so no more retries to the portal.
		"FP-2026-0006": {gotAPIError, 503, grantretry.DeadLetter, grantretry.StopThrottled, 2, owed},
		"FP-2026-0007": {gotNoAnswer, 0, grantretry.DeadLetter, grantretry.StopThrottled, 1, done},
	}
	for _, r := range s.results {
		w, o := want[r.app.ExternalID], r.outcome
		if got := kindOf(r); got != w.sdk {
			t.Errorf("%s: SDK returned kind %d (err %v), want %d", r.app.ExternalID, got, r.err, w.sdk)
		}
		if w.sdk == gotAPIError && r.apiErr != nil && r.apiErr.StatusCode != w.status {
			t.Errorf("%s: APIError status %d, want %d", r.app.ExternalID, r.apiErr.StatusCode, w.status)
		}
		if !r.recorded || o.Disposition != w.disp || o.StopReason != w.stop || o.Attempts != w.attempts {
			t.Errorf("%s: recorder saw %v: %s/%s after %d attempts; want %s/%s after %d",
				r.app.ExternalID, r.recorded, o.Disposition, o.StopReason, o.Attempts, w.disp, w.stop, w.attempts)
		}
		if r.next != w.next {
			t.Errorf("%s: next step %d (%s), want %d", r.app.ExternalID, r.next, r.nextText, w.next)
		}
	}
}

// A call that obtained no response comes back through the SDK's %w with
// the *grantretry.Error inside, whole.
func TestSDKErrorHoldsGrantretryErrorWhenNoResponse(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	r := s.result(t, "FP-2026-0007")
	var gerr *grantretry.Error
	if !errors.As(r.err, &gerr) {
		t.Fatalf("errors.As(%v, *grantretry.Error) = false", r.err)
	}
	if !errors.Is(r.err, grantretry.ErrDeadLetter) {
		t.Errorf("errors.Is(err, ErrDeadLetter) = false for %v", r.err)
	}
	if gerr.Outcome != r.outcome {
		t.Errorf("the error's Outcome %+v differs from the recorder's %+v", gerr.Outcome, r.outcome)
	}
}

// A call that ended with a response, even a dead-lettered 503, comes back
// from the SDK as its own *APIError: the SDK consumed the response, so the
// error says nothing of grantretry, and only the recorder (or the audit
// trail) knows the call was dead-lettered.
func TestSDKErrorHidesOutcomeWhenResponded(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	r := s.result(t, "FP-2026-0006")
	var gerr *grantretry.Error
	if errors.As(r.err, &gerr) || errors.Is(r.err, grantretry.ErrDeadLetter) {
		t.Errorf("the SDK's error %v carries grantretry's, want only the portal's answer", r.err)
	}
	var apiErr *portal.APIError
	if !errors.As(r.err, &apiErr) || apiErr.StatusCode != 503 || apiErr.RequestID == "" {
		t.Errorf("the SDK's error %v: want an *APIError 503 with a request id", r.err)
	}
	if r.outcome.Disposition != grantretry.DeadLetter {
		t.Errorf("recorder: %s, want dead_letter", r.outcome.Disposition)
	}
}

// Every request the portal saw for a submission is an attempt grantretry
// counted, under one key derived from the submission id and the body the
// SDK built.
func TestKeysAndAttemptsMatchThePortal(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	if len(s.portal.keys) != len(s.results) {
		t.Errorf("portal saw %d keys, want one per application (%d)", len(s.portal.keys), len(s.results))
	}
	for _, r := range s.results {
		body, err := json.Marshal(r.app)
		if err != nil {
			t.Fatal(err)
		}
		if want := grantretry.IdempotencyKey(r.app.ExternalID, body); r.outcome.IdempotencyKey != want {
			t.Errorf("%s: key %q, want %q", r.app.ExternalID, r.outcome.IdempotencyKey, want)
		}
		e := s.portal.keys[r.outcome.IdempotencyKey]
		if e == nil || e.requests != r.outcome.Attempts {
			t.Errorf("%s: portal ledger %+v, want %d requests", r.app.ExternalID, e, r.outcome.Attempts)
		}
	}
}

// The dropped answer is what idempotency keys are for: the portal recorded
// the application, the pipeline never heard, and the retry is recognised.
func TestDroppedAnswerIsReplayedNotReapplied(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	r := s.result(t, "FP-2026-0004")
	e := s.portal.keys[r.outcome.IdempotencyKey]
	if e == nil || e.requests != 2 || e.applied != 1 {
		t.Errorf("portal ledger for the key: %+v, want 2 requests applied once", e)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	s.clock.mu.Lock()
	defer s.clock.mu.Unlock()
	for _, d := range s.clock.waits {
		if d == time.Second {
			return
		}
	}
	t.Errorf("waits %v: none is the portal's Retry-After of 1s", s.clock.waits)
}

func TestAPIKeyNeverInAuditTrail(t *testing.T) {
	t.Parallel()
	s := simulateForTest(t)
	if s.portal.badKeys != 0 || s.portal.nextReq == 0 {
		t.Fatalf("portal: %d requests, %d with a bad key; want the key sent on every one", s.portal.nextReq, s.portal.badKeys)
	}
	entries := s.logs.AllUntimed()
	if len(entries) == 0 {
		t.Fatal("no audit lines")
	}
	for _, e := range entries {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, demoAPIKey) {
			t.Errorf("audit line holds the API key: %s", line)
		}
	}
}

func TestRunSucceeds(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(&out, grantretry.WithClock(&instant{})); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), demoAPIKey) {
		t.Error("the demo's output holds the API key")
	}
}

func TestReportFailsOnDuplicate(t *testing.T) {
	t.Parallel()
	p := newFakePortal(demoAPIKey, nil)
	app := applications[0]
	// Two keys for one application: what a retry with a fresh key does.
	p.handle(app, "grant-first", [32]byte{1})
	p.handle(app, "grant-second", [32]byte{1})
	if err := p.report(io.Discard); err == nil {
		t.Fatal("report returned nil with a duplicate recorded")
	}
}

// "No change to the SDK" is the point of the example: the SDK must not
// know grantretry exists.
func TestSDKDoesNotImportGrantretry(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("portal", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no SDK files: %v", err)
	}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/grantretry/grantretry") &&
				!strings.HasPrefix(path, "github.com/grantretry/grantretry/examples/foundationportal/portal") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
