package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// instant is a grantretry.Clock whose waits return at once, so the tests
// sleep neither the backoff nor the funder's Retry-After.
type instant struct{}

func (instant) Now() time.Time                                   { return time.Now() }
func (instant) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// simulateForTest runs the demo against its own funder, keeping its records
// in a new directory, and returns what it produced and the audit lines.
func simulateForTest(t *testing.T) (simulation, *records, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var lines bytes.Buffer
	recs, err := openRecords(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recs.trail.Close() })
	sim, err := simulate(ctx, &lines, recs, grantretry.WithClock(instant{}))
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	if len(sim.results) != len(applications) {
		t.Fatalf("got %d results, want %d", len(sim.results), len(applications))
	}
	return sim, recs, lines.Bytes()
}

func TestFunderRecordsEachSubmissionExactlyOnce(t *testing.T) {
	t.Parallel()
	sim, _, _ := simulateForTest(t)
	results, f := sim.results, sim.funder

	recorded, dups := f.duplicates()
	if dups != 0 {
		t.Errorf("funder recorded %d duplicates, want 0", dups)
	}
	wantRecorded := 0
	for _, r := range results {
		ids := f.records[r.app.ID]
		rd, hadLetter := sim.redeliveryOf(r.app.ID)
		switch {
		case r.outcome.Disposition == grantretry.Succeeded:
			wantRecorded++
			if len(ids) != 1 || ids[0] != r.record {
				t.Errorf("%s: funder records %v, pipeline got record %q; want exactly that one", r.app.ID, ids, r.record)
			}
		case hadLetter && rd.outcome.Disposition == grantretry.Succeeded:
			wantRecorded++
			if len(ids) != 1 {
				t.Errorf("%s: redelivered, and the funder recorded %v; want one record", r.app.ID, ids)
			}
		case len(ids) != 0:
			t.Errorf("%s ended %s but the funder recorded %v", r.app.ID, r.outcome.Disposition, ids)
		}
	}
	if recorded != wantRecorded {
		t.Errorf("funder recorded %d submissions, want %d", recorded, wantRecorded)
	}
}

func TestDispositions(t *testing.T) {
	t.Parallel()
	sim, _, _ := simulateForTest(t)
	results := sim.results
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
	sim, _, _ := simulateForTest(t)
	results, f := sim.results, sim.funder
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
	sim, _, _ := simulateForTest(t)
	results, f := sim.results, sim.funder
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
		want := r.outcome.Attempts
		if rd, ok := sim.redeliveryOf(r.app.ID); ok {
			want += rd.outcome.Attempts // the same key again
		}
		e := f.keys[r.outcome.IdempotencyKey]
		if e == nil || e.requests != want {
			t.Errorf("%s: funder ledger %+v, want %d requests", r.app.ID, e, want)
		}
	}
}

func TestAuditTrail(t *testing.T) {
	t.Parallel()
	sim, _, lines := simulateForTest(t)
	results := sim.results
	msgs := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(lines))
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
	attempts, reconciles := 0, 0
	for _, rd := range sim.redelivered {
		attempts += rd.outcome.Attempts
	}
	simplerReconciles := 0
	for _, c := range sim.simpler.Calls {
		attempts += c.Outcome.Attempts
		simplerReconciles += c.Outcome.Reconciles
	}
	for _, r := range slices.Concat(results, sim.s2sResults) {
		attempts += r.outcome.Attempts
		reconciles += r.outcome.Reconciles
		// Bodies are never logged: no title may reach the trail.
		if bytes.Contains(lines, []byte(r.app.Title)) {
			t.Errorf("the audit trail contains the body of %s", r.app.ID)
		}
	}
	if msgs[grantretry.MsgAttempt] != attempts {
		t.Errorf("%d attempt lines, want %d", msgs[grantretry.MsgAttempt], attempts)
	}
	if msgs[grantretry.MsgReconcile] != reconciles+simplerReconciles || reconciles != 1 || simplerReconciles != 3 {
		t.Errorf("%d reconcile lines, %d+%d questions asked; want 1 to S2S and 3 to Simpler Grants.gov", msgs[grantretry.MsgReconcile], reconciles, simplerReconciles)
	}
	if want := len(results) + len(sim.s2sResults) + len(sim.redelivered) + len(sim.simpler.Calls); msgs[grantretry.MsgDisposition] != want {
		t.Errorf("%d disposition lines, want %d", msgs[grantretry.MsgDisposition], want)
	}
	if msgs[grantretry.MsgBreaker] != 0 {
		t.Errorf("%d breaker lines, want 0: the breaker should stay closed", msgs[grantretry.MsgBreaker])
	}
}

