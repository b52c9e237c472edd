// Command simplergrants runs a pipeline against a fake of the Simpler
// Grants.gov REST API (internal/fakesimpler) through simplergrants.Profile:
// seven applications, each started and then submitted, while the API drops a
// connection after carrying a request out, its gateway gives up at 29 s
// while the API goes on, another process spends the gateway's burst, the
// API goes into maintenance and the month's quota runs out. It tells what
// happened to each call, and shows from the fake's own ledger that no
// application was started or submitted twice and that no call was reported
// failed that the API received. The pipeline is package pipeline, which
// the Grants.gov demo ("go run ./examples/grantsgov") also runs.
//
//	go run ./examples/simplergrants
//
// Everything runs in process against 127.0.0.1 and needs no network. Time
// is simulated: the API, its gateway and the Transport share one clock,
// which moves only when one of them waits, so the 29 s timeout, the
// backoffs and the month's end take no time at all.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/simplergrants/pipeline"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "simplergrants: unexpected argument %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "simplergrants:", err)
		os.Exit(1)
	}
}

// run runs the pipeline and writes what a person reads to w. It fails when
// the API started or submitted an application twice, or a call was
// reported failed that the API received.
func run(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := pipeline.Run(ctx, pipeline.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "The Simpler Grants.gov demo: %d applications, each started and submitted through\n"+
		"simplergrants.Profile, against a fake of the API and its AWS gateway on 127.0.0.1.\n"+
		"Time is simulated; it starts at %s.\n\n", len(r.Applications), r.Began.Format(time.RFC3339))
	for _, a := range r.Applications {
		fmt.Fprintf(w, "%s: %s\n", a.ID, a.Fault)
	}
	fmt.Fprintln(w, "\n== each call: what happened, and why ==")
	printCalls(w, r.Calls)
	fmt.Fprintf(w, "\n== what the API recorded (its own ledger), at %s ==\n", r.Ended.Format(time.RFC3339))
	if err := r.WriteLedger(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nEach of the %d applications was started once and submitted once; every call succeeded,\n"+
		"or was owed and then sent again at the time the API gave, and none was reported failed.\n", len(r.Applications))
	return nil
}

func printCalls(w io.Writer, calls []pipeline.Call) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "application\tcall\tdisposition\tstop reason\tattempts\tlast verdict\towed until")
	for _, c := range calls {
		what := c.What
		if c.Again {
			what += " (again)"
		}
		o := c.Outcome
		until := ""
		if o.StopReason == grantretry.StopOwedLater {
			until = "not said"
			if !o.NotBefore.IsZero() {
				until = o.NotBefore.Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Application, what, o.Disposition, o.StopReason, o.Attempts, o.Reason, until)
	}
	tw.Flush()
}
