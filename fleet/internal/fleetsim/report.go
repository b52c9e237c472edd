package fleetsim

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable prints one row per storm.
func WriteTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tP\tworkers\tcalls\tattempts in outage\tbefore all stopped\tall stopped after\tprobes per 2s\tretries in outage\tfirst OK after recovery\tlast process resumed\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%.2f\t%d\t%s\t%s (%d)\t\n", r.Name(), r.Processes, r.Processes*r.Workers,
			r.Calls, r.OutageAttempts, r.StoppedAfter, dur(r.AllStopped), r.ProbesPerProbe, r.OutageRetries,
			dur(r.FirstProbeOK), dur(r.MaxResume), r.ProcessesResumed)
	}
	tw.Flush()
}

// Name is "fleet", "local" or "single".
func (r Result) Name() string {
	switch {
	case r.Fleet:
		return "fleet"
	case r.Processes == 1:
		return "single"
	}
	return "local"
}

func dur(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

// Check is one target, met or not.
type Check struct {
	Target string
	Got    string
	Met    bool
	Info   bool // a figure, not a target
}

// Targets checks fleet mode's targets (docs/fleet.md) on the fleet
// storm, and the retries against the single process with as many
// workers. A storm with no breaker checks the retries only: nothing stops
// sending.
func Targets(fleetRun, single Result) []Check {
	ratio := float64(fleetRun.OutageRetries) / float64(max(single.OutageRetries, 1))
	retries := Check{Target: "retries in the outage at most 1.25x a single process with as many workers",
		Got: fmt.Sprintf("%d vs %d: %.2fx", fleetRun.OutageRetries, single.OutageRetries, ratio), Met: ratio <= 1.25}
	if fleetRun.NoBreaker {
		return []Check{retries}
	}
	// With breakers, a call retries only if its backoff ends before its
	// process hears the breaker open: 0 to 2 retries a run, too few for a
	// ratio. The budget's target is the run without breakers.
	retries = Check{Target: "retries in the outage (the 1.25x target: run with -breaker=false, where the budget alone bounds them)",
		Got: fmt.Sprintf("%d vs %d for the single process", fleetRun.OutageRetries, single.OutageRetries), Info: true}
	return []Check{
		{Target: "at most 10 attempts before every process stops sending",
			Got: fmt.Sprintf("%d (all stopped %s into the outage)", fleetRun.StoppedAfter, dur(fleetRun.AllStopped)),
			Met: fleetRun.AllStopped >= 0 && fleetRun.StoppedAfter <= 10},
		{Target: "at most 1.1 probes per probe interval across the fleet",
			Got: fmt.Sprintf("%.2f", fleetRun.ProbesPerProbe), Met: fleetRun.AllStopped >= 0 && fleetRun.ProbesPerProbe <= 1.1},
		{Target: "every process sends again within 1 s of the first successful probe",
			Got: fmt.Sprintf("%s, %d of %d processes", dur(fleetRun.MaxResume), fleetRun.ProcessesResumed, fleetRun.Processes),
			Met: fleetRun.ProcessesResumed == fleetRun.Processes && fleetRun.MaxResume <= time.Second},
		retries,
	}
}

// WriteChecks prints one "met", "NOT met" or "info" line per check.
func WriteChecks(w io.Writer, cs []Check) {
	for _, c := range cs {
		verdict := "met"
		switch {
		case c.Info:
			verdict = "info"
		case !c.Met:
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "%-7s %s: %s\n", verdict, c.Target, c.Got)
	}
}

// WriteBreakdown prints where the fleet run's first attempts in the
// outage went.
func WriteBreakdown(w io.Writer, r Result) {
	b := r.Breakdown
	if r.NoBreaker {
		fmt.Fprintf(w, "fleet run: %d failure reports, %d cut at the limit or failed (p50 %s, p99 %s, max %s; the caller's wait, the statement's goroutine and the pool included)\n",
			b.Reports, b.ReportsLost, b.ReportP50.Round(10*time.Microsecond), b.ReportP99.Round(10*time.Microsecond), b.ReportMax.Round(10*time.Microsecond))
		fmt.Fprintf(w, "reports that let a retry go: %d answered yes in time, %d yes past the limit, %d erred (the local throttle decided, yes or no)\n",
			b.YesInTime, b.YesCut, b.Errored)
		return
	}
	fmt.Fprintf(w, "fleet run, until all stopped: %d failure reports, %d cut at the limit or failed (p50 %s, max %s); "+
		"fleet's breaker first seen open %s into the outage after %d attempts; last process heard it at %s after %d attempts; %d processes saw FleetUnknown\n",
		b.Reports, b.ReportsLost, b.ReportP50.Round(10*time.Microsecond), b.ReportMax.Round(10*time.Microsecond),
		dur(b.Opened), b.HitsBeforeOpened, dur(b.LastHeard), b.HitsBeforeLastHeard, b.Unknown)
	fmt.Fprint(w, "FleetHost calls in the whole outage (erred; TryProbe mostly answered from memory):")
	for _, k := range []string{"Failed", "TryProbe", "ProbeDone"} {
		fmt.Fprintf(w, " %s %d (%d)", k, b.Asked[k], b.Failed[k])
	}
	fmt.Fprintln(w)
}
