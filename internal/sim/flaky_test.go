package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
)

// The flaky funder fails the first FailFirst attempts of each call, told
// apart by X-Correlation-ID, and no other request.
func TestFlakyFunderFailsEachCallsFirstAttempts(t *testing.T) {
	sc := FlakyDefault()
	f := newFunder(sc, simClock{start: time.Now(), scale: sc.Scale})
	var got []bool
	for _, corr := range []string{"a", "a", "b", "a", "b", "b", "a"} {
		got = append(got, f.fault(time.Second, corr, false, "APP-1"))
	}
	want := []bool{true, true, true, false, true, false, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("503s %v, want %v (a, a, b, a, b, b, a)", got, want)
		}
	}
	sc.FailFirst = 0
	f = newFunder(sc, simClock{start: time.Now(), scale: sc.Scale})
	if f.fault(time.Second, "a", false, "APP-1") {
		t.Error("FailFirst 0 failed a request")
	}
}

func TestValidateFlaky(t *testing.T) {
	if err := FlakyDefault().Validate(); err != nil {
		t.Fatalf("FlakyDefault: %v", err)
	}
	for name, mut := range map[string]func(*Scenario){
		"no failures":               func(s *Scenario) { s.FailFirst = 0 },
		"negative failures":         func(s *Scenario) { s.FailFirst = -1 },
		"an outage past the run":    func(s *Scenario) { s.Outage = 3 * time.Minute },
		"negative fail-first (all)": func(s *Scenario) { *s = Default(); s.FailFirst = -2 },
	} {
		s := FlakyDefault()
		mut(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	if _, err := RunFlaky(context.Background(), Default(), Policies()[2:], nil); err == nil {
		t.Error("RunFlaky ran the outage scenario")
	}
	naive, _ := Lookup([]string{"naive"})
	if _, err := RunFlaky(context.Background(), FlakyDefault(), naive, nil); err == nil {
		t.Error("RunFlaky ran a policy that sends no X-Correlation-ID")
	}
}

// A short run against the flaky funder: without a throttle every call
// succeeds on its third attempt; with the default throttle and breaker,
// almost none does.
func TestShortFlakyRun(t *testing.T) {
	sc := FlakyDefault()
	sc.Run = 40 * time.Second
	ps, err := Lookup([]string{"jitter", "default"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := RunFlaky(context.Background(), sc, ps, nil)
	if err != nil {
		t.Fatal(err)
	}
	jitter, def := rs[0], rs[1]
	if jitter.Calls == 0 || jitter.Dispositions[grantretry.Succeeded] != jitter.Calls || jitter.Requests != int64(3*jitter.Calls) || jitter.Recorded != jitter.Calls {
		t.Errorf("jitter: %d calls, %v, %d requests, %d recorded; want every call to succeed in 3 requests", jitter.Calls, jitter.Dispositions, jitter.Requests, jitter.Recorded)
	}
	if ok := def.Dispositions[grantretry.Succeeded]; def.Calls == 0 || ok > def.Calls/10 || def.Dispositions[grantretry.CircuitOpen] == 0 || def.Throttled == 0 {
		t.Errorf("default: %d calls, %v, %d throttled; want few successes, some retry_throttled and circuit_open", def.Calls, def.Dispositions, def.Throttled)
	}

	rep := FlakyReport{Scenario: sc, Results: rs, Command: "go run ./cmd/grantretry sim -scenario flaky"}
	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if utf8.RuneCountInString(line) > TextWidth {
			t.Errorf("text line wider than %d: %q", TextWidth, line)
		}
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first 2 attempts of every call 503", "| full jitter, no throttle |", "| recorded |", "```sh\ngo run ./cmd/grantretry sim -scenario flaky\n```"} {
		if !strings.Contains(text.String()+md.String(), want) {
			t.Errorf("reports lack %q:\n%s\n%s", want, &text, &md)
		}
	}
	if err := rep.WriteSVG(&bytes.Buffer{}); err == nil {
		t.Error("WriteSVG drew a chart")
	}
}
