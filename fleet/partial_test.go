package fleet

import (
	"context"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// budgetEvent is one call's end in a process: a success, or a transient
// failure and the fleet's answer whether to retry it.
type budgetEvent struct {
	at    time.Time
	ok    bool
	retry bool
}

// singleThrottle replays events in the order they happened through one
// gRFC A6 bucket that has every success at once, as a single process's
// throttle does (grantretry's, without the time refill: the test's hour
// adds well under a token), and returns the share of the failures from
// from on that it would have let retry.
func singleThrottle(events []budgetEvent, p grantretry.FleetPolicy, from time.Time) float64 {
	tokens := p.MaxTokens
	var failures, retries int
	for _, e := range events {
		if e.ok {
			tokens = min(p.MaxTokens, tokens+p.TokenRatio)
			continue
		}
		tokens = max(tokens-1, 0)
		if e.at.Before(from) {
			continue
		}
		failures++
		if tokens > p.MaxTokens/2 {
			retries++
		}
	}
	return float64(retries) / float64(failures)
}

// budgetRun runs procs processes against one host for d, each ending
// rate calls a second at Poisson times, each call failing with
// probability fail, and returns every call's end in time order. Each
// process has a pool and a Coordinator of its own, depositing once a
// second as in production.
func budgetRun(t testing.TB, cfg *pgxpool.Config, procs int, rate, fail float64, d time.Duration, p grantretry.FleetPolicy) []budgetEvent {
	var mu sync.Mutex
	var events []budgetEvent
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := range procs {
		cfg := cfg.Copy()
		cfg.MaxConns = 2
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		co := NewCoordinator(pool)
		defer co.Close()
		h := co.Host(coordKey, p)
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := time.Now(); ; {
				next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
				if next.After(end) {
					return
				}
				time.Sleep(time.Until(next))
				e := budgetEvent{ok: rng.Float64() >= fail}
				if e.ok {
					h.Succeeded()
				} else {
					e.retry, err = h.Failed(context.Background(), grantretry.FleetFailure{CallFailed: true, Retryable: true})
					if err != nil {
						t.Error(err)
						return
					}
				}
				e.at = time.Now()
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	return events
}

// retryShare is the share of the failures from from on that the fleet's
// budget let retry.
func retryShare(events []budgetEvent, from time.Time) float64 {
	var failures, retries int
	for _, e := range events {
		if !e.ok && !e.at.Before(from) {
			failures++
			if e.retry {
				retries++
			}
		}
	}
	return float64(retries) / float64(failures)
}

// BenchmarkRetryBudgetPartialFailure measures the shared retry budget
// where a funder fails some calls and answers the rest: 16 processes (a
// pool and a Coordinator each, depositing once a second as by default),
// each ending 50 calls a second at Poisson times, each call failing with
// the given probability, for 6 s. It reports the share of failures the
// fleet's budget let retry over the last 4 s (fleet-retry) and the share
// a single process's throttle, which has every success at once, lets
// retry on the same calls in the same order (single-retry). Run it with
// -benchtime 1x: each iteration is one 6 s run.
func BenchmarkRetryBudgetPartialFailure(b *testing.B) {
	p := grantretry.FleetPolicy{Threshold: 1 << 30, Probe: time.Second,
		MaxTokens: grantretry.DefaultThrottleMaxTokens, TokenRatio: grantretry.DefaultThrottleTokenRatio, Refill: time.Hour}
	pool := newPool(b)
	for _, fail := range []string{"3", "5", "7", "9"} {
		b.Run("fail="+fail+"%", func(b *testing.B) {
			f, _ := strconv.ParseFloat(fail, 64)
			var fleet, single float64
			for range b.N {
				if _, err := pool.Exec(context.Background(), `DELETE FROM grantretry_hosts`); err != nil {
					b.Fatal(err)
				}
				from := time.Now().Add(2 * time.Second)
				ev := budgetRun(b, pool.Config(), 16, 50, f/100, 6*time.Second, p)
				fleet += retryShare(ev, from)
				single += singleThrottle(ev, p, from)
			}
			b.ReportMetric(fleet/float64(b.N), "fleet-retry")
			b.ReportMetric(single/float64(b.N), "single-retry")
			b.ReportMetric(0, "ns/op")
		})
	}
}
