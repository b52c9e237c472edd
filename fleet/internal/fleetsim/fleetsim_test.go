package fleetsim

import (
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	s := time.Second
	cfg := Config{Processes: 2, Workers: 1, Before: s, Outage: 4 * s, After: s}
	hits := []hit{
		{at: 1100 * time.Millisecond, proc: 0}, {at: 1200 * time.Millisecond, proc: 1}, // before all stopped
		{at: 3 * s, proc: 1},                             // a probe
		{at: 5100 * time.Millisecond, proc: 0, ok: true}, // the first success
		{at: 5300 * time.Millisecond, proc: 1, ok: true},
	}
	calls := [][]call{
		{{start: 1100 * time.Millisecond, attempts: 3}, {start: 1300 * time.Millisecond, stopped: true}},
		{{start: 1200 * time.Millisecond, attempts: 1}, {start: 1500 * time.Millisecond, stopped: true}},
	}
	r := measure(cfg, hits, calls)
	if r.StoppedAfter != 2 || r.AllStopped != 500*time.Millisecond || r.OutageAttempts != 3 || r.OutageRetries != 2 {
		t.Fatalf("%+v", r)
	}
	if r.MaxResume != 200*time.Millisecond || r.ProcessesResumed != 2 || r.FirstProbeOK != 100*time.Millisecond {
		t.Fatalf("%+v", r)
	}
	// One probe in 3.5 s after all stopped: 1 / (3.5 / 2).
	if got := r.ProbesPerProbe; got < 0.57 || got > 0.58 {
		t.Fatalf("probes per interval %v", got)
	}
	if cs := Targets(r, Result{OutageRetries: 2}); !cs[0].Met || !cs[1].Met || !cs[2].Met || !cs[3].Info {
		t.Fatalf("%+v", cs)
	}
	// Without breakers, the retries are the one target.
	r.NoBreaker = true
	for _, tc := range []struct {
		single int
		met    bool
	}{{2, true}, {1, false}} {
		cs := Targets(r, Result{OutageRetries: tc.single})
		if len(cs) != 1 || cs[0].Info || cs[0].Met != tc.met {
			t.Fatalf("2 retries vs %d without breakers: %+v", tc.single, cs)
		}
	}
}
