// Package svgtext holds the two pieces the simulators' SVG charts share
// (internal/sim and fleet's fleetsim): an escaped text element and the
// step of an axis's ticks.
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
