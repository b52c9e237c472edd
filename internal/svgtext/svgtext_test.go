package svgtext

import (
	"bytes"
	"testing"
)

func TestText(t *testing.T) {
	var b bytes.Buffer
	Text(&b, 1, 2.25, "end", `font-size="9"`, "a<b & c")
	want := `<text x="1.0" y="2.2" text-anchor="end" font-size="9">a&lt;b &amp; c</text>` + "\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct {
		span float64
		n    int
		want float64
	}{{0, 5, 1}, {10, 5, 2}, {7, 5, 2}, {30, 6, 5}, {900, 5, 200}, {0.3, 3, 0.1}} {
		if got := NiceStep(tc.span, tc.n); got < tc.want*0.999 || got > tc.want*1.001 {
			t.Errorf("NiceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
		}
	}
}

// A marker is a closed triangle whose tip is the point given, below its
// base: it points down at the moment it marks.
func TestMarker(t *testing.T) {
	var b bytes.Buffer
	Marker(&b, 10, 20, 8, "#0072B2")
	want := `<path d="M6.0 12.0 L14.0 12.0 L10.0 20.0 Z" fill="#0072B2" stroke="#333333" stroke-width="0.8"/>` + "\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
