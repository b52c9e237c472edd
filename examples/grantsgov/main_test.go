package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// instant is a grantretry.Clock whose waits return at once, so the tests
// sleep neither the backoff nor the funder's Retry-After.
type instant struct{}

func (instant) Now() time.Time                                   { return time.Now() }
func (instant) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// simulateForTest runs the demo against its own funder and returns what the
// pipeline saw, the funder, and the audit trail.
func simulateForTest(t *testing.T) ([]result, *funder, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var trail bytes.Buffer
	results, f, err := simulate(ctx, &trail, grantretry.WithClock(instant{}))
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	if len(results) != len(applications) {
		t.Fatalf("got %d results, want %d", len(results), len(applications))
	}
	return results, f, trail.Bytes()
}

func TestFunderRecordsEachSubmissionExactlyOnce(t *testing.T) {
	t.Parallel()
	results, f, _ := simulateForTest(t)

	recorded, dups := f.duplicates()
	if dups != 0 {
		t.Errorf("funder recorded %d duplicates, want 0", dups)
	}
	wantRecorded := 0
	for _, r := range results {
		ids := f.records[r.app.ID]
		if r.outcome.Disposition == grantretry.Succeeded {
			wantRecorded++
			if len(ids) != 1 || ids[0] != r.record {
				t.Errorf("%s: funder records %v, pipeline got record %q; want exactly that one", r.app.ID, ids, r.record)
			}
		} else if len(ids) != 0 {
			t.Errorf("%s ended %s but the funder recorded %v", r.app.ID, r.outcome.Disposition, ids)
		}
	}
	if recorded != wantRecorded {
		t.Errorf("funder recorded %d submissions, want %d", recorded, wantRecorded)
	}
}

func TestDispositions(t *testing.T) {
	t.Parallel()
	results, _, _ := simulateForTest(t)
	want := map[string]struct {
		disp     grantretry.Disposition
		stop     string
		attempts int
		status   int
	}{
		"GRANT-2026-0001": {grantretry.Succeeded, grantretry.StopSuccess, 1, 201},
		"GRANT-2026-0002": {grantretry.Succeeded, grantretry.StopSuccess, 3, 201},
		"GRANT-2026-0003": {grantretry.Succeeded, grantretry.StopSuccess, 2, 201},
		"GRANT-2026-0004": {grantretry.Succeeded, grantretry.StopSuccess, 2, 201},
		"GRANT-2026-0005": {grantretry.FailedTerminal, grantretry.StopTerminal, 1, 422},
		// The earlier faults took 4 of the host's 10 retry-throttle tokens
		// and 4 successes gave 0.4 back: two more failures bring it to
		// 4.4, at or below half, so the outage's second retry is refused.
		"GRANT-2026-0006": {grantretry.DeadLetter, grantretry.StopThrottled, 2, 503},
	}
	for _, r := range results {
		w, o := want[r.app.ID], r.outcome
		if o.Disposition != w.disp || o.StopReason != w.stop || o.Attempts != w.attempts || o.Status != w.status {
			t.Errorf("%s: got %s/%s after %d attempts, status %d; want %s/%s after %d, status %d",
				r.app.ID, o.Disposition, o.StopReason, o.Attempts, o.Status, w.disp, w.stop, w.attempts, w.status)
		}
		if r.err != nil {
			t.Errorf("%s: err = %v, want a response", r.app.ID, r.err)
		}
	}
}

// The dropped connection is the case idempotency keys exist for: the funder
// recorded the submission, the pipeline never heard, and the retry must be
// recognised as the same submission.
func TestDroppedConnectionIsReplayedNotReapplied(t *testing.T) {
	t.Parallel()
	results, f, _ := simulateForTest(t)
	r := results[3]
	if r.app.ID != "GRANT-2026-0004" {
		t.Fatalf("results[3] is %s, want GRANT-2026-0004", r.app.ID)
	}
	if !r.replayed {
		t.Errorf("the retry after the dropped connection was not answered from the funder's idempotency store")
	}
	e := f.keys[r.outcome.IdempotencyKey]
	if e == nil || e.requests != 2 || e.applied != 1 {
		t.Errorf("funder ledger for the key: %+v, want 2 requests applied once", e)
	}
}

// Every request the funder saw is an attempt grantretry counted, under one
// key per submission, derived from the submission id and the body.
func TestKeysAndAttemptsMatchTheFunder(t *testing.T) {
	t.Parallel()
	results, f, _ := simulateForTest(t)
	if len(f.keys) != len(results) {
		t.Errorf("funder saw %d keys, want one per submission (%d)", len(f.keys), len(results))
	}
	for _, r := range results {
		payload, err := json.Marshal(r.app)
		if err != nil {
			t.Fatal(err)
		}
		if want := grantretry.IdempotencyKey(r.app.ID, payload); r.outcome.IdempotencyKey != want {
			t.Errorf("%s: key %q, want %q", r.app.ID, r.outcome.IdempotencyKey, want)
		}
		e := f.keys[r.outcome.IdempotencyKey]
		if e == nil || e.requests != r.outcome.Attempts {
			t.Errorf("%s: funder ledger %+v, want %d requests", r.app.ID, e, r.outcome.Attempts)
		}
	}
}

func TestAuditTrail(t *testing.T) {
	t.Parallel()
	results, _, trail := simulateForTest(t)
	msgs := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(trail))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("audit line is not JSON: %v: %s", err, sc.Bytes())
		}
		msg, _ := line["msg"].(string)
		msgs[msg]++
		if id, _ := line[grantretry.FieldSubmissionID].(string); id == "" {
			t.Errorf("audit line without a submission id: %s", sc.Bytes())
		}
	}
	attempts := 0
	for _, r := range results {
		attempts += r.outcome.Attempts
		// Bodies are never logged: no title may reach the trail.
		if bytes.Contains(trail, []byte(r.app.Title)) {
			t.Errorf("the audit trail contains the body of %s", r.app.ID)
		}
	}
	if msgs[grantretry.MsgAttempt] != attempts {
		t.Errorf("%d attempt lines, want %d", msgs[grantretry.MsgAttempt], attempts)
	}
	if msgs[grantretry.MsgDisposition] != len(results) {
		t.Errorf("%d disposition lines, want %d", msgs[grantretry.MsgDisposition], len(results))
	}
	if msgs[grantretry.MsgBreaker] != 0 {
		t.Errorf("%d breaker lines, want 0: the breaker should stay closed", msgs[grantretry.MsgBreaker])
	}
}

func TestRunSucceeds(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(&out, grantretry.WithClock(instant{})); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
}

func TestReportFailsOnDuplicate(t *testing.T) {
	f := newFunder(nil)
	app := application{ID: "GRANT-2026-0001", Title: "t", Amount: 1}
	// Two different keys for one application: what a retry with a fresh
	// key would do.
	f.handle(app, "grant-first")
	f.handle(app, "grant-second")
	if err := f.report(io.Discard); err == nil {
		t.Fatal("report returned nil with a duplicate recorded")
	}
}
