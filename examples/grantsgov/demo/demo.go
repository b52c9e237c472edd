// Package demo is the Grants.gov demo that "go run ./examples/grantsgov"
// runs, as a package so that other programs can run it with options of
// their own (oteltest/cmd/grantsgovmetrics adds OpenTelemetry metrics). It
// submits six grant applications through grantretry to a
// simulated funder that fails the way real ones do (503s, a 429 with
// Retry-After, a connection dropped after the submission was recorded, a
// validation failure, an outage). The call the outage defeats is kept as a
// dead letter and redelivered, under the same Idempotency-Key, once the
// funder is back. The demo then shows from the funder's own ledger that no
// submission was recorded twice, and verifies the hash chain of the audit
// trail it wrote to disk.
//
// Three more go over mutual TLS to a second funder, a Grants.gov S2S SOAP
// endpoint that ignores Idempotency-Key, under grantsgov.Profile for its
// host. It refuses the first with a schema-validation fault, which ends
// the call after one attempt without touching the breaker; it records the
// second before hanging up, and the pipeline, asking GetApplicationList by
// the submission's title before sending it again, learns it was recorded
// and succeeds without a resend; it accepts the third. Its ledger shows no
// duplicate either.
//
// Seven more go to a third funder, a fake of the Simpler Grants.gov REST
// API behind its AWS gateway, whose start creates a new application on
// every call: a pipeline (examples/simplergrants/pipeline) starts and
// submits each through simplergrants.Profile while the API drops
// connections after carrying a request out, the gateway throttles, times
// out at 29 s and runs out of the month's quota, and the API goes into
// maintenance. Its ledger shows each application started once and
// submitted once, and no call reported failed that it received. That
// pipeline runs on a simulated clock of its own, so those waits take no
// time.
//
// Everything runs in process against a loopback server and needs no
// network. Backoffs are kept to milliseconds; the one long wait is the
// funder's Retry-After of one second.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/simplergrants/pipeline"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Run runs the whole demo, writing to w what a person reads: each
// submission, what happened to it and why; the redelivery of the dead
// letter; the funders' ledgers; and the check of the audit trail kept in
// dir. The audit records go to that trail, whose path it prints; the zap
// audit lines are not shown (RunWith can show them). It fails if a funder
// recorded any submission twice or the trail does not verify. extra
// options go to the Transport after the demo's own (the tests pass a clock
// that skips the waits).
//
// dir is where the trail and the dead letters are kept for the reader,
// who is told how to look at them: a new or empty directory (created if
// missing), since a trail there would go on from an earlier run's. With
// dir "" they go to a new temporary directory, removed before Run
// returns, and the reader is told how to keep them.
func Run(w io.Writer, dir string, extra ...grantretry.Option) error {
	return RunWith(w, dir, Options{}, extra...)
}

// Options change what Run shows.
type Options struct {
	// Lines, if not nil, gets every zap audit line as it is written
	// ("go run ./examples/grantsgov -v" passes standard output).
	Lines io.Writer
}

// RunWith is Run with options.
func RunWith(w io.Writer, dir string, o Options, extra ...grantretry.Option) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	temporary := dir == ""
	if temporary {
		if dir, err = os.MkdirTemp("", "grantretry-grantsgov-"); err != nil {
			return err
		}
		defer func() {
			if rerr := os.RemoveAll(dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing the temporary directory: %w", rerr))
			}
		}()
	} else if err := newOrEmptyDir(dir); err != nil {
		return err
	}
	recs, err := openRecords(dir)
	if err != nil {
		return err
	}
	defer recs.trail.Close() // closed already once the trail is verified
	recs.temporary = temporary

	fmt.Fprintf(w, "The grantretry demo: %d grant applications through grantretry, to three funders simulated\n"+
		"on 127.0.0.1: a JSON API that fails the way real ones do, a Grants.gov S2S endpoint that\n"+
		"ignores Idempotency-Key, and the Simpler Grants.gov API, whose start makes a new application\n"+
		"on every call.\n", len(applications)+len(s2sApplications)+len(simplerIDs))
	fmt.Fprintf(w, "Audit records (hash-chained): %s\n", filepath.Join(dir, trailName))
	if temporary {
		fmt.Fprintln(w, "(a temporary directory, removed when the demo ends; -keep DIR keeps the records in DIR)")
	}
	if o.Lines == nil {
		fmt.Fprintln(w, "(go run ./examples/grantsgov -v also prints each zap audit line as it is written)")
	}
	var lines bytes.Buffer
	dest := io.Writer(&lines)
	if o.Lines != nil {
		fmt.Fprintln(w, "\n== audit lines (zap JSON), as they are written ==")
		dest = io.MultiWriter(&lines, o.Lines)
	}
	out, err := simulate(ctx, dest, recs, extra...)
	if err != nil {
		return err
	}
	calls, err := parseAuditLines(lines.Bytes())
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== each submission: what happened, and why ==")
	fmt.Fprintln(w)
	printStories(w, out, calls)
	printSimplerStories(w, out.simpler, calls)
	fmt.Fprintln(w, "== in short ==")
	printSummary(w, slices.Concat(out.results, out.s2sResults))
	fmt.Fprintln(w)
	printSimplerSummary(w, out.simpler)
	fmt.Fprintln(w, "\n== dead letters, redelivered once the outage is over ==")
	printRedeliveries(w, out.redelivered)
	fmt.Fprintln(w, "\n== what the funder recorded ==")
	if err := out.funder.report(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== what Grants.gov S2S recorded (it ignores Idempotency-Key, and answers GetApplicationList) ==")
	if err := out.s2s.report(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== what Simpler Grants.gov recorded (it honours no idempotency key), at %s ==\n",
		out.simpler.Ended.Format(time.RFC3339))
	if err := reportSimpler(w, out.simpler); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== the audit trail ==")
	if err := recs.verifyTrail(w, out.reconciles()); err != nil {
		return err
	}
	recs.printNextSteps(w)
	return nil
}

