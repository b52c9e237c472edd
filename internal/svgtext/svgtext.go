// Package svgtext holds the pieces the simulators' SVG charts share
// (internal/sim and fleet's fleetsim): an escaped text element, the step
// of an axis's ticks, and a marker for a moment on the time axis.
package svgtext

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
)

// Text writes one escaped <text> element; attrs are extra attributes.
func Text(b *bytes.Buffer, x, y float64, anchor, attrs, s string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s"`, x, y, anchor)
	if attrs != "" {
		b.WriteString(" " + attrs)
	}
	b.WriteString(">")
	xml.EscapeText(b, []byte(s))
	b.WriteString("</text>\n")
}

// NiceStep returns a step of 1, 2 or 5 times a power of ten that cuts span
// into about n parts.
func NiceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	}
	return 10 * mag
}

// Marker writes a triangle pointing down, its tip at (x, tipY), size
// units wide and tall, filled with fill and outlined in dark grey: a mark
// on a moment of a chart's time axis that no data point looks like.
func Marker(b *bytes.Buffer, x, tipY, size float64, fill string) {
	h := size / 2
	fmt.Fprintf(b, `<path d="M%.1f %.1f L%.1f %.1f L%.1f %.1f Z" fill="%s" stroke="#333333" stroke-width="0.8"/>`+"\n",
		x-h, tipY-size, x+h, tipY-size, x, tipY, fill)
}