func TestRunSucceeds(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := Run(&out, t.TempDir(), grantretry.WithClock(instant{})); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^` + s2sDropped + ` +succeeded +reconciled +1 +200 +GRANT\d+ \(found by query\)$`),
		regexp.MustCompile(`(?m)^== what Grants.gov S2S recorded .*==$`),
		regexp.MustCompile(`(?m)^funder recorded 5 submissions, 0 duplicates$`),
		regexp.MustCompile(`(?m)^S2S funder received 3 submission requests, refused 1 .*\n.*applications: 2, duplicates: 0$`),
		regexp.MustCompile(`(?m)^Simpler Grants.gov holds 7 applications, each started once and submitted once; no call failed\.$`),
		regexp.MustCompile(`hash chain verified, .*\ndispositions: .*; reconcile lines 4\n`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("output has no line matching %s:\n%s", want, out.String())
		}
	}
}

// The demo leads with what a person reads: no JSON before the stories,
// each submission told with its attempts and why it ended so, and no line
// wider than 100 columns but the commands that name the directory. The
// zap lines are shown only when asked for, one per record of the trail.
func TestRunTellsEachSubmission(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out strings.Builder
	if err := Run(&out, dir, grantretry.WithClock(instant{})); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	head, _, ok := strings.Cut(text, "== each submission: what happened, and why ==")
	if !ok || strings.Contains(text, `{"`) || !strings.Contains(head, filepath.Join(dir, trailName)) {
		t.Errorf("the output has JSON, or no stories, or does not lead with the trail's path:\n%s", text)
	}
	for _, app := range slices.Concat(applications, s2sApplications) {
		if !regexp.MustCompile(`(?m)^` + app.ID + ` to .*: [a-z_]+ after \d attempts?`).MatchString(text) {
			t.Errorf("no story of %s:\n%s", app.ID, text)
		}
	}
	for _, id := range simplerIDs {
		if !regexp.MustCompile(`(?m)^` + id + ` to Simpler Grants.gov: .*\n(  .*\n)*  start: [a-z_]+ after \d attempts?\n(  .*\n)*  submit: `).MatchString(text) {
			t.Errorf("no story of %s:\n%s", id, text)
		}
	}
	for _, want := range []string{
		"waited 1s as the funder's Retry-After asked",
		"answered it from its idempotency store",
		"refused another retry",
		"redelivered once the funder was back, under the same key: succeeded, status 201",
		"asked the reconciler: 200, applied",
		"the answer, 422 (terminal:422), is terminal",
		"which found one named after the submission id: no second start",
		"the application's record, which says submitted: no second submit",
		"the API is in maintenance until 2026-12-04T18:30:31Z",
	} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) { // across a wrapped line
			t.Errorf("the stories lack %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > 100 && !strings.Contains(line, dir) {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}

	var lines bytes.Buffer
	out.Reset()
	if err := RunWith(&out, t.TempDir(), Options{Lines: &lines}, grantretry.WithClock(instant{})); err != nil {
		t.Fatalf("run -v: %v\n%s", err, out.String())
	}
	dispositions := 0
	sc := bufio.NewScanner(&lines)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("-v: a line that is not JSON: %v: %s", err, sc.Bytes())
		}
		if line["msg"] == grantretry.MsgDisposition {
			dispositions++
		}
	}
	if want := len(applications) + len(s2sApplications) + 1 + 16; dispositions != want { // the redelivery, and 16 calls to Simpler Grants.gov
		t.Errorf("-v printed %d disposition lines, want %d", dispositions, want)
	}
}