// application is one grant application as the pipeline sends it.
type application struct {
	ID     string `json:"application_id"`
	Title  string `json:"title"`
	Amount int    `json:"amount_requested"`
}

var applications = []application{
	{ID: "GRANT-2026-0001", Title: "Rural broadband literacy", Amount: 120000},
	{ID: "GRANT-2026-0002", Title: "Watershed monitoring network", Amount: 310000},
	{ID: "GRANT-2026-0003", Title: "After-school robotics", Amount: 45000},
	{ID: "GRANT-2026-0004", Title: "Community health navigators", Amount: 275000},
	{ID: "GRANT-2026-0005", Title: "Regional arts endowment", Amount: 750000},
	{ID: "GRANT-2026-0006", Title: "Coastal resilience study", Amount: 98000},
}

// fault is what the simulated funder does to one request instead of (or
// after) handling it normally.
type fault int

const (
	none            fault = iota
	unavailable           // 503 before anything is recorded
	rateLimited           // 429 with Retry-After: 1
	dropAfterRecord       // record the submission, then hang up without answering
	outage                // 503 on every request: it never ends within the demo
)

// script is the funder's misbehaviour, per application, in order of the
// requests it receives. GRANT-2026-0005 fails on its own: it asks for more
// than the program ceiling.
func script() map[string][]fault {
	return map[string][]fault{
		"GRANT-2026-0002": {unavailable, unavailable},
		"GRANT-2026-0003": {rateLimited},
		"GRANT-2026-0004": {dropAfterRecord},
		"GRANT-2026-0006": {outage},
	}
}

// transportOptions keeps the demo short: 20ms-200ms backoff instead of the
// 500ms-30s default. The rest is the default policy, so the outage at the
// end shows the per-host retry throttle at work: the earlier faults have
// half drained the host's bucket, and the outage's retries are refused
// before the call's own budget of 3 is spent.
func transportOptions(log *zap.Logger) []grantretry.Option {
	return []grantretry.Option{
		grantretry.WithLogger(log),
		grantretry.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
		grantretry.WithBudget(3, 10*time.Second),
	}
}

// simulation is what one run of the demo produced.
type simulation struct {
	results     []result
	redelivered []redelivery
	funder      *funder
	s2sResults  []result // the submissions to the S2S funder
	s2s         *s2sFunder
	simpler     *pipeline.Result // the Simpler Grants.gov pipeline's run
}

// reconciles counts the questions every call asked of a reconciler.
func (s simulation) reconciles() int {
	n := 0
	for _, r := range slices.Concat(s.results, s.s2sResults) {
		n += r.outcome.Reconciles
	}
	for _, rd := range s.redelivered {
		n += rd.outcome.Reconciles
	}
	if s.simpler != nil {
		for _, c := range s.simpler.Calls {
			n += c.Outcome.Reconciles
		}
	}
	return n
}

// redeliveryOf returns the redelivery of app's dead letter, if it had one.
func (s simulation) redeliveryOf(app string) (redelivery, bool) {
	for _, rd := range s.redelivered {
		if rd.letter.SubmissionID == app {
			return rd, true
		}
	}
	return redelivery{}, false
}

