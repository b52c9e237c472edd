package sim

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/grantretry/grantretry/internal/svgtext"
)

// Chart geometry, in SVG user units.
const (
	svgWidth, svgHeight = 980, 520
	plotLeft, plotRight = 70, 720
	plotTop, plotBottom = 104, 456
	// The recovery markers sit in a lane above the plot, one row per
	// policy, so that they read as moments on the time axis and not as
	// counts; markerTop is the top of the first row.
	markerTop, markerRow, markerSize = 56, 9, 8
	legendX                          = 745
)

// WriteSVG writes the chart: requests the funder received per simulated
// second, one line per policy, with the outage shaded and the capacity
// drawn dashed; a triangle in each policy's colour, above the plot, with
// a dotted line down to the time axis, marks where its recovery lag ends,
// and the legend gives its recovery lag and goodput. It is plain SVG
// 1.1 that any browser opens.
func (rep Report) WriteSVG(w io.Writer) error {
	c := newChart(rep)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	c.title(&b)
	c.outage(&b) // under everything else
	c.axes(&b)
	c.lines(&b)
	c.recoveries(&b)
	c.legend(&b)
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// chart maps a report's seconds and counts onto the plot area.
type chart struct {
	rep          Report
	runSec, yMax float64
}

func newChart(rep Report) chart {
	var top int64
	for _, r := range rep.Results {
		for _, n := range r.PerSecond {
			top = max(top, n)
		}
	}
	return chart{
		rep:    rep,
		runSec: math.Ceil(rep.Scenario.Run.Seconds()),
		yMax:   niceCeil(math.Max(float64(top), float64(rep.Scenario.Capacity)) * 1.08),
	}
}

func (c chart) x(sec float64) float64 { return plotLeft + (plotRight-plotLeft)*sec/c.runSec }
func (c chart) y(v float64) float64   { return plotBottom - (plotBottom-plotTop)*v/c.yMax }

func (c chart) title(b *bytes.Buffer) {
	s := c.rep.Scenario
	svgtext.Text(b, plotLeft, 24, "start", `font-size="16" font-weight="bold"`, "Requests per second at the funder, by retry policy")
	svgtext.Text(b, plotLeft, 44, "start", `fill="#444444"`, fmt.Sprintf(
		"%d workers at %.0f%% of a %d req/s capacity; full outage %v to %v; time scale %v; seed %d",
		s.Workers, 100*s.Load, s.Capacity, s.OutageStart, s.OutageEnd(), s.Scale, s.Seed))
}

func (c chart) outage(b *bytes.Buffer) {
	s := c.rep.Scenario
	x0, x1 := c.x(s.OutageStart.Seconds()), c.x(math.Min(s.OutageEnd().Seconds(), c.runSec))
	fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#d9d9d9" fill-opacity="0.6"/>`+"\n",
		x0, plotTop, x1-x0, plotBottom-plotTop)
	svgtext.Text(b, (x0+x1)/2, plotTop+16, "middle", `fill="#555555"`, "outage: every request answered 503")
}

// axes draws the grid, the ticks, the axes and their labels, and the
// capacity line.
func (c chart) axes(b *bytes.Buffer) {
	yStep := svgtext.NiceStep(c.yMax, 6)
	for v := 0.0; v <= c.yMax+yStep/1e6; v += yStep {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/>`+"\n", plotLeft, c.y(v), plotRight, c.y(v))
		svgtext.Text(b, plotLeft-8, c.y(v)+4, "end", "", trimFloat(v))
	}
	xStep := svgtext.NiceStep(c.runSec, 8)
	for v := 0.0; v <= c.runSec+xStep/1e6; v += xStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/>`+"\n", c.x(v), plotBottom, c.x(v), plotBottom+5)
		svgtext.Text(b, c.x(v), plotBottom+19, "middle", "", trimFloat(v))
	}
	fmt.Fprintf(b, `<path d="M%d %d V%d H%d" fill="none" stroke="#333333"/>`+"\n", plotLeft, plotTop, plotBottom, plotRight)
	svgtext.Text(b, (plotLeft+plotRight)/2, plotBottom+42, "middle", "", "simulated time (s)")
	fmt.Fprintf(b, `<text x="20" y="%d" text-anchor="middle" transform="rotate(-90 20 %d)">requests received per simulated second</text>`+"\n",
		(plotTop+plotBottom)/2, (plotTop+plotBottom)/2)
	capY := c.y(float64(c.rep.Scenario.Capacity))
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" %s/>`+"\n", plotLeft, capY, plotRight, capY, capacityStroke)
}

