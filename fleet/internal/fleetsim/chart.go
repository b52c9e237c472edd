package fleetsim

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/svgtext"
)

// Chart geometry, in SVG user units. The look (fonts, greys, the shaded
// outage, the Okabe-Ito colours) is the root simulator's, docs/sim-*.svg;
// here each run has a column and each row a time window.
const (
	svgWidth, svgHeight = 980, 640
	plotLeft, plotRight = 70, 960
	colGap              = 28
	legendY             = 604
)

// Series colours, from the Okabe-Ito palette, which colour-blind readers
// can tell apart.
const (
	okFill     = "#0072B2"
	failedFill = "#D55E00"
	outageFill = `fill="#d9d9d9" fill-opacity="0.6"`
	stopStroke = `stroke="#000000" stroke-width="1.2" stroke-dasharray="4 3"`
)

// The zoomed row: the outage's first attempts, where the runs differ.
const (
	zoomLead   = 20 * time.Millisecond  // shown before the outage
	zoomSpan   = 200 * time.Millisecond // shown of the outage
	zoomBucket = 5 * time.Millisecond
	fullBucket = 100 * time.Millisecond
)

// row is one time window drawn for every run, on one y scale.
type row struct {
	id          string // names the row's series: "full" or "zoom"
	top, bottom float64
	from, to    time.Duration // relative to origin
	bucket      time.Duration
	unit        time.Duration // of the tick labels
	xLabel      string
	yLabel      string
	fromOutage  bool // origin is the run's outage start, not its start
	yMax        float64
	caption     string // above the row, if any
	markStopped bool   // draw where every process was refusing calls
}

func (w row) origin(r Result) time.Duration {
	if w.fromOutage {
		return r.Before
	}
	return 0
}

