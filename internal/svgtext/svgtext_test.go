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
