package sim

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry/internal/svgtext"
)

// LowVolumeReport is one low-volume run of several policies, ready to be
// written as text, Markdown or SVG. Its methods only read it, so they may
// run concurrently.
type LowVolumeReport struct {
	Scenario Scenario
	Results  []LowVolumeResult
	// Command is the command line that produced the run, quoted in the
	// Markdown; "" leaves it out.
	Command string
}

func lowVolumeHeader() []string {
	return []string{
		"policy", "seeds", "calls after the blip", "met a transient failure", "refused a retry",
		"refused share", "refused share per seed", "last refusal after the blip", "retries back by (probes)",
	}
}

func lowVolumeRow(sc Scenario, r LowVolumeResult) []string {
	met, refused := r.Met()
	after := 0
	for _, run := range r.Runs {
		after += run.AfterBlip
	}
	last, withRefusal := lastRefusalSummary(r)
	back := "n/a"
	if len(sc.Probes) > 0 {
		back = backBySummary(r, sc.Probes).text()
	}
	return []string{
		r.Policy.Name,
		strconv.Itoa(len(r.Runs)),
		strconv.Itoa(after),
		strconv.Itoa(met),
		strconv.Itoa(refused),
		fmtShare(r.RefusedShare()),
		refusedShareSummary(r),
		fmt.Sprintf("%s; %d of %d seeds had one", last.text(), withRefusal, len(r.Runs)),
		back,
	}
}

func probeHeader(rs []LowVolumeResult) []string {
	h := []string{"probe: a call failing this long after the blip"}
	for _, r := range rs {
		h = append(h, r.Policy.Name+": got its retry")
	}
	return h
}