// WriteSVG writes the chart of the runs rs side by side, one column each
// (local, fleet and single, as sim runs them): the attempts the funder
// received per 100 ms bucket over the whole run, and below per 5 ms bucket
// from just before the outage to 200 ms into it, answered (201) and
// failed (503) stacked, the outage shaded, and a dashed line where every
// process was refusing calls. command, if not "", goes first in an XML
// comment: how to write the chart again. It is plain SVG 1.1.
func WriteSVG(w io.Writer, rs []Result, command string) error {
	if len(rs) == 0 {
		return fmt.Errorf("fleetsim: no runs to chart")
	}
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Name()] {
			return fmt.Errorf("fleetsim: two runs named %q", r.Name())
		}
		seen[r.Name()] = true
	}
	rows := chartRows(rs)
	var b bytes.Buffer
	if command != "" {
		comment(&b, "$ "+command)
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	title(&b, rs[0])
	for _, wr := range rows {
		wr.axisLabels(&b)
	}
	width := (plotRight - plotLeft - colGap*float64(len(rs)-1)) / float64(len(rs))
	for i, r := range rs {
		x0 := plotLeft + float64(i)*(width+colGap)
		columnHead(&b, x0, r)
		for _, wr := range rows {
			p := panel{row: wr, r: r, x0: x0, x1: x0 + width}
			p.draw(&b, i == 0)
		}
	}
	legend(&b)
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// chartRows lays out the two rows, each on a y scale shared by every run.
func chartRows(rs []Result) []row {
	var span time.Duration
	for _, r := range rs {
		span = max(span, r.Before+r.Outage+r.After)
		if n := len(r.hits); n > 0 {
			span = max(span, r.hits[n-1].at) // calls in flight at the end
		}
	}
	span = (span + fullBucket - 1) / fullBucket * fullBucket
	full := row{
		id: "full", top: 106, bottom: 276, from: 0, to: span, bucket: fullBucket, unit: time.Second,
		xLabel: "time since the start (s); bars of 100 ms", yLabel: "attempts per 100 ms",
	}
	zoom := row{
		id: "zoom", top: 356, bottom: 526, from: -zoomLead, to: zoomSpan, bucket: zoomBucket, unit: time.Millisecond,
		xLabel: "time since the outage began (ms); bars of 5 ms", yLabel: "attempts per 5 ms",
		fromOutage: true, markStopped: true,
		caption: fmt.Sprintf("The outage's first %v, where the runs differ", zoomSpan),
	}
	rows := []row{full, zoom}
	for i := range rows {
		var top int
		for _, r := range rs {
			ok, failed := rows[i].counts(r)
			for j := range ok {
				top = max(top, ok[j]+failed[j])
			}
		}
		rows[i].yMax = niceCeil(float64(top) * 1.08)
	}
	return rows
}

// counts counts r's attempts in the row's window per bucket: answered and
// failed.
func (w row) counts(r Result) (ok, failed []int) {
	n := int((w.to - w.from + w.bucket - 1) / w.bucket)
	ok, failed = make([]int, n), make([]int, n)
	from := w.origin(r) + w.from
	for _, h := range r.hits {
		if h.at < from || h.at >= from+time.Duration(n)*w.bucket {
			continue
		}
		i := int((h.at - from) / w.bucket)
		if h.ok {
			ok[i]++
		} else {
			failed[i]++
		}
	}
	return ok, failed
}

func (w row) axisLabels(b *bytes.Buffer) {
	mid := (w.top + w.bottom) / 2
	fmt.Fprintf(b, `<text x="20" y="%.1f" text-anchor="middle" transform="rotate(-90 20 %.1f)">`, mid, mid)
	xml.EscapeText(b, []byte(w.yLabel))
	b.WriteString("</text>\n")
	svgtext.Text(b, (plotLeft+plotRight)/2, w.bottom+40, "middle", "", w.xLabel)
	if w.caption != "" {
		svgtext.Text(b, plotLeft, w.top-10, "start", `font-weight="bold"`, w.caption)
	}
}

func title(b *bytes.Buffer, r Result) {
	svgtext.Text(b, plotLeft, 24, "start", `font-size="16" font-weight="bold"`, fmt.Sprintf(
		"Attempts at the funder: %d processes on local state, on fleet state, and 1 process",
		r.Processes))
	pace := fmt.Sprintf("every %v, in step", r.Pace)
	if r.Seed != 0 && r.Pace > 0 {
		pace = fmt.Sprintf("every %v-%v", r.Pace/2, r.Pace*3/2)
	}
	svgtext.Text(b, plotLeft, 44, "start", `fill="#444444"`, fmt.Sprintf(
		"%d workers in each run calling %s; funder up %v, down %v (503), up %v; breaker threshold 5, probe every %v; seed %d",
		r.Processes*r.Workers, pace, r.Before, r.Outage, r.After, grantretry.DefaultBreakerProbe, r.Seed))
}

// columnHead names a run and gives the numbers the chart shows.
func columnHead(b *bytes.Buffer, x float64, r Result) {
	var who string
	switch r.Name() {
	case "fleet":
		who = fmt.Sprintf("%d processes sharing the database", r.Processes)
	case "local":
		who = fmt.Sprintf("%d processes, each its own state", r.Processes)
	default:
		who = fmt.Sprintf("%d process, %d workers", r.Processes, r.Processes*r.Workers)
	}
	svgtext.Text(b, x, 68, "start", `font-weight="bold"`, r.Name()+": "+who)
	svgtext.Text(b, x, 83, "start", `font-size="10" fill="#555555"`, fmt.Sprintf("%d attempts in the outage", r.OutageAttempts))
	stopped := fmt.Sprintf("%d before all stopped, %s in", r.StoppedAfter, dur(r.AllStopped))
	if r.AllStopped < 0 {
		stopped = fmt.Sprintf("%d, and some process never stopped", r.StoppedAfter)
	}
	svgtext.Text(b, x, 96, "start", `font-size="10" fill="#555555"`, stopped)
}

// panel is one run's bars in one row.
type panel struct {
	row
	r      Result
	x0, x1 float64
}

func (p panel) x(rel time.Duration) float64 {
	return p.x0 + (p.x1-p.x0)*float64(rel-p.from)/float64(p.to-p.from)
}

func (p panel) y(v float64) float64 { return p.bottom - (p.bottom-p.top)*v/p.yMax }

// draw draws the panel; only the first column labels the y axis.
func (p panel) draw(b *bytes.Buffer, yTicks bool) {
	p.shade(b)
	p.grid(b, yTicks)
	p.bars(b)
	if p.markStopped {
		p.stopped(b)
	}
	fmt.Fprintf(b, `<path d="M%.1f %.1f V%.1f H%.1f" fill="none" stroke="#333333"/>`+"\n", p.x0, p.top, p.bottom, p.x1)
}

// shade greys the outage where it falls in the window.
func (p panel) shade(b *bytes.Buffer) {
	o := p.origin(p.r)
	from, to := max(p.r.Before-o, p.from), min(p.r.Before+p.r.Outage-o, p.to)
	if from >= to {
		return
	}
	x0, x1 := p.x(from), p.x(to)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" %s/>`+"\n", x0, p.top, x1-x0, p.bottom-p.top, outageFill)
	svgtext.Text(b, (x0+x1)/2, p.top+14, "middle", `fill="#555555"`, "outage")
}

func (p panel) grid(b *bytes.Buffer, yTicks bool) {
	yStep := max(svgtext.NiceStep(p.yMax, 5), 1) // counts
	for v := 0.0; v <= p.yMax+yStep/1e6; v += yStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6"/>`+"\n", p.x0, p.y(v), p.x1, p.y(v))
		if yTicks {
			svgtext.Text(b, p.x0-8, p.y(v)+4, "end", "", trimFloat(v))
		}
	}
	span := float64(p.to-p.from) / float64(p.unit)
	step := svgtext.NiceStep(span, 8)
	for v := math.Ceil(float64(p.from)/float64(p.unit)/step) * step; v <= float64(p.to)/float64(p.unit)+step/1e6; v += step {
		x := p.x(time.Duration(v * float64(p.unit)))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333333"/>`+"\n", x, p.bottom, x, p.bottom+5)
		svgtext.Text(b, x, p.bottom+19, "middle", "", trimFloat(v+0)) // +0: no "-0"
	}
}