// The S2S funder ignores Idempotency-Key and recorded s2sDropped before
// hanging up: the pipeline asked GetApplicationList instead of sending it
// again, and the call succeeded with the tracking number the funder holds.
// s2sRefused met a schema-validation fault and was tried once. Every
// other submission is recorded once, and every request the funder
// received is an attempt an Outcome counts.
func TestS2SDroppedSubmissionIsReconciledNotResent(t *testing.T) {
	t.Parallel()
	sim, _, _ := simulateForTest(t)
	f := sim.s2s
	attempts := 0
	for _, r := range sim.s2sResults {
		o := r.outcome
		attempts += o.Attempts
		recorded := f.TrackingNumbers(r.app.ID)
		if r.app.ID == s2sRefused {
			if len(recorded) != 0 || o.Disposition != grantretry.FailedTerminal || o.Attempts != 1 || o.Reconciles != 0 ||
				o.Status != 500 || o.Reason != "terminal:500;grantsgov:validation" {
				t.Errorf("%s: %s/%s after %d attempts and %d reconciles, status %d, reason %q, recorded %v; want failed_terminal after 1 attempt, terminal:500;grantsgov:validation, nothing recorded",
					r.app.ID, o.Disposition, o.StopReason, o.Attempts, o.Reconciles, o.Status, o.Reason, recorded)
			}
			continue
		}
		if len(recorded) != 1 || r.record != recorded[0] {
			t.Errorf("%s: the funder recorded %v, the pipeline got %q; want exactly that one", r.app.ID, recorded, r.record)
		}
		wantStop, wantReconciles := grantretry.StopSuccess, 0
		if r.app.ID == s2sDropped {
			wantStop, wantReconciles = grantretry.StopReconciled, 1
		}
		if o.Disposition != grantretry.Succeeded || o.StopReason != wantStop || o.Attempts != 1 || o.Reconciles != wantReconciles || o.Status != 200 {
			t.Errorf("%s: %s/%s after %d attempts and %d reconciles, status %d; want succeeded/%s after 1 and %d, status 200",
				r.app.ID, o.Disposition, o.StopReason, o.Attempts, o.Reconciles, o.Status, wantStop, wantReconciles)
		}
	}
	if f.Received() != attempts || f.Refused() != 1 || f.Dropped() != 1 || f.Queries() != 1 || f.Duplicates() != 0 {
		t.Errorf("S2S funder: received %d (attempts %d), refused %d, dropped %d, queries %d, duplicates %d; want received = attempts, 1, 1, 1, 0",
			f.Received(), attempts, f.Refused(), f.Dropped(), f.Queries(), f.Duplicates())
	}
}

func TestS2SReportFailsOnDuplicate(t *testing.T) {
	s, err := startS2S()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	// The same application twice through a client with no reconciler: a
	// funder that ignores the key records it twice.
	client := &http.Client{Transport: grantretry.New(s.inner)}
	defer client.CloseIdleConnections()
	app := s2sApplications[2] // one the funder accepts
	for range 2 {
		if r, err := submitS2S(context.Background(), client, s.URL(), app); err != nil || r.record == "" {
			t.Fatalf("submit: %+v, %v", r, err)
		}
	}
	if err := s.report(io.Discard); err == nil {
		t.Fatal("report returned nil with a duplicate recorded")
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

// The outage's call is kept as a dead letter and, once the funder is back,
// redelivered under the same key: applied once, the letter moved aside.
// The trail on disk holds every line the logger saw, and its chain
// verifies.
func TestDeadLetterRedeliveredAndTrailVerified(t *testing.T) {
	t.Parallel()
	sim, recs, lines := simulateForTest(t)
	if len(sim.redelivered) != 1 {
		t.Fatalf("%d letters redelivered, want 1 (GRANT-2026-0006)", len(sim.redelivered))
	}
	rd := sim.redelivered[0]
	l := rd.letter
	if l.SubmissionID != "GRANT-2026-0006" || rd.err != nil || rd.outcome.Disposition != grantretry.Succeeded ||
		rd.outcome.IdempotencyKey != l.IdempotencyKey || rd.outcome.CorrelationID != l.CorrelationID {
		t.Errorf("redelivery %+v of letter %s: want GRANT-2026-0006 succeeded under the letter's key and correlation id", rd, l.ID)
	}
	if left, err := recs.letters.List(); err != nil || len(left) != 0 {
		t.Errorf("letters still owed after redelivery: %d (%v), want 0", len(left), err)
	}
	if _, mark, err := recs.letters.Redelivered(l.ID); err != nil || mark.Status != 201 {
		t.Errorf("letter %s not marked redelivered: %+v, %v", l.ID, mark, err)
	}

	if err := recs.trail.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := recs.trailFiles()
	if err != nil {
		t.Fatal(err)
	}
	sum, err := trail.Verify(files...)
	if err != nil {
		t.Fatal(err)
	}
	logged := bytes.Count(lines, []byte("\n"))
	if got := sum.Messages[grantretry.MsgAttempt] + sum.Messages[grantretry.MsgDisposition] + sum.Messages[grantretry.MsgBreaker] + sum.Messages[grantretry.MsgReconcile]; got != logged {
		t.Errorf("trail holds %d audit records, the logger wrote %d lines", got, logged)
	}
	// Simpler Grants.gov: 7 starts and 7 submits succeed, 2 of them
	// after a call owed for maintenance and for the quota, which wrote no
	// letter; 3 of them reconciled.
	if sum.Dispositions[string(grantretry.DeadLetter)] != 3 || sum.Dispositions[string(grantretry.Succeeded)] != 21 ||
		sum.Dispositions[string(grantretry.FailedTerminal)] != 2 {
		t.Errorf("trail dispositions %v, want 3 dead_letter (one to the JSON funder, two owed by Simpler Grants.gov), "+
			"21 succeeded (5 to the JSON funder, 2 to S2S, 14 to Simpler Grants.gov) and 2 failed_terminal", sum.Dispositions)
	}
	if sum.Messages[grantretry.MsgReconcile] != 4 {
		t.Errorf("trail holds %d reconcile records, want 4 (%s, and three calls to Simpler Grants.gov)", sum.Messages[grantretry.MsgReconcile], s2sDropped)
	}
}

// A run without a directory to keep its records in leaves nothing in the
// system's temporary directory, and says how to keep them.
func TestRunLeavesNoTemporaryDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out strings.Builder
	if err := Run(&out, "", grantretry.WithClock(instant{})); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("the run left %d entries in the temporary directory (%v): %v", len(left), err, left)
	}
	if !strings.Contains(out.String(), "removed as the demo ends") || !strings.Contains(out.String(), "-keep DIR") {
		t.Errorf("the output does not say the records were removed and how to keep them:\n%s", out.String())
	}
}

