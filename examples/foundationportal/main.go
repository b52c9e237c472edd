// Command foundationportal drops grantretry into a portal SDK without
// changing the SDK: the SDK (package portal) takes an *http.Client in its
// constructor, as go-github's, Stripe's and most funder SDKs do, and the
// pipeline hands it one whose Transport is grantretry.
//
// It submits seven applications to a fake portal on a loopback server that
// fails the way real ones do (503s, a 429 with Retry-After, a connection
// dropped after the application was recorded, an invalid amount, an outage,
// a load balancer that drops every answer), prints grantretry's audit trail
// and what the pipeline could see through the SDK, and ends by showing from
// the portal's own ledger that nothing was recorded twice.
//
// Everything runs in process and needs no network. Backoffs are kept to
// milliseconds; the one long wait is the portal's Retry-After of one second.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/foundationportal/portal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "foundationportal:", err)
		os.Exit(1)
	}
}

// demoAPIKey is the pipeline's portal credential. The SDK sends it on every
// request; it must never reach the audit trail.
const demoAPIKey = "fp_live_7Hq2vX9rKc4mT8wZ"

var applications = []portal.Application{
	{ExternalID: "FP-2026-0001", Organization: "Riverbend Food Bank", Program: "community", Title: "Cold storage expansion", AmountRequested: 85000},
	{ExternalID: "FP-2026-0002", Organization: "Eastside Literacy", Program: "education", Title: "Adult reading circles", AmountRequested: 42000},
	{ExternalID: "FP-2026-0003", Organization: "Hill County Clinic", Program: "health", Title: "Mobile screening van", AmountRequested: 190000},
	{ExternalID: "FP-2026-0004", Organization: "Delta Youth Orchestra", Program: "arts", Title: "Instrument library", AmountRequested: 30000},
	{ExternalID: "FP-2026-0005", Organization: "Northgate Housing Trust", Program: "community", Title: "Land acquisition", AmountRequested: 900000},
	{ExternalID: "FP-2026-0006", Organization: "Lakeshore Watershed Council", Program: "environment", Title: "Stream gauges", AmountRequested: 64000},
	{ExternalID: "FP-2026-0007", Organization: "Prairie Seed Library", Program: "environment", Title: "Heritage seed bank", AmountRequested: 27000},
}

// script is the portal's misbehaviour, per application, in order of the
// submissions it receives. FP-2026-0005 fails on its own: it asks for more
// than the program ceiling.
func script() map[string][]fault {
	return map[string][]fault{
		"FP-2026-0002": {unavailable, unavailable},
		"FP-2026-0003": {rateLimited},
		"FP-2026-0004": {dropAfterRecord},
		"FP-2026-0006": {outage},
		"FP-2026-0007": {dropAlways},
	}
}

// run is the whole demo: the audit trail, what the pipeline saw, the
// portal's ledger. It fails if the portal recorded any application twice.
// extra options go to the Transport after the demo's own (the tests pass a
// clock that skips the waits).
func run(w io.Writer, extra ...grantretry.Option) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fmt.Fprintln(w, "== audit trail (grantretry's zap lines, console encoder, empty fields left out) ==")
	log := consoleLogger(w)
	results, p, err := simulate(ctx, log, extra...)
	log.Sync()
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== what the pipeline saw ==")
	printSummary(w, results)
	fmt.Fprintln(w, "\n== what the portal recorded ==")
	return p.report(w)
}

// consoleLogger writes the audit lines in zap's console form: time, level,
// message, then the fields as JSON, leaving out the fields that are empty
// strings so the lines fit a terminal. A real pipeline writes every field.
func consoleLogger(w io.Writer) *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	enc.EncodeDuration = zapcore.StringDurationEncoder
	enc.CallerKey, enc.StacktraceKey = "", ""
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zap.InfoLevel)
	return zap.New(dropEmpty{core})
}

// dropEmpty is a zapcore.Core that leaves out string fields whose value is
// "", for display only.
type dropEmpty struct{ zapcore.Core }

func (c dropEmpty) With(fs []zapcore.Field) zapcore.Core { return dropEmpty{c.Core.With(nonEmpty(fs))} }

func (c dropEmpty) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c dropEmpty) Write(e zapcore.Entry, fs []zapcore.Field) error {
	return c.Core.Write(e, nonEmpty(fs))
}

func nonEmpty(fs []zapcore.Field) []zapcore.Field {
	out := make([]zapcore.Field, 0, len(fs))
	for _, f := range fs {
		if f.Type != zapcore.StringType || f.String != "" {
			out = append(out, f)
		}
	}
	return out
}

// transportOptions keeps the demo short: 20ms-200ms backoff instead of the
// 500ms-30s default. The rest is the default policy, so the last two
// applications show the per-host retry throttle at work: the earlier faults
// have drained the host's bucket close to half, the outage's second 503
// takes it below, and from then on the portal gets no retries.
func transportOptions(log *zap.Logger) []grantretry.Option {
	return []grantretry.Option{
		grantretry.WithLogger(log),
		grantretry.WithBackoff(20*time.Millisecond, 200*time.Millisecond),
		grantretry.WithBudget(3, 10*time.Second),
	}
}

