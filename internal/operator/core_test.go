package operator

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

func TestParseRateReadsPerSecondMinuteAndHour(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
	}{{"200/s", 200}, {"200", 200}, {"30/m", 0.5}, {"3600/h", 1}, {"0.5", 0.5}, {" 12/s ", 12}} {
		if got, err := ParseRate(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "0", "0/s", "-5/s", "fast", "10/d", "NaN", "Inf/s", "/s"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) succeeded, want an error", bad)
		}
	}
}

// parseRedeliver registers the flags on a new set and parses args.
func parseRedeliver(t *testing.T, args ...string) *RedeliverFlags {
	t.Helper()
	fs := flag.NewFlagSet("redeliver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f RedeliverFlags
	f.Register(fs, "in DIR")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return &f
}

func TestRedeliverFlagsCheckRefusesARunThatCannotBe(t *testing.T) {
	for _, tc := range []struct {
		ids  []string
		args []string
		want string
	}{
		{nil, nil, "letter ids or -all"},
		{[]string{"L-a"}, []string{"-all"}, "letter ids or -all"},
		{[]string{"L-a"}, []string{"-submission", "S"}, "letter ids or -all"},
		{nil, []string{"-all", "-early"}, "-early sends the letters named"},
		{nil, []string{"-submission", "S", "-early"}, "-early sends the letters named"},
		{nil, []string{"-all", "-concurrency", "0"}, "-concurrency 0"},
		{nil, []string{"-all", "-budget", "-1"}, "-budget -1"},
		{nil, []string{"-all", "-deadline", "0s"}, "-deadline 0s"},
		{nil, []string{"-all", "-timeout", "0s"}, "-timeout 0s"},
		{nil, []string{"-all", "-deadline", "2m", "-timeout", "1m"}, "-deadline 2m0s is longer than -timeout 1m0s"},
		{nil, []string{"-all", "-header", "Idempotency-Key: k"}, "comes from the letter"},
	} {
		err := parseRedeliver(t, tc.args...).Check(tc.ids)
		var uerr UsageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), tc.want) || ExitCode(err) != ExitUsage {
			t.Errorf("%q %q: %v; want a UsageError saying %q", tc.ids, tc.args, err, tc.want)
		}
	}
	for _, args := range [][]string{{"-all"}, {"-submission", "S"}, {"-all", "-submission", "S"}, {"-all", "-deadline", "1m", "-timeout", "1m"}} {
		if err := parseRedeliver(t, args...).Check(nil); err != nil {
			t.Errorf("%q: %v, want no error", args, err)
		}
	}
	for _, bad := range []string{"0/s", "fast", "-3"} {
		fs := flag.NewFlagSet("redeliver", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f RedeliverFlags
		f.Register(fs, "in DIR")
		if err := fs.Parse([]string{"-rate", bad}); err == nil {
			t.Errorf("-rate %s parsed", bad)
		}
	}
}

func TestRedeliverFlagsCheckRefusesAnUnreadableRulesFileAsUsage(t *testing.T) {
	f := parseRedeliver(t, "-all", "-rules", "/nonexistent/rules.json")
	err := f.Check(nil)
	var uerr UsageError
	if !errors.As(err, &uerr) || !strings.HasPrefix(err.Error(), "-rules: rules file /nonexistent/rules.json: ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check with a missing -rules file: %v; want a usage error (nothing sent) starting -rules:, without the library's prefix", err)
	}
}

// Each letter's bound is -timeout, or, given -deadline alone, the deadline
// and a quarter more.
func TestLetterTimeoutFollowsTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, DefaultTimeout},
		{[]string{"-deadline", "4m"}, 5 * time.Minute},
		{[]string{"-timeout", "30s"}, 30 * time.Second},
		{[]string{"-deadline", "20s", "-timeout", "30s"}, 30 * time.Second},
	} {
		f := parseRedeliver(t, append([]string{"-all"}, tc.args...)...)
		if err := f.Check(nil); err != nil {
			t.Fatal(err)
		}
		if got := f.LetterTimeout(); got != tc.want {
			t.Errorf("%q: LetterTimeout %v, want %v", tc.args, got, tc.want)
		}
	}
	f := parseRedeliver(t, "-all")
	if f.Budget != grantretry.DefaultMaxRetries || f.Deadline != grantretry.DefaultDeadline || f.Concurrency != 1 || f.Rate != 0 {
		t.Errorf("defaults: budget %d, deadline %v, concurrency %d, rate %v", f.Budget, f.Deadline, f.Concurrency, f.Rate)
	}
}

func TestExitCodeMapsErrors(t *testing.T) {
	if ExitCode(nil) != ExitOK || ExitCode(errors.New("x")) != ExitFailure || ExitCode(UsageError{errors.New("x")}) != ExitUsage ||
		ExitCode(errors.Join(errors.New("y"), UsageError{errors.New("x")})) != ExitUsage {
		t.Error("ExitCode: want 0 for nil, 2 for a UsageError, 1 for any other")
	}
}

// The summary's words, as the design gives them, and the lines of zero
// left out but delivered's.
func TestSummaryWordsAndOmitsZeroLines(t *testing.T) {
	s := Summary{Waiting: 1000, Selected: 700, Sent: 700,
		Delivered: 690, DeliveredBy: map[string]int{"answered 201 Created": 680, "reconciled": 10},
		NotDelivered: 10, NotDeliveredBy: map[string]int{"answered 503 Service Unavailable": 10},
		LeftRefused: 100, LeftNotDue: 100, NextDue: time.Date(2026, 12, 5, 0, 12, 0, 0, time.UTC),
		LeftLate: 50, LeftAmbiguous: 50, LeftElsewhere: 3}
	var b bytes.Buffer
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := `summary: 1000 letters waiting, 700 selected, 700 sent
  delivered: 690 (answered 201 Created: 680; reconciled: 10)
  not delivered: 10 (answered 503 Service Unavailable: 10)
  left, refused: 100 (the funder refused them; -include-refused sends them, or retire them)
  left, not due: 100 (the next is due at 2026-12-05T00:12:00Z)
  left, late: 50 (they missed their closing time; -late sends them if the funder agreed)
  left, ambiguous: 50 (ask the funder first, or -trust-key if it honours Idempotency-Key)
  left, another's: 3 (another process or worker holds them, or they left since listed)
`
	if b.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	(&Summary{Waiting: 1, Stopped: "interrupt (SIGINT)", NotTried: 1, Selected: 1}).Write(&b)
	if want := "summary: 1 letter waiting, 1 selected, 0 sent\n  delivered: 0\n  not tried: 1\n  stopped: interrupt (SIGINT); the letters not tried stay waiting\n"; b.String() != want {
		t.Errorf("stopped summary:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	(&Summary{DryRun: true, Waiting: 2, Selected: 2, Sent: 2}).Write(&b)
	if want := "summary: 2 letters waiting, 2 selected, 2 planned\n"; b.String() != want {
		t.Errorf("dry run summary:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The pacer spaces starts by 1/rate, and a wait ends with its context.
func TestPacerSpacesStartsAndStopsWithTheContext(t *testing.T) {
	if p := NewPacer(0); p != nil || p.Wait(context.Background()) != nil {
		t.Error("a pacer of rate 0 waits")
	}
	p := NewPacer(20) // a start every 50ms
	start := time.Now()
	for range 3 {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("three starts at 20/s took %v, want at least 100ms", took)
	}
	slow := NewPacer(0.1) // a start every 10s
	slow.Wait(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := slow.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("a wait whose context ended: %v after %v, want the context's error at once", err, time.Since(start))
	}
}