// A directory given to keep the records in keeps them, and is told; one
// that already holds something is refused before anything is sent, since
// a trail there would go on from an earlier run's.
func TestRunKeepsItsRecordsOnlyInANewOrEmptyDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kept")
	var out strings.Builder
	if err := Run(&out, dir, grantretry.WithClock(instant{})); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if _, err := trail.Verify(filepath.Join(dir, trailName)); err != nil {
		t.Errorf("the kept trail: %v", err)
	}
	if !strings.Contains(out.String(), "The trail and the dead letters are kept in "+dir) {
		t.Errorf("the output does not say where the records are kept:\n%s", out.String())
	}
	out.Reset()
	if err := Run(&out, dir, grantretry.WithClock(instant{})); err == nil || out.Len() != 0 {
		t.Errorf("a second run into the same directory: %v, output %q; want it refused before it starts", err, out.String())
	}
}

// The third funder's ledger agrees with its pipeline: each application
// started once and submitted once, through dropped connections, the
// gateway's throttle, timeout and quota, and maintenance; and the demo
// fails when it does not.
func TestSimplerGrantsStartsAndSubmitsEachApplicationOnce(t *testing.T) {
	t.Parallel()
	sim, _, _ := simulateForTest(t)
	r := sim.simpler
	if p := r.Problems(); len(p) > 0 {
		t.Errorf("problems: %v", p)
	}
	l := r.Ledger
	if l.Started != len(simplerIDs) || len(l.Submitted) != len(simplerIDs) || l.Dropped != 2 || l.Throttled == 0 ||
		l.OverQuota != 1 || l.TimedOut != 1 || l.InMaint != 1 {
		t.Errorf("ledger %+v: want %d started and submitted, 2 dropped, throttled, 1 over quota, 1 timed out, 1 in maintenance", l, len(simplerIDs))
	}
	stops := map[string]int{}
	for _, c := range r.Calls {
		stops[c.Outcome.StopReason]++
	}
	if stops[grantretry.StopReconciled] != 3 || stops[grantretry.StopOwedLater] != 2 || stops[grantretry.StopSuccess] != 11 {
		t.Errorf("stop reasons %v: want 3 reconciled, 2 owed_later, 11 success", stops)
	}

	r.Recorded = append(r.Recorded, r.Recorded[0]) // an application started twice
	if err := reportSimpler(io.Discard, r); err == nil {
		t.Error("a duplicate in the ledger: reportSimpler answered no error")
	}
}
