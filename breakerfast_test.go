package grantretry

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// newTestBreaker is one host's breaker on a fake clock.
func newTestBreaker(threshold uint32) (*hostBreaker, *fakeClock) {
	clk := newFakeClock()
	cfg := defaultConfig()
	cfg.clock = clk
	cfg.threshold = threshold
	return newHostBreaker("funder.example", &cfg), clk
}

// A closed breaker's attempts take the spell's report, not gobreaker's
// permit: successes reach gobreaker only to reset a counted failure.
func TestClosedBreakerAsksGobreakerOnlyAfterAFailure(t *testing.T) {
	hb, _ := newTestBreaker(3)
	give := func(err error) {
		t.Helper()
		done, probe, aerr := hb.allow()
		if aerr != nil || probe {
			t.Fatalf("allow: probe %v, err %v; want a plain permit", probe, aerr)
		}
		done(err)
	}
	for range 5 {
		give(nil)
		give(errBreakerExcluded)
	}
	if n := hb.cb.Counts().Requests; n != 0 {
		t.Fatalf("gobreaker saw %d requests for successes and exclusions alone, want 0", n)
	}
	give(errBreakerFailure)
	give(errBreakerFailure)
	give(nil) // resets the count: two more failures must not open it
	give(errBreakerFailure)
	give(errBreakerFailure)
	if c := hb.cb.Counts(); c.ConsecutiveFailures != 2 || hb.state() != gobreaker.StateClosed {
		t.Fatalf("after fail, fail, ok, fail, fail: %d consecutive failures, %v; want 2, closed", c.ConsecutiveFailures, hb.state())
	}
	give(errBreakerFailure)
	if hb.state() != gobreaker.StateOpen {
		t.Fatalf("the third failure in a row left the breaker %v, want open", hb.state())
	}
}

// A report from an attempt allowed before the breaker opened is dropped
// once it has closed again, as gobreaker drops a report from another
// generation: it cannot count towards the next outage.
func TestStaleClosedReportIsDropped(t *testing.T) {
	hb, clk := newTestBreaker(2)
	stale, _, _ := hb.allow()
	for range 2 {
		done, _, _ := hb.allow()
		done(errBreakerFailure)
	}
	if hb.state() != gobreaker.StateOpen {
		t.Fatalf("breaker %v after 2 failures, want open", hb.state())
	}
	hb.settleIfUnset() // the probe's time is drawn from now
	clk.advance(DefaultBreakerProbe)
	time.Sleep(2 * time.Nanosecond) // gobreaker's own timeout, of 1 ns, on real time
	probeDone, probe, err := hb.allow()
	if err != nil || !probe {
		t.Fatalf("after the probe wait: probe %v, err %v; want the probe", probe, err)
	}
	probeDone(nil)
	if hb.state() != gobreaker.StateClosed {
		t.Fatalf("breaker %v after a good probe, want closed", hb.state())
	}
	stale(errBreakerFailure)
	if c := hb.cb.Counts(); c.ConsecutiveFailures != 0 {
		t.Fatalf("a report from before the outage counted: %d consecutive failures, want 0", c.ConsecutiveFailures)
	}
}

// Against a model of the closed state (a failure counts, a success resets,
// an exclusion does nothing, threshold in a row opens), with permits held
// and reported out of order: gobreaker's count and the state agree with
// the model after every report.
func TestClosedBreakerMatchesModel(t *testing.T) {
	const threshold = 4
	r := rand.New(rand.NewPCG(1, 2))
	results := []error{nil, errBreakerFailure, errBreakerExcluded}
	for run := range 200 {
		hb, _ := newTestBreaker(threshold)
		model := 0
		var held []func(error)
		for step := 0; model < threshold && step < 200; step++ {
			if len(held) < 3 && r.IntN(2) == 0 {
				done, _, err := hb.allow()
				if err != nil {
					t.Fatalf("run %d step %d: refused while the model is closed (%d failures)", run, step, model)
				}
				held = append(held, done)
				continue
			}
			if len(held) == 0 {
				continue
			}
			i := r.IntN(len(held))
			done := held[i]
			held = append(held[:i], held[i+1:]...)
			res := results[r.IntN(len(results))]
			done(res)
			switch res {
			case nil:
				model = 0
			case errBreakerFailure:
				model++
			}
			open := hb.state() == gobreaker.StateOpen
			if open != (model >= threshold) {
				t.Fatalf("run %d step %d: breaker open %v, model has %d failures in a row", run, step, open, model)
			}
			if !open && int(hb.cb.Counts().ConsecutiveFailures) != model {
				t.Fatalf("run %d step %d: gobreaker counts %d failures in a row, model %d", run, step, hb.cb.Counts().ConsecutiveFailures, model)
			}
		}
	}
}

// Concurrent attempts on a closed breaker: under -race, no data race, and
// once every attempt has reported and the last reports are successes, no
// failure is left counted.
func TestClosedBreakerConcurrent(t *testing.T) {
	hb, _ := newTestBreaker(1 << 30)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				done, _, err := hb.allow()
				if err != nil {
					t.Errorf("refused: %v", err)
					return
				}
				if (i+g)%3 == 0 {
					done(errBreakerFailure)
				} else {
					done(nil)
				}
			}
		}()
	}
	wg.Wait()
	done, _, _ := hb.allow()
	done(nil)
	if c := hb.cb.Counts(); c.ConsecutiveFailures != 0 {
		t.Fatalf("%d failures still counted after a success reported last", c.ConsecutiveFailures)
	}
}