// probeRows are the probe table's rows: per probe delay, per policy, the
// seeds whose call got its retry and, unless short, what stopped it in
// the others.
func probeRows(sc Scenario, rs []LowVolumeResult, short bool) [][]string {
	var rows [][]string
	for i, d := range sc.Probes {
		row := []string{fmtDur(d)}
		for _, r := range rs {
			retried, by := r.Retried(i)
			cell := fmt.Sprintf("%d of %d", retried, len(r.Runs))
			if short {
				row = append(row, cell)
				continue
			}
			var rest []string
			for _, o := range []ProbeOutcome{ProbeRefused, ProbeBreaker, ProbeOther, ProbeNone} {
				if by[o] > 0 {
					rest = append(rest, fmt.Sprintf("%d %s", by[o], o))
				}
			}
			if len(rest) > 0 {
				cell += " (" + strings.Join(rest, ", ") + ")"
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

// lowVolumeTextHeader and lowVolumeTextRow are the first table as the
// terminal shows it: the columns that fit in TextWidth, under short names
// that lowVolumeTextKey explains. The Markdown has every column.
func lowVolumeTextHeader() []string {
	return []string{"policy", "calls", "met failure", "refused", "share", "retries back by (probes)"}
}

func lowVolumeTextRow(sc Scenario, r LowVolumeResult) []string {
	m := lowVolumeRow(sc, r)
	return []string{m[0], m[2], m[3], m[4], m[5], m[8]}
}

const lowVolumeTextKey = "calls: calls after the blip, all seeds; met failure: those that met a transient " +
	"failure; refused: those the retry throttle refused a retry, and their share; retries back by: " +
	"median and range over seeds of the first probe delay from which every probed call got its retry. " +
	"-md FILE writes every column, with its definition."

// probeTextHeader and probeTextRows are the probe table as the terminal
// shows it: the policies' names as its columns.
func probeTextHeader(rs []LowVolumeResult) []string {
	h := []string{"probe"}
	for _, r := range rs {
		h = append(h, r.Policy.Name)
	}
	return h
}

// WriteText writes the scenario, both tables and the targets as plain
// text, no line wider than TextWidth.
func (rep LowVolumeReport) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString(wrap(rep.scenarioText(), TextWidth, 2))
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	writeTabbed(tw, lowVolumeTextHeader())
	for _, r := range rep.Results {
		writeTabbed(tw, lowVolumeTextRow(rep.Scenario, r))
	}
	tw.Flush()
	b.WriteString(wrap(lowVolumeTextKey, TextWidth, 0) + "\n")
	if len(rep.Scenario.Probes) > 0 {
		head, rows := probeTextHeader(rep.Results), probeRows(rep.Scenario, rep.Results, false)
		what := "in how many seeds it got its retry, and what stopped it in the others"
		if tableWidth(append(rows, head)...) > TextWidth {
			rows, what = probeRows(rep.Scenario, rep.Results, true), "in how many seeds it got its retry (the Markdown says what stopped it in the others)"
		}
		b.WriteString("\n" + wrap("Probes: a call failing this long after the blip; "+what+":", TextWidth, 0) + "\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		writeTabbed(tw, head)
		for _, row := range rows {
			writeTabbed(tw, row)
		}
		tw.Flush()
	}
	if warn := rep.paceWarning(); warn != "" {
		b.WriteString("\n" + wrap(warn, TextWidth, 0) + "\n")
	}
	if checks := LowVolumeTargets(rep.Scenario, rep.Results); len(checks) > 0 {
		writeChecks(&b, "Low-volume targets", checks)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the scenario, both tables, the targets and the
// definitions as a Markdown document.
func (rep LowVolumeReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Storm simulator run: low volume\n\n")
	if rep.Command != "" {
		fmt.Fprintf(&b, "Produced by `%s`, from the repository root.\n\n", rep.Command)
	}
	b.WriteString(strings.ReplaceAll(rep.scenarioText(), "\n", "  \n"))
	b.WriteString("\n")
	writeMarkdownRows(&b, lowVolumeHeader(), rep.rows())
	if len(rep.Scenario.Probes) > 0 {
		b.WriteString("\n")
		writeMarkdownRows(&b, probeHeader(rep.Results), probeRows(rep.Scenario, rep.Results, false))
	}
	if warn := rep.paceWarning(); warn != "" {
		b.WriteString("\n**" + warn + "**\n")
	}
	if checks := LowVolumeTargets(rep.Scenario, rep.Results); len(checks) > 0 {
		writeMarkdownChecks(&b, "Low-volume targets", checks)
	}
	b.WriteString("\nPolicies:\n\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "- **%s** (`%s`): %s.\n", r.Policy.Name, r.Policy.ID, r.Policy.Summary)
	}
	b.WriteString("\n" + lowVolumeDefinitions)
	_, err := io.WriteString(w, b.String())
	return err
}

func (rep LowVolumeReport) rows() [][]string {
	var rows [][]string
	for _, r := range rep.Results {
		rows = append(rows, lowVolumeRow(rep.Scenario, r))
	}
	return rows
}

const lowVolumeDefinitions = `Definitions (times are simulated; "after the blip" counts from its last
failure):

- *calls after the blip*: calls started after it, all seeds, in the runs
  without a probe.
- *met a transient failure*: those of them that made more than one
  attempt, or that ended ` + "`dead_letter` or `circuit_open`" + ` after one.
- *refused a retry*: those of them that ended with stop reason
  ` + "`retry_throttled`" + `: the retry throttle refused the retry. The
  *refused share* is over all seeds; *per seed* is its median and range.
- *last refusal after the blip*: the start of the last such call, per seed
  (0 for a seed with none). Failures are rare, so this is when retries
  were last seen off, not when they came back.
- *probe*: for each delay d, each seed is run again until the funder has
  failed the first attempt of the first call to reach it d or more after
  the blip; that call got its retry, was refused one by the throttle, or
  was stopped by the breaker.
- *retries back by*: per seed, the first probe delay from which every
  probe's call got its retry ("> " the last delay when the last did not);
  its median and range over seeds. The throttle may allow retries a little
  before it: probes only sample it.
`

// scenarioText says what was simulated, in a few lines.
func (rep LowVolumeReport) scenarioText() string {
	s := rep.Scenario
	period := s.Think() + s.Latency
	lo := time.Duration(float64(s.Think())*(1-s.Spread)) + s.Latency
	hi := time.Duration(float64(s.Think())*(1+s.Spread)) + s.Latency
	var b strings.Builder
	fmt.Fprintf(&b, "Funder: latency %v; a blip of %d failures from %v (503, no Retry-After), then %.0f%% of requests answered 503 at random, independently",
		s.Latency, s.BlipFailures, s.BlipAt, 100*s.FailShare)
	if s.Outage > 0 {
		fmt.Fprintf(&b, "; full outage from %v to %v", s.OutageStart, s.OutageEnd())
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "Workload: %d worker(s), a call every %v to %v (%v on average), failed submissions requeued; run %v; "+
		"time scale %v (%v of real time per run); seeds %d to %d; probes at %s after the blip.\n",
		s.Workers, lo.Round(time.Second), hi.Round(time.Second), period.Round(time.Second), s.Run, s.Scale,
		s.realTime(s.Run).Round(time.Millisecond), s.Seed, s.Seed+uint64(s.Seeds)-1, probesText(s.Probes))
	fmt.Fprintf(&b, "grantretry policies: backoff base %v, cap %v; %d retries; deadline %v; throttle %s; breaker %s (default policy).\n",
		s.Base, s.Cap, s.Retries, s.Deadline, s.throttleText(), s.breakerText())
	return b.String()
}

func probesText(ps []time.Duration) string {
	if len(ps) == 0 {
		return "none"
	}
	out := make([]string, len(ps))
	for i, d := range ps {
		out[i] = fmtDur(d)
	}
	return strings.Join(out, ", ")
}

// paceWarning names the policies some of whose seeds started fewer calls
// than the workload asks, or is "" if none did.
func (rep LowVolumeReport) paceWarning() string {
	var slow []string
	for _, r := range rep.Results {
		low := 0
		for _, run := range r.Runs {
			if run.pace < MinPace {
				low++
			}
		}
		if low > 0 {
			slow = append(slow, fmt.Sprintf("%s (%d of %d seeds)", r.Policy.Name, low, len(r.Runs)))
		}
	}
	if len(slow) == 0 {
		return ""
	}
	return fmt.Sprintf("Warning: the machine did not keep up with time scale %v: %s started fewer than %.0f%% of the calls "+
		"the workload asks. Timers fired late, and their figures are distorted: their targets get no verdict. Lower -scale.",
		rep.Scenario.Scale, strings.Join(slow, ", "), 100*MinPace)
}

func writeMarkdownRows(b *strings.Builder, header []string, rows [][]string) {
	writeMarkdownRow(b, header)
	seps := make([]string, len(header))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "---:"
		}
	}
	writeMarkdownRow(b, seps)
	for _, row := range rows {
		writeMarkdownRow(b, row)
	}
}

// WriteSVG writes the chart of the probes: for each probe delay after the
// blip, on a log scale, the share of seeds whose probed call got its
// retry, one line per policy.
func (rep LowVolumeReport) WriteSVG(w io.Writer) error {
	s := rep.Scenario
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	svgtext.Text(&b, plotLeft, 24, "start", `font-size="16" font-weight="bold"`, "Retries back after a blip: calls failing d after it that got their retry")
	svgtext.Text(&b, plotLeft, 44, "start", `fill="#444444"`, fmt.Sprintf(
		"a call every %v on average; blip of %d failures, then %.0f%% at random; throttle %s; %d seeds",
		(s.Think()+s.Latency).Round(time.Second), s.BlipFailures, 100*s.FailShare, s.throttleText(), s.Seeds))
	if len(s.Probes) == 0 {
		svgtext.Text(&b, plotLeft, plotTop+20, "start", "", "no probes were run")
		b.WriteString("</svg>\n")
		_, err := w.Write(b.Bytes())
		return err
	}
	lo, hi := math.Log(s.Probes[0].Seconds()), math.Log(s.Probes[len(s.Probes)-1].Seconds())
	if hi <= lo {
		hi = lo + 1
	}
	x := func(d time.Duration) float64 {
		return plotLeft + 20 + (plotRight-plotLeft-40)*(math.Log(d.Seconds())-lo)/(hi-lo)
	}
	y := func(share float64) float64 { return plotBottom - (plotBottom-plotTop)*share }
	for _, v := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/>`+"\n", plotLeft, y(v), plotRight, y(v))
		svgtext.Text(&b, plotLeft-8, y(v)+4, "end", "", fmt.Sprintf("%.0f%%", 100*v))
	}
	for _, d := range s.Probes {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/>`+"\n", x(d), plotBottom, x(d), plotBottom+5)
		svgtext.Text(&b, x(d), plotBottom+19, "middle", "", fmtDur(d))
	}
	if MaxRetriesOff >= s.Probes[0] && MaxRetriesOff <= s.Probes[len(s.Probes)-1] {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" %s/>`+"\n", x(MaxRetriesOff), plotTop, x(MaxRetriesOff), plotBottom, capacityStroke)
		svgtext.Text(&b, x(MaxRetriesOff)+4, plotTop+12, "start", `fill="#555555"`, "target: back by "+fmtDur(MaxRetriesOff))
	}
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" fill="none" stroke="#333333"/>`+"\n", plotLeft, plotTop, plotBottom, plotRight)
	svgtext.Text(&b, (plotLeft+plotRight)/2, plotBottom+42, "middle", "", "probe: how long after the blip's last failure the call failed (log scale)")
	fmt.Fprintf(&b, `<text x="20" y="%d" text-anchor="middle" transform="rotate(-90 20 %d)">seeds whose probed call got its retry</text>`+"\n",
		(plotTop+plotBottom)/2, (plotTop+plotBottom)/2)
	ly := float64(plotTop + 8)
	svgtext.Text(&b, legendX, ly, "start", `font-weight="bold"`, "policy")
	for _, r := range rep.Results {
		pts := make([]string, len(s.Probes))
		for i, d := range s.Probes {
			retried, _ := r.Retried(i)
			share := float64(retried) / float64(max(len(r.Runs), 1))
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(d), y(share))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x(d), y(share), colorOf(r.Policy))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" points="%s"/>`+"\n",
			colorOf(r.Policy), strokeOf(r.Policy), strings.Join(pts, " "))
		ly += 22
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="%s"/>`+"\n",
			legendX, ly-4, legendX+24, ly-4, colorOf(r.Policy), strokeOf(r.Policy))
		svgtext.Text(&b, legendX+32, ly, "start", "", r.Policy.Name)
		ly += 14
		svgtext.Text(&b, legendX+32, ly, "start", `font-size="10" fill="#555555"`, "refused: "+fmtShare(r.RefusedShare())+" of calls that failed")
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}