// simulate starts the JSON and S2S funders, submits every application
// through grantretry with the audit lines written to w and the trail and
// dead letters kept in recs, runs the Simpler Grants.gov pipeline with its
// audit lines written to w too, ends the outage and redelivers the dead
// letters, and returns what the pipelines saw and what the funders
// recorded.
func simulate(ctx context.Context, w io.Writer, recs *records, extra ...grantretry.Option) (simulation, error) {
	f := newFunder(script())
	srv := httptest.NewUnstartedServer(f)
	// Connection: close on every response, so each attempt is a fresh
	// connection. The S2S funder keeps its connections alive: grantretry
	// counts every request on the wire either way (docs/exactly-once.md).
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Start()
	defer srv.Close()
	s2s, err := startS2S()
	if err != nil {
		return simulation{}, err
	}
	defer s2s.close()
	s2sOpts, err := s2s.options()
	if err != nil {
		return simulation{}, err
	}

	log := auditLogger(w)
	defer log.Sync()
	opts := slices.Concat(transportOptions(log), s2sOpts, recs.options(), extra)
	client := &http.Client{Transport: grantretry.New(s2s.inner, opts...)}

	sim := simulation{funder: f, s2s: s2s}
	for _, app := range applications {
		r, err := submit(ctx, client, srv.URL+"/v1/applications", app)
		if err != nil {
			return sim, err
		}
		sim.results = append(sim.results, r)
	}
	for _, app := range s2sApplications {
		r, err := submitS2S(ctx, client, s2s.URL(), app)
		if err != nil {
			return sim, err
		}
		sim.s2sResults = append(sim.s2sResults, r)
	}
	if sim.simpler, err = runSimpler(ctx, log, recs.trail, extra); err != nil {
		return sim, err
	}
	f.endOutage()
	sim.redelivered, err = recs.redeliverAll(ctx, client)
	return sim, err
}

// auditLogger writes JSON lines to w, with readable times and durations.
func auditLogger(w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeDuration = zapcore.StringDurationEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zap.InfoLevel)
	return zap.New(core)
}

// result is one submission as the pipeline saw it.
type result struct {
	app      application
	outcome  grantretry.Outcome
	record   string // the funder's record id, "" if none came back
	replayed bool   // the funder answered from its idempotency store
	err      error  // the call's error, when no response was obtained
}

// submit sends one application. Only a request that could not be built is an
// error here: a failed call is a result, with its disposition.
func submit(ctx context.Context, client *http.Client, url string, app application) (result, error) {
	payload, err := json.Marshal(app)
	if err != nil {
		return result{}, err
	}
	ctx = grantretry.WithSubmissionID(ctx, app.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")

	r := result{app: app}
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		var gerr *grantretry.Error
		if errors.As(err, &gerr) {
			r.outcome = gerr.Outcome
		}
		return r, nil
	}
	defer resp.Body.Close()
	r.outcome, _ = grantretry.OutcomeOf(resp)
	r.replayed = resp.Header.Get(headerReplayed) == "true"
	var rec receipt
	if resp.StatusCode == http.StatusCreated && json.NewDecoder(resp.Body).Decode(&rec) == nil {
		r.record = rec.RecordID
	}
	return r, nil
}

func printSummary(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBMISSION\tDISPOSITION\tSTOP REASON\tATTEMPTS\tSTATUS\tRECORD")
	for _, r := range results {
		o := r.outcome
		record := r.record
		switch {
		case r.replayed:
			record += " (replayed)"
		case o.StopReason == grantretry.StopReconciled:
			record += " (found by query)"
		}
		if record == "" {
			record = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n",
			r.app.ID, o.Disposition, o.StopReason, o.Attempts, o.Status, record)
	}
	tw.Flush()
}

// headerReplayed marks a response the funder replayed for a repeated key, as
// Stripe does.
const headerReplayed = "Idempotent-Replayed"

// programCeiling is the largest award the simulated program accepts.
const programCeiling = 500000

// receipt is the funder's answer to an accepted application.
type receipt struct {
	RecordID      string `json:"record_id"`
	ApplicationID string `json:"application_id"`
}

type apiError struct {
	Error string `json:"error"`
}

// answer is what the funder sends back for one request.
type answer struct {
	status     int
	body       any
	retryAfter string
	replayed   bool
	hangUp     bool // close the connection without sending anything
}

// keyEntry is the funder's ledger line for one Idempotency-Key.
type keyEntry struct {
	application string
	requests    int     // requests that carried the key
	applied     int     // times the key's effect was applied
	reply       *answer // the first success, replayed to every repeat
}