// bars draws the buckets as two paths, answered and failed, the failed
// stacked on the answered. A bucket with any attempt is at least 1 unit
// tall, so that a lone probe shows on a scale of hundreds.
func (p panel) bars(b *bytes.Buffer) {
	ok, failed := p.counts(p.r)
	w := p.x(p.from+p.bucket) - p.x(p.from)
	var okPath, failedPath strings.Builder
	for i := range ok {
		x := p.x(p.from + time.Duration(i)*p.bucket)
		top := p.bottom
		if ok[i] > 0 {
			top = min(p.y(float64(ok[i])), p.bottom-1)
			fmt.Fprintf(&okPath, "M%.2f %.2fh%.2fV%.2fh%.2fz", x, top, w, p.bottom, -w)
		}
		if failed[i] > 0 {
			ftop := min(p.y(float64(ok[i]+failed[i])), top-1)
			fmt.Fprintf(&failedPath, "M%.2f %.2fh%.2fV%.2fh%.2fz", x, ftop, w, top, -w)
		}
	}
	for _, s := range []struct{ series, fill, d string }{
		{"ok", okFill, okPath.String()}, {"failed", failedFill, failedPath.String()},
	} {
		fmt.Fprintf(b, `<path id="%s-%s-%s" fill="%s" d="%s"/>`+"\n", p.r.Name(), p.id, s.series, s.fill, s.d)
	}
}

// stopped marks when every process was refusing calls, or says it is
// out of the window or never came.
func (p panel) stopped(b *bytes.Buffer) {
	small := `font-size="10" fill="#000000"`
	at := p.r.AllStopped
	switch {
	case at < 0:
		svgtext.Text(b, p.x1-4, p.top+30, "end", small, "some process never stopped")
	case at > p.to:
		svgtext.Text(b, p.x1-4, p.top+30, "end", small, fmt.Sprintf("all stopped after %s, past this window", dur(at)))
	default:
		x := p.x(at)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", x, p.top+22, x, p.bottom, stopStroke)
		anchor, dx := "start", 4.0
		if x > (p.x0+p.x1)/2 {
			anchor, dx = "end", -4
		}
		svgtext.Text(b, x+dx, p.top+30, anchor, small, "all stopped, "+dur(at))
	}
}

func legend(b *bytes.Buffer) {
	x := float64(plotLeft)
	item := func(swatch, label string, width float64) {
		b.WriteString(swatch)
		svgtext.Text(b, x+32, legendY, "start", "", label)
		x += width
	}
	item(fmt.Sprintf(`<rect x="%.1f" y="%d" width="24" height="12" fill="%s"/>`+"\n", x, legendY-10, okFill),
		"answered (201)", 150)
	item(fmt.Sprintf(`<rect x="%.1f" y="%d" width="24" height="12" fill="%s"/>`+"\n", x, legendY-10, failedFill),
		"failed (503), stacked above", 230)
	item(fmt.Sprintf(`<rect x="%.1f" y="%d" width="24" height="12" %s/>`+"\n", x, legendY-10, outageFill),
		"outage: every attempt 503", 215)
	item(fmt.Sprintf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" %s/>`+"\n", x, legendY-4, x+24, legendY-4, stopStroke),
		"every process refusing calls", 0)
	svgtext.Text(b, plotLeft, legendY+20, "start", `font-size="10" fill="#555555"`,
		"Attempts are what the funder received, retries and probes included. A bucket with any attempt is drawn at least 1 unit tall, so a lone probe shows.")
}

// comment writes s as an XML comment on a line of its own. XML forbids
// "--" inside a comment, so each is split by a space.
func comment(b *bytes.Buffer, s string) {
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "- -")
	}
	s = strings.TrimSuffix(s, "-")
	fmt.Fprintf(b, "<!-- %s -->\n", s)
}

// niceCeil rounds v up to a multiple of its nice step; at least 1.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	step := max(svgtext.NiceStep(v, 5), 1)
	return math.Ceil(v/step) * step
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