// capacityStroke draws the capacity line, in the plot and in the legend.
const capacityStroke = `stroke="#000000" stroke-width="1.2" stroke-dasharray="6 4"`

// lines draws one line per policy, each second's count at its middle.
func (c chart) lines(b *bytes.Buffer) {
	for _, r := range c.rep.Results {
		pts := make([]string, len(r.PerSecond))
		for sec, n := range r.PerSecond {
			pts[sec] = fmt.Sprintf("%.1f,%.1f", c.x(float64(sec)+0.5), c.y(float64(n)))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" points="%s"/>`+"\n",
			colorOf(r.Policy), strokeOf(r.Policy), strings.Join(pts, " "))
	}
}

// recoveries marks, for each policy that recovered, the start of the
// window that ended its recovery lag: a triangle pointing down at it from
// the lane above the plot, one row per policy so that equal lags do not
// hide each other, and a dotted line from it down to the time axis.
func (c chart) recoveries(b *bytes.Buffer) {
	end := c.rep.Scenario.OutageEnd()
	marked := false
	for i, r := range c.rep.Results {
		if !r.Recovered {
			continue
		}
		sec := (end + r.RecoveryLag).Seconds()
		if sec > c.runSec {
			continue
		}
		x, tip := c.x(sec), float64(markerTop+markerRow*i+markerSize)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%d" stroke="%s" stroke-width="1" stroke-dasharray="1 3"/>`+"\n",
			x, tip, x, plotBottom, colorOf(r.Policy))
		svgtext.Marker(b, x, tip, markerSize, colorOf(r.Policy))
		marked = true
	}
	if marked {
		svgtext.Text(b, plotLeft-8, markerTop+markerSize, "end", `font-size="10" fill="#555555"`, "recovered")
	}
}

func (c chart) legend(b *bytes.Buffer) {
	s := c.rep.Scenario
	y := float64(plotTop + 8)
	svgtext.Text(b, legendX, y, "start", `font-weight="bold"`, "policy")
	for _, r := range c.rep.Results {
		y += 22
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="%s"/>`+"\n",
			legendX, y-4, legendX+24, y-4, colorOf(r.Policy), strokeOf(r.Policy))
		svgtext.Text(b, legendX+32, y, "start", "", r.Policy.Name)
		y += 14
		svgtext.Text(b, legendX+32, y, "start", `font-size="10" fill="#555555"`, fmt.Sprintf(
			"lag %s · %s/min · 1st min %s", fmtLag(r), fmtPerMinute(r.Goodput), fmtPerMinute(r.GoodputAfterRecovery)))
	}
	y += 30
	svgtext.Marker(b, legendX+12, y, markerSize, "#777777")
	svgtext.Text(b, legendX+32, y, "start", "", "recovered: 90% of offered")
	y += 14
	svgtext.Text(b, legendX+32, y, "start", `font-size="10" fill="#555555"`, "load succeeds in one second")
	y += 16
	svgtext.Text(b, legendX+32, y, "start", `font-size="10" fill="#555555"`, "lag: recovery lag; /min: goodput")
	y += 14
	svgtext.Text(b, legendX+32, y, "start", `font-size="10" fill="#555555"`, "over the run, then 1st min after")
	y += 22
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" %s/>`+"\n", legendX, y-4, legendX+24, y-4, capacityStroke)
	svgtext.Text(b, legendX+32, y, "start", "", fmt.Sprintf("capacity, %d req/s", s.Capacity))
	y += 22
	fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="24" height="12" fill="#d9d9d9" fill-opacity="0.6"/>`+"\n", legendX, y-10)
	svgtext.Text(b, legendX+32, y, "start", "", fmt.Sprintf("outage, %v", s.Outage))
}

// colorOf gives each policy a fixed colour from the Okabe-Ito palette,
// which colour-blind readers can tell apart, so charts of different runs
// agree.
func colorOf(p Policy) string {
	switch p.ID {
	case "naive":
		return "#D55E00"
	case "exponential":
		return "#E69F00"
	case "jitter":
		return "#CC79A7"
	case "throttle":
		return "#009E73"
	case "default":
		return "#0072B2"
	}
	return "#000000"
}

func strokeOf(p Policy) string {
	if p.ID == "default" {
		return "2.6"
	}
	return "1.6"
}

// niceCeil rounds v up to a multiple of its nice step.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	step := svgtext.NiceStep(v, 6)
	return math.Ceil(v/step) * step
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
