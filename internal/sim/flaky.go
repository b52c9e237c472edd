package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
)

// FlakyPolicies are the policies the flaky scenario runs unless told
// otherwise: the grantretry ones, which add the throttle and then the
// breaker to the per-call policy.
const FlakyPolicies = "jitter,throttle,default"

// FlakyResult is what one policy did to the flaky funder in one run. Run
// builds it once the run is over, and nothing changes it afterwards.
type FlakyResult struct {
	Policy Policy

	Calls        int // logical calls started
	Dispositions map[grantretry.Disposition]int
	// Throttled is the calls that ended because the retry throttle refused
	// a retry (stop reason retry_throttled).
	Throttled int
	Requests  int64 // requests the funder received
	Recorded  int   // applications the funder recorded
	// Duplicates is the recordings of a submission it had already
	// recorded.
	Duplicates int
	Wall       time.Duration // real time the run took
}

// RequestsPerCall is the requests the funder received per call started;
// NaN when none was.
func (r FlakyResult) RequestsPerCall() float64 {
	if r.Calls == 0 {
		return math.NaN()
	}
	return float64(r.Requests) / float64(r.Calls)
}

// RunFlaky runs the flaky scenario once per policy, one after another,
// each against a fresh funder and a fresh Transport, and returns one
// FlakyResult per policy in the same order. The policies must be
// grantretry's: the funder tells a call's attempts apart by the
// X-Correlation-ID grantretry sends. progress, if not nil, gets one line
// as each policy starts.
func RunFlaky(ctx context.Context, sc Scenario, ps []Policy, progress io.Writer) ([]FlakyResult, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if sc.Kind != KindFlaky {
		return nil, fmt.Errorf("scenario %q is not %s", sc.Kind, KindFlaky)
	}
	if len(ps) == 0 {
		return nil, errors.New("no policy to run")
	}
	for _, p := range ps {
		if !p.SendsKey {
			return nil, fmt.Errorf("policy %s: the flaky funder tells a call's attempts apart by grantretry's X-Correlation-ID, which %s does not send", p.ID, p.ID)
		}
	}
	out := make([]FlakyResult, 0, len(ps))
	for _, p := range ps {
		if progress != nil {
			fmt.Fprintf(progress, "sim: running %s (%v of simulated time in about %v)\n",
				p.Name, sc.Run, sc.realTime(sc.Run).Round(time.Millisecond))
		}
		raw, err := runOnce(ctx, sc, p, policyIndex(p.ID), 0)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.ID, err)
		}
		out = append(out, newFlakyResult(p, raw))
	}
	return out, nil
}

func newFlakyResult(p Policy, raw run) FlakyResult {
	r := FlakyResult{
		Policy:       p,
		Dispositions: make(map[grantretry.Disposition]int),
		Requests:     raw.f.total(),
		Recorded:     raw.recorded,
		Duplicates:   raw.dups,
		Wall:         raw.wall,
	}
	for _, calls := range raw.calls {
		for _, c := range calls {
			r.Calls++
			r.Dispositions[c.disp]++
			if c.stop == grantretry.StopThrottled {
				r.Throttled++
			}
		}
	}
	return r
}

// FlakyReport is one flaky-funder run of several policies, ready to be
// written as text or Markdown. Its methods only read it, so they may run
// concurrently.
type FlakyReport struct {
	Scenario Scenario
	Results  []FlakyResult
	// Command is the command line that produced the run, quoted in the
	// Markdown; "" leaves it out.
	Command string
}

// flakyHeader and flakyRow are the table's columns; the text leaves out
// the last, recorded, to fit in TextWidth.
func flakyHeader() []string {
	return []string{"policy", "calls", "succeeded", "dead_letter", "circuit_open", "throttled", "requests", "req/call", "recorded"}
}

func flakyRow(r FlakyResult) []string {
	return []string{
		r.Policy.Name,
		strconv.Itoa(r.Calls),
		strconv.Itoa(r.Dispositions[grantretry.Succeeded]),
		strconv.Itoa(r.Dispositions[grantretry.DeadLetter]),
		strconv.Itoa(r.Dispositions[grantretry.CircuitOpen]),
		strconv.Itoa(r.Throttled),
		strconv.FormatInt(r.Requests, 10),
		fmt.Sprintf("%.2f", r.RequestsPerCall()),
		strconv.Itoa(r.Recorded),
	}
}

// scenarioText says what was simulated, in a few lines.
func (rep FlakyReport) scenarioText() string {
	s := rep.Scenario
	var b strings.Builder
	fmt.Fprintf(&b, "Funder: answers the first %d attempts of every call 503 (no Retry-After), then 201; latency %v; no outage.\n",
		s.FailFirst, s.Latency)
	fmt.Fprintf(&b, "Workload: %d workers, one call at a time each (think time %v mean, uniform over ±%.0f%%), "+
		"failed submissions requeued; run %v; time scale %v (%v of real time per policy); seed %d.\n",
		s.Workers, s.Think().Round(time.Millisecond), 100*s.Spread, s.Run, s.Scale, s.realTime(s.Run).Round(time.Millisecond), s.Seed)
	fmt.Fprintf(&b, "grantretry policies: backoff base %v, cap %v; %d retries; deadline %v; throttle %s; breaker %s (default policy).\n",
		s.Base, s.Cap, s.Retries, s.Deadline, s.throttleText(), s.breakerText())
	return b.String()
}

// WriteText writes the scenario and one row per policy, for a terminal.
func (rep FlakyReport) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(wrap(rep.scenarioText(), TextWidth, 2))
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	h := flakyHeader()
	writeTabbed(tw, h[:len(h)-1])
	for _, r := range rep.Results {
		row := flakyRow(r)
		writeTabbed(tw, row[:len(row)-1])
	}
	tw.Flush()
	b.WriteString("\n" + wrap(flakyKey+" The Markdown (-md) also has recorded: "+flakyRecorded, TextWidth, 0) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// flakyKey defines the columns, and flakyRecorded the last.
const (
	flakyKey = "calls: logical calls started, requeued ones included; succeeded, dead_letter, " +
		"circuit_open: their dispositions; throttled: calls that ended because the retry throttle refused a retry (retry_throttled); " +
		"requests: what the funder received; req/call: requests per call."
	flakyRecorded = "applications the funder recorded."
)

// WriteMarkdown writes the scenario, the table and its definitions as
// Markdown.
func (rep FlakyReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Storm simulator: a flaky funder\n\n")
	if rep.Command != "" {
		fmt.Fprintf(&b, "```sh\n%s\n```\n\n", rep.Command)
	}
	for _, line := range strings.Split(strings.TrimSpace(rep.scenarioText()), "\n") {
		b.WriteString(line + "  \n")
	}
	b.WriteString("\n")
	rows := make([][]string, len(rep.Results))
	for i, r := range rep.Results {
		rows[i] = flakyRow(r)
	}
	writeMarkdownRows(&b, flakyHeader(), rows)
	b.WriteString("\n" + flakyKey + " recorded: " + flakyRecorded + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSVG fails: the flaky scenario draws no chart.
func (rep FlakyReport) WriteSVG(io.Writer) error {
	return errors.New("the flaky scenario draws no chart")
}