// simulate starts the fake portal, builds the pipeline's client and the
// SDK on it, and submits every application.
func simulate(ctx context.Context, log *zap.Logger, extra ...grantretry.Option) ([]result, *fakePortal, error) {
	p := newFakePortal(demoAPIKey, script())
	srv := httptest.NewUnstartedServer(p.handler())
	// Connection: close on every response, so each attempt is a fresh
	// connection and every resend is one grantretry made and logged (see
	// "Attempts and net/http" in grantretry's package doc).
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Start()
	defer srv.Close()

	tr := grantretry.New(nil, append(transportOptions(log), extra...)...)
	defer tr.CloseIdleConnections()
	// This is the whole integration: the SDK gets an *http.Client whose
	// Transport is grantretry. The recorder above it is optional, for a
	// pipeline that wants every Outcome and not only the failures.
	httpClient := &http.Client{Transport: outcomeRecorder{next: tr}}
	client, err := portal.NewClient(srv.URL, httpClient,
		portal.WithAPIKey(demoAPIKey), portal.WithUserAgent("riverbend-grants-pipeline/2.1"))
	if err != nil {
		return nil, nil, err
	}

	results := make([]result, 0, len(applications))
	for _, app := range applications {
		results = append(results, submit(ctx, client, app))
	}
	return results, p, nil
}

// result is one submission as the pipeline saw it.
type result struct {
	app     portal.Application
	receipt *portal.Receipt
	err     error // as the SDK returned it

	// What errors.As finds in err: the portal's answer, or grantretry's
	// error when the call obtained no response at all.
	apiErr *portal.APIError
	grErr  *grantretry.Error

	outcome  grantretry.Outcome // from outcomeRecorder
	recorded bool

	next     action // what the pipeline does about it
	nextText string
}

// submit sends one application through the SDK, naming the submission on
// the context so that every attempt carries the same Idempotency-Key.
func submit(ctx context.Context, client *portal.Client, app portal.Application) result {
	r := result{app: app}
	ctx = grantretry.WithSubmissionID(ctx, app.ExternalID)
	var slot outcomeSlot
	r.receipt, r.err = client.SubmitApplication(withOutcomeSlot(ctx, &slot), app)
	r.outcome, r.recorded = slot.outcome, slot.ok
	errors.As(r.err, &r.apiErr)
	errors.As(r.err, &r.grErr)
	r.next, r.nextText = nextStep(ctx, client, r)
	return r
}

// action is what the pipeline does about one submission.
type action int

const (
	done     action = iota + 1 // the portal has it
	rejected                   // the portal refused it: fix the application
	owed                       // the portal does not have it: redeliver later
	unknown                    // the portal did not say: redeliver later
)

// nextStep decides from what the SDK returned alone, as a pipeline without
// the recorder must: a receipt is done, a 4xx other than 429 is the
// application's fault, and anything else leaves the pipeline unsure
// whether the portal has it, so it asks. A redelivery under the same
// submission id sends the same key, so it is safe even if the portal has
// it after all.
func nextStep(ctx context.Context, client *portal.Client, r result) (action, string) {
	switch {
	case r.err == nil:
		return done, "done: " + r.receipt.ApplicationID
	case r.apiErr != nil && r.apiErr.StatusCode >= 400 && r.apiErr.StatusCode < 500 &&
		r.apiErr.StatusCode != http.StatusTooManyRequests:
		return rejected, "rejected: fix the application (" + r.apiErr.Code + ")"
	}
	st, err := client.GetApplicationStatus(ctx, r.app.ExternalID)
	var notFound *portal.APIError
	switch {
	case err == nil:
		return done, "asked the portal: " + st.State + " as " + st.ApplicationID + ", done"
	case errors.As(err, &notFound) && notFound.StatusCode == http.StatusNotFound:
		return owed, "asked the portal: not found, owed: redeliver later (same id, same key)"
	}
	return unknown, "asked the portal: no answer, owed: redeliver later (same id, same key)"
}

// sdkView is what the SDK's return values say, without the recorder.
func (r result) sdkView() string {
	switch {
	case r.err == nil:
		return "*Receipt " + r.receipt.ApplicationID
	case r.apiErr != nil:
		return fmt.Sprintf("*APIError %d %s", r.apiErr.StatusCode, r.apiErr.Code)
	}
	return "error, no response"
}

// errorView is what errors.As finds of grantretry's in the SDK's error.
func (r result) errorView() string {
	if r.grErr == nil {
		return "-"
	}
	return fmt.Sprintf("%s/%s, %d", r.grErr.Disposition, r.grErr.StopReason, r.grErr.Attempts)
}

func (r result) recorderView() string {
	if !r.recorded {
		return "-"
	}
	o := r.outcome
	return fmt.Sprintf("%s/%s, %d", o.Disposition, o.StopReason, o.Attempts)
}

func printSummary(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "APPLICATION\tSDK RETURNED\t*grantretry.Error IN IT\tRECORDER'S OUTCOME\tNEXT")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.app.ExternalID, r.sdkView(), r.errorView(), r.recorderView(), r.nextText)
	}
	tw.Flush()
	fmt.Fprint(w, `
The SDK alone says "it worked", "the portal said no" (the last status, not
how many attempts it took), or, when no response came back at all, returns
an error in which errors.As finds the *grantretry.Error with the whole
Outcome. The recorder, a RoundTripper the pipeline stacks over grantretry
(outcomes.go), sees every Outcome; the audit trail above has them all, by
submission_id. Outcomes read: disposition/stop reason, attempts.
`)
}
