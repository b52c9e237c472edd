package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run, ready to be written as text, Markdown or SVG. Its
// methods only read it, so they may run concurrently.
type Report struct {
	Scenario Scenario
	Results  []Result
	// Command is the command line that produced the run, quoted in the
	// Markdown so the reader can run it again; "" leaves it out.
	Command string
}

// metricHeader and metricRow are the first table: what each policy did to
// the funder and to its own calls.
func metricHeader() []string {
	return []string{
		"policy", "amplification in outage", "req/s in outage", "peak 1-s after recovery",
		"recovery lag", "goodput/min", "goodput/min 1st min after recovery",
		"succeeded", "p50", "p99", "duplicates", "recorded", "calls", "requests",
	}
}

func metricRow(r Result) []string {
	peak := "n/a"
	if r.PeakSecond >= 0 {
		peak = fmt.Sprintf("%s (%d at %ds)", fmtRatio(r.PeakRatio()), r.PeakAfterRecovery, r.PeakSecond)
	}
	dups := strconv.Itoa(r.Duplicates)
	if !r.Policy.SendsKey {
		dups += " (no key)"
	}
	return []string{
		r.Policy.Name,
		fmtRatio(r.Amplification()),
		fmt.Sprintf("%.1f", r.OutageRate()),
		peak,
		fmtLag(r),
		fmtPerMinute(r.Goodput),
		fmtPerMinute(r.GoodputAfterRecovery),
		fmtShare(r.SuccessShare()),
		fmtDur(r.P50),
		fmtDur(r.P99),
		dups,
		strconv.Itoa(r.Recorded - r.Duplicates),
		strconv.Itoa(r.Calls),
		strconv.FormatInt(r.Requests, 10),
	}
}

func dispositionHeader() []string {
	h := []string{"policy"}
	for _, d := range Dispositions() {
		h = append(h, string(d))
	}
	return h
}

func dispositionRow(r Result) []string {
	row := []string{r.Policy.Name}
	for _, d := range Dispositions() {
		row = append(row, strconv.Itoa(r.Dispositions[d]))
	}
	return row
}

// textHeader and textRow are the first table as the terminal shows it:
// the columns that fit in TextWidth, under short names that textKey
// explains. The Markdown has every column.
func textHeader() []string {
	return []string{"policy", "amplif.", "peak", "lag", "goodput/min", "succeeded", "p99", "duplicates"}
}

func textRow(r Result) []string {
	m := metricRow(r)
	peak := "n/a"
	if r.PeakSecond >= 0 {
		peak = fmtRatio(r.PeakRatio())
	}
	return []string{m[0], m[1], peak, m[4], m[5], m[7], m[9], m[10]}
}

const textKey = "amplif.: requests per call started during the outage; peak: the busiest second after " +
	"recovery, as a multiple of capacity; lag: recovery lag; goodput/min: applications recorded per " +
	"minute; p99: completion time, 99th percentile; duplicates: applications recorded twice. -md FILE writes " +
	"every column, with its definition."

