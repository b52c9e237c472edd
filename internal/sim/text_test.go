package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
)

// checkWidth fails for every line of text wider than TextWidth.
func checkWidth(t *testing.T, name, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > TextWidth {
			t.Errorf("%s: a line of %d columns: %q", name, n, line)
		}
	}
}

// The terminal text of every policy's run, one of them distorted, fits
// in 100 columns; the Markdown keeps every column.
func TestTextFitsTheTerminal(t *testing.T) {
	sc := shortScenario()
	rs := fakeResults(sc)
	for i := range rs {
		rs[i].PeakSecond, rs[i].Recovered, rs[i].RecoveryLag = 40, true, 65*time.Second+300*time.Millisecond
		rs[i].P50, rs[i].P99 = 1*time.Minute+5300*time.Millisecond, 12*time.Minute+700*time.Millisecond
		rs[i].Dispositions[grantretry.CircuitOpen] = 123456
	}
	rs[0].wantEarly, rs[0].EarlyCalls = 1000, 10 // far behind its time scale
	rep := Report{Scenario: sc, Results: rs}
	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, "outage", text.String())
	for _, want := range []string{"amplif.", "goodput/min", "-md FILE", "Warning: the machine did not keep up", "distorted: no verdict"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| goodput/min 1st min after recovery |") {
		t.Errorf("the Markdown lost a column:\n%s", md.String())
	}

	lv := LowVolumeDefault()
	lv.Seeds = 20
	var lrs []LowVolumeResult
	for _, id := range []string{"jitter", "throttle", "default"} {
		p, _ := lookup(id)
		runs := make([]LowVolumeRun, lv.Seeds)
		for i := range runs {
			runs[i] = LowVolumeRun{Seed: uint64(i + 1), Met: 310, Refused: i % 3, AfterBlip: 5828, Probes: make([]ProbeOutcome, len(lv.Probes)), pace: 1}
			for j := range runs[i].Probes {
				runs[i].Probes[j] = []ProbeOutcome{ProbeRetried, ProbeRefused, ProbeBreaker, ProbeRetried}[(i+j)%4]
			}
		}
		lrs = append(lrs, LowVolumeResult{Policy: p, Runs: runs})
	}
	text.Reset()
	if err := (LowVolumeReport{Scenario: lv, Results: lrs}).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, "low-volume", text.String())
	if !strings.Contains(text.String(), "Probes: a call failing") {
		t.Errorf("text lacks the probes:\n%s", text.String())
	}
}

// A check on a run that fell behind its time scale has no verdict, met
// or not; the others keep theirs.
func TestDistortedRunGetsNoVerdict(t *testing.T) {
	mk := func(id string, reqs int64, early int) Result {
		p, _ := lookup(id)
		return Result{Policy: p, Capacity: 10, OutageCalls: 10, OutageRequests: reqs, PeakAfterRecovery: 5, PeakSecond: 1,
			Recovered: true, RecoveryLag: time.Second, EarlyCalls: early, wantEarly: 100}
	}
	rs := []Result{mk("naive", 40, 100), mk("default", 11, 50)}
	checks := append(Targets(rs), RecoveryTargets(Default(), rs)...)
	want := []string{"met", "distorted: no verdict", "distorted: no verdict", "distorted: no verdict"}
	if len(checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.Verdict() != want[i] {
			t.Errorf("check %q: %q, want %q", c.Text, c.Verdict(), want[i])
		}
	}
	var text bytes.Buffer
	if err := (Report{Scenario: Default(), Results: rs}).WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if strings.Contains(line, "grantretry defaults:") && !strings.Contains(line, "distorted: no verdict") {
			t.Errorf("a verdict on the distorted run: %q", line)
		}
	}
	if (Check{Met: true}).Verdict() != "met" || (Check{}).Verdict() != "NOT MET" {
		t.Error("undistorted verdicts changed")
	}

	lv := LowVolumeResult{Policy: rs[1].Policy, Runs: []LowVolumeRun{{Met: 10, pace: 1}, {Met: 10, pace: 0.5}}}
	for _, c := range LowVolumeTargets(Scenario{}, []LowVolumeResult{lv}) {
		if !c.Distorted {
			t.Errorf("low-volume check %q on a distorted seed has a verdict", c.Text)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("one two three four\n  five six seven", 10, 4)
	want := "one two\n    three\n    four\n  five six\n    seven"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := wrap("averyveryverylongword x", 5, 1); got != "averyveryverylongword\n x" {
		t.Errorf("long word: %q", got)
	}
}
