package operator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A -rate the pacer cannot keep (its interval does not fit a
// time.Duration, or is under a nanosecond) is refused, not taken as no
// pacing.
func TestParseRateRefusesARateThePacerCannotKeep(t *testing.T) {
	for _, bad := range []string{"1e-10", "0.0000000001/s", "1e-320/h", "4.9e-324", "2e9/s", "1e300"} {
		if r, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", bad, float64(r))
		}
	}
	for _, ok := range []string{"1e9/s", "1e-9", "1/h"} {
		r, err := ParseRate(ok)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", ok, err)
			continue
		}
		if p := NewPacer(r); p == nil || p.interval <= 0 {
			t.Errorf("ParseRate(%q) = %v: its pacer does not pace", ok, float64(r))
		}
	}
	if err := new(Rate).Set("1e-10"); err == nil {
		t.Error("-rate 1e-10 set")
	}
}

// -deadline and -timeout are bounded, so that each letter's bound
// (LetterTimeout) cannot overflow.
func TestRedeliverFlagsCheckBoundsDeadlineAndTimeout(t *testing.T) {
	for _, args := range [][]string{{"-deadline", "2500000h"}, {"-deadline", "25h"}, {"-timeout", "25h"}, {"-deadline", "2500000h", "-timeout", "2500000h"}} {
		f := parseRedeliver(t, append([]string{"-all"}, args...)...)
		err := f.Check(nil)
		var uerr UsageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), "want at most 24h0m0s") {
			t.Errorf("%q: Check = %v, want a usage error saying at most 24h (LetterTimeout %v)", args, err, f.LetterTimeout())
		}
	}
	f := parseRedeliver(t, "-all", "-deadline", "24h")
	if err := f.Check(nil); err != nil || f.LetterTimeout() != 30*time.Hour {
		t.Errorf("-deadline 24h: %v, LetterTimeout %v; want it taken, 30h", err, f.LetterTimeout())
	}
}

// LAST ANSWER shows a letter's error without the library's prefix.
func TestLastAnswerDropsTheLibraryPrefix(t *testing.T) {
	l := &grantretry.Letter{LastError: "grantretry: dial tcp 10.0.0.1:443: connect: connection refused"}
	if got, want := LastAnswer(l), "dial tcp 10.0.0.1:443: connect: conne..."; got != want {
		t.Errorf("LastAnswer = %q, want %q", got, want)
	}
	l.LastError = "grantretry: timeout"
	if got := LastAnswer(l); got != "timeout" {
		t.Errorf("LastAnswer = %q, want %q", got, "timeout")
	}
}