// WriteText writes the scenario, both tables and the targets as plain
// text, no line wider than TextWidth.
func (rep Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(wrap(rep.scenarioText(), TextWidth, 2))
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	writeTabbed(tw, textHeader())
	for _, r := range rep.Results {
		writeTabbed(tw, textRow(r))
	}
	tw.Flush()
	b.WriteString(wrap(textKey, TextWidth, 0) + "\n\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	writeTabbed(tw, dispositionHeader())
	for _, r := range rep.Results {
		writeTabbed(tw, dispositionRow(r))
	}
	tw.Flush()
	if warn := rep.paceWarning(); warn != "" {
		b.WriteString("\n" + wrap(warn, TextWidth, 0) + "\n")
	}
	for _, block := range rep.targetBlocks() {
		writeChecks(&b, block.title, block.checks)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// targetBlock is one block of targets, measured.
type targetBlock struct {
	title  string
	checks []Check
}

// targetBlocks are the storm and recovery targets the run can check, each
// block left out when no policy it names ran.
func (rep Report) targetBlocks() []targetBlock {
	var out []targetBlock
	if c := Targets(rep.Results); len(c) > 0 {
		out = append(out, targetBlock{"Storm targets (set for the default scenario)", c})
	}
	if c := RecoveryTargets(rep.Scenario, rep.Results); len(c) > 0 {
		out = append(out, targetBlock{fmt.Sprintf(
			"Recovery target (recovery lag at most %v in the default scenario, %v with other outage lengths)",
			MaxDefaultRecoveryLag, MaxOtherRecoveryLag), c})
	}
	return out
}

func writeTabbed(w io.Writer, cells []string) {
	io.WriteString(w, strings.Join(cells, "\t")+"\n")
}

// WriteMarkdown writes the scenario, both tables, the targets and the
// definitions as a Markdown document.
func (rep Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Storm simulator run\n\n")
	if rep.Command != "" {
		fmt.Fprintf(&b, "Produced by `%s`, from the repository root.\n\n", rep.Command)
	}
	b.WriteString(rep.scenarioText())
	b.WriteString("\n")
	writeMarkdownTable(&b, metricHeader(), rep.Results, metricRow)
	b.WriteString("\n")
	writeMarkdownTable(&b, dispositionHeader(), rep.Results, dispositionRow)
	if warn := rep.paceWarning(); warn != "" {
		b.WriteString("\n**" + warn + "**\n")
	}
	for _, block := range rep.targetBlocks() {
		writeMarkdownChecks(&b, block.title, block.checks)
	}
	b.WriteString("\nPolicies:\n\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "- **%s** (`%s`): %s.\n", r.Policy.Name, r.Policy.ID, r.Policy.Summary)
	}
	b.WriteString("\n" + definitions)
	_, err := io.WriteString(w, b.String())
	return err
}

const definitions = `Definitions (times are simulated):

- *amplification in outage*: requests the funder received during the
  outage, divided by the logical calls the workers started during it.
- *req/s in outage*: requests the funder received during the outage, per
  second of outage.
- *peak 1-s after recovery*: the most requests the funder received in one of
  its one-second quota windows (counted from the start of the run), from
  the end of the outage to the end of the run, as a multiple of its
  capacity; then that count and the window's start.
- *recovery lag*: from the end of the outage to the start of the first
  one-second window, at or after it, in which the funder answered 200 or
  201 to requests that arrived in it at least 90% as many times as the
  offered load (the workers' paced rate, without retries); "never" if no
  window of the run did.
- *goodput/min*: applications the funder recorded for the first time, per
  simulated minute, over the whole run; *1st min after recovery*: the same
  over the 60 one-second windows from the end of the outage on.
- *succeeded*: share of all logical calls that ended ` + "`succeeded`" + `.
- *p50*, *p99*: time from a call's start to its disposition, all calls.
- *duplicates*: applications the funder recorded for a submission it had
  already recorded. Policies marked "no key" send no Idempotency-Key.
- *recorded*: distinct applications the funder recorded.
- *calls*: logical calls started; *requests*: requests the funder received,
  including those of calls still in flight when the run ended.
`

func writeMarkdownTable(b *strings.Builder, header []string, rs []Result, row func(Result) []string) {
	writeMarkdownRow(b, header)
	seps := make([]string, len(header))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "---:"
		}
	}
	writeMarkdownRow(b, seps)
	for _, r := range rs {
		writeMarkdownRow(b, row(r))
	}
}

func writeMarkdownRow(b *strings.Builder, cells []string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
	}
	b.WriteString("\n")
}

// scenarioText says what was simulated, in a few lines.
func (rep Report) scenarioText() string {
	s := rep.Scenario
	var b strings.Builder
	fmt.Fprintf(&b, "Funder: capacity %d requests/s (excess: 429, no Retry-After), latency %v; "+
		"full outage from %v to %v (every request: 503).\n",
		s.Capacity, s.Latency, s.OutageStart, s.OutageEnd())
	fmt.Fprintf(&b, "Workload: %d workers offering %.0f%% of capacity (think time %v mean, uniform over ±50%%), "+
		"failed submissions requeued; run %v; time scale %v (%v of real time per policy); seed %d.\n",
		s.Workers, 100*s.Load, s.Think().Round(time.Millisecond), s.Run, s.Scale, s.realTime(s.Run).Round(time.Millisecond), s.Seed)
	fmt.Fprintf(&b, "grantretry policies: backoff base %v, cap %v; %d retries; deadline %v; throttle %s; breaker %s (default policy).\n",
		s.Base, s.Cap, s.Retries, s.Deadline, s.throttleText(), s.breakerText())
	return b.String()
}

func (s Scenario) throttleText() string {
	if !s.Throttle {
		return "off"
	}
	return fmt.Sprintf("%v tokens, ratio %v, refill %v", s.MaxTokens, s.TokenRatio, s.Refill)
}

func (s Scenario) breakerText() string {
	if !s.Breaker {
		return "off"
	}
	return fmt.Sprintf("opens on %d failed calls, probes after %v, doubling up to %v", s.Threshold, s.Probe, s.Cooldown)
}

// paceWarning says which policies ran slower than the time scale asks,
// or "" if none did.
func (rep Report) paceWarning() string {
	var slow []string
	for _, r := range rep.Results {
		if p := r.Pace(); p < MinPace {
			slow = append(slow, fmt.Sprintf("%s (%.0f%%)", r.Policy.Name, 100*p))
		}
	}
	if len(slow) == 0 {
		return ""
	}
	return fmt.Sprintf("Warning: the machine did not keep up with time scale %v: before the outage, %s started "+
		"fewer calls than the offered load asks. Timers fired late, and their figures are distorted: their "+
		"targets get no verdict. Lower -scale.",
		rep.Scenario.Scale, strings.Join(slow, ", "))
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", x)
}

// fmtLag writes a result's recovery lag, or "never".
func fmtLag(r Result) string {
	if !r.Recovered {
		return "never"
	}
	return fmtDur(r.RecoveryLag)
}

func fmtPerMinute(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", x)
}

func fmtShare(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// fmtDur writes a simulated duration to a useful precision.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