// funder is the simulated funder API. It deduplicates by Idempotency-Key, as
// the IETF idempotency-key draft describes: a repeat of an applied key gets
// the original response and changes nothing. Safe for concurrent use; mu
// guards every field below it.
type funder struct {
	mu      sync.Mutex
	script  map[string][]fault
	keys    map[string]*keyEntry
	records map[string][]string // application id -> record ids created for it
	nextID  int
}

func newFunder(s map[string][]fault) *funder {
	return &funder{script: s, keys: make(map[string]*keyEntry), records: make(map[string][]string)}
}

func (f *funder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var app application
	if err := json.NewDecoder(r.Body).Decode(&app); err != nil {
		writeAnswer(w, answer{status: http.StatusBadRequest, body: apiError{"malformed JSON"}})
		return
	}
	key := r.Header.Get(grantretry.HeaderIdempotencyKey)
	if key == "" {
		writeAnswer(w, answer{status: http.StatusBadRequest, body: apiError{"Idempotency-Key required"}})
		return
	}
	a := f.handle(app, key)
	if a.hangUp {
		hangUp(w)
		return
	}
	writeAnswer(w, a)
}

// handle decides the answer to one request, and records the submission if
// it is new and valid. It holds mu throughout, so two requests with one key
// cannot both apply it.
func (f *funder) handle(app application, key string) answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.keys[key]
	if e == nil {
		e = &keyEntry{application: app.ID}
		f.keys[key] = e
	}
	e.requests++

	flt := f.nextFault(app.ID)
	switch flt {
	case unavailable, outage:
		return answer{status: http.StatusServiceUnavailable, body: apiError{"service temporarily unavailable"}}
	case rateLimited:
		return answer{status: http.StatusTooManyRequests, retryAfter: "1", body: apiError{"slow down"}}
	}
	if e.reply != nil {
		a := *e.reply
		a.replayed = true
		return a
	}
	if app.Amount <= 0 || app.Amount > programCeiling {
		return answer{status: http.StatusUnprocessableEntity,
			body: apiError{fmt.Sprintf("amount_requested must be 1 to %d", programCeiling)}}
	}

	f.nextID++
	rec := receipt{RecordID: fmt.Sprintf("GG-%05d", f.nextID), ApplicationID: app.ID}
	f.records[app.ID] = append(f.records[app.ID], rec.RecordID)
	e.applied++
	e.reply = &answer{status: http.StatusCreated, body: rec}
	return answer{status: http.StatusCreated, body: rec, hangUp: flt == dropAfterRecord}
}

// endOutage brings the funder back: the outage ends.
func (f *funder) endOutage() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for app, q := range f.script {
		if len(q) > 0 && q[0] == outage {
			f.script[app] = nil
		}
	}
}

// nextFault takes the next scripted fault for an application; mu must be
// held. An outage is never used up until endOutage.
func (f *funder) nextFault(appID string) fault {
	q := f.script[appID]
	if len(q) == 0 {
		return none
	}
	if q[0] == outage {
		return outage
	}
	f.script[appID] = q[1:]
	return q[0]
}

func writeAnswer(w http.ResponseWriter, a answer) {
	w.Header().Set("Content-Type", "application/json")
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	if a.replayed {
		w.Header().Set(headerReplayed, "true")
	}
	w.WriteHeader(a.status)
	json.NewEncoder(w).Encode(a.body)
}

// hangUp closes the connection without a response: the worst case for a
// client, which cannot tell whether the submission was recorded.
func hangUp(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("grantsgov: the funder's server cannot hijack connections")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// duplicates counts records beyond the first for each application: the
// harm a retry with a fresh key would do, which the funder's key check
// cannot catch.
func (f *funder) duplicates() (recorded, dups int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ids := range f.records {
		if len(ids) > 0 {
			recorded++
			dups += len(ids) - 1
		}
	}
	return recorded, dups
}

// report prints the funder's ledger per Idempotency-Key, and fails if any
// application was recorded twice.
func (f *funder) report(w io.Writer) error {
	f.mu.Lock()
	keys := make([]string, 0, len(f.keys))
	for k := range f.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return f.keys[keys[i]].application < f.keys[keys[j]].application })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IDEMPOTENCY KEY\tSUBMISSION\tREQUESTS\tAPPLIED\tRECORDS")
	for _, k := range keys {
		e := f.keys[k]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%v\n", k, e.application, e.requests, e.applied, f.records[e.application])
	}
	f.mu.Unlock()
	tw.Flush()

	recorded, dups := f.duplicates()
	fmt.Fprintf(w, "funder recorded %d submissions, %d duplicates\n", recorded, dups)
	if dups > 0 {
		return fmt.Errorf("the funder recorded %d duplicate submissions", dups)
	}
	return nil
}
