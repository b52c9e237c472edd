package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/simplergrants/pipeline"
	"github.com/grantretry/grantretry/trail"
	"go.uber.org/zap"
)

// The third funder: the Simpler Grants.gov REST API, Grants.gov's
// successor, whose start creates a new application on every call and
// honours no idempotency key at all. Its pipeline (package pipeline of
// examples/simplergrants) starts and submits each application through
// simplergrants.Profile, naming each application after its submission id,
// against a fake of the API and its AWS gateway on a simulated clock of
// its own: the gateway's 29 s timeout, its backoffs, a maintenance window
// and the month's end take no time. Its Transport writes its audit lines
// beside the others'.

// simplerIDs are the submission ids of the Simpler Grants.gov pipeline's
// applications, one for each of its faults.
var simplerIDs = []string{
	"GRANT-2026-0010", "GRANT-2026-0011", "GRANT-2026-0012", "GRANT-2026-0013",
	"GRANT-2026-0014", "GRANT-2026-0015", "GRANT-2026-0016",
}

// runSimpler runs the Simpler Grants.gov pipeline, its audit lines to log
// and to sink, the demo's trail. Its owed calls are sent again by the
// pipeline itself, at the time the API gave: they are kept as no dead
// letter. extra options go to its Transport after these; the pipeline's
// simulated clock comes after them.
func runSimpler(ctx context.Context, log *zap.Logger, sink *trail.Trail, extra []grantretry.Option) (*pipeline.Result, error) {
	return pipeline.Run(ctx, pipeline.Options{
		IDs:   simplerIDs,
		Extra: slices.Concat([]grantretry.Option{grantretry.WithLogger(log), grantretry.WithAuditTrail(sink)}, extra),
	})
}

// printSimplerStories tells each application to Simpler Grants.gov: what
// befell it, and each of its calls with its attempts and why it ended so.
func printSimplerStories(w io.Writer, r *pipeline.Result, calls callLines) {
	for _, app := range r.Applications {
		fmt.Fprintf(w, "%s\n", wrapText(app.ID+" to Simpler Grants.gov: "+app.Fault.String()+".", 96, "  "))
		for _, c := range r.Calls {
			if c.Application != app.ID {
				continue
			}
			o := c.Outcome
			what := c.What
			if c.Again {
				what += ", sent again"
			}
			fmt.Fprintf(w, "  %s: %s after %s\n", what, o.Disposition, countAttempts(o.Attempts))
			writeAttempts(w, calls[[2]string{o.CorrelationID, ""}])
			fmt.Fprintf(w, "  %s\n", wrapText("why: "+simplerWhy(c), 96, "       "))
		}
		fmt.Fprintln(w)
	}
}

// simplerWhy says in words why a call to Simpler Grants.gov ended as it
// did.
func simplerWhy(c pipeline.Call) string {
	o := c.Outcome
	switch o.StopReason {
	case grantretry.StopSuccess:
		switch {
		case c.Again:
			return "sent again as a new call once the time it was owed had come; the API took it."
		case o.Attempts > 1:
			return "the gateway throttled it, which is transient, so grantretry waited and sent it again, " +
				"within the profile's budget."
		}
		return "the API took it at once."
	case grantretry.StopReconciled:
		lead := "the connection dropped after the request went out, so the API may have carried it out."
		if o.Reason == "transient:504;simplergrants:gateway_timeout" {
			lead = "the gateway gave up on the API at 29 s and answered 504, while the API went on with it."
		}
		if c.What == "start" {
			return lead + " The API honours no idempotency key: a second start would be a second application. " +
				"So grantretry asked the API for the user's applications, which found one named after the " +
				"submission id: no second start."
		}
		return lead + " So grantretry asked the API for the application's record, which says submitted: " +
			"no second submit."
	case grantretry.StopOwedLater:
		if o.NotBefore.IsZero() {
			return "the month's quota of the API key is spent, and the gateway gives no time to come back. " +
				"The call is owed, not failed: it ended after one attempt, and the pipeline sent it again " +
				"when the next month began."
		}
		return fmt.Sprintf("the API is in maintenance until %s, its Retry-After. The call is owed, not failed: "+
			"it ended after one attempt, and the pipeline sent it again then.", o.NotBefore.Format(time.RFC3339))
	}
	return "it stopped: " + o.StopReason + " (" + o.Reason + ")."
}

// printSimplerSummary is the Simpler Grants.gov calls in short.
func printSimplerSummary(w io.Writer, r *pipeline.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBMISSION\tCALL\tDISPOSITION\tSTOP REASON\tATTEMPTS\tSTATUS")
	for _, c := range r.Calls {
		what := c.What
		if c.Again {
			what += " again"
		}
		o := c.Outcome
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", c.Application, what, o.Disposition, o.StopReason, o.Attempts, o.Status)
	}
	tw.Flush()
}

// reportSimpler prints what the API recorded, and fails if it started or
// submitted an application other than once, or a call it received was
// reported failed.
func reportSimpler(w io.Writer, r *pipeline.Result) error {
	if err := r.WriteLedger(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "Simpler Grants.gov holds %d applications, each started once and submitted once; no call failed.\n",
		len(r.Recorded))
	return nil
}
