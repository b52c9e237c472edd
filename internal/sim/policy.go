package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
)

// Policy is one retry policy the simulator compares: a RoundTripper wrapped
// around the workers' shared inner transport. A Policy never changes; each
// run builds its own RoundTripper from it, so runs share no state.
type Policy struct {
	ID      string // as named on the command line
	Name    string // as shown in tables and the chart
	Summary string // one line on what it does
	// SendsKey says whether its POSTs carry an Idempotency-Key, so the
	// funder can tell a repeat from a new application.
	SendsKey bool
	wrap     func(sc Scenario, index int, inner http.RoundTripper) http.RoundTripper
}

// The hand-rolled policies model the peers' defaults, and are fixed: the
// Scenario's retry knobs apply to the grantretry policies only.
const (
	naiveRetries = 3
	expRetries   = 4                // go-retryablehttp's RetryMax
	expWaitMin   = time.Second      // go-retryablehttp's RetryWaitMin
	expWaitMax   = 30 * time.Second // go-retryablehttp's RetryWaitMax
)

// allPolicies returns every policy, in the order a run compares them. It
// builds them afresh, so no caller can change another's.
func allPolicies() []Policy {
	return []Policy{
		{
			ID:      "naive",
			Name:    "naive",
			Summary: "3 immediate retries, no wait, no Idempotency-Key",
			wrap: func(_ Scenario, _ int, inner http.RoundTripper) http.RoundTripper {
				return &retrier{next: inner, retries: naiveRetries, wait: func(int) time.Duration { return 0 }}
			},
		},
		{
			ID:      "exponential",
			Name:    "exponential, no jitter",
			Summary: "go-retryablehttp's default shape: waits 1s, 2s, 4s, 8s (cap 30s), 4 retries, no Idempotency-Key",
			wrap: func(sc Scenario, _ int, inner http.RoundTripper) http.RoundTripper {
				return &retrier{next: inner, retries: expRetries, wait: func(n int) time.Duration {
					return sc.realTime(min(expWaitMin<<n, expWaitMax))
				}}
			},
		},
		{
			ID:       "jitter",
			Name:     "full jitter, no throttle",
			Summary:  "grantretry with WithoutRetryThrottle and WithoutBreaker: the per-call policy alone",
			SendsKey: true,
			wrap: func(sc Scenario, index int, inner http.RoundTripper) http.RoundTripper {
				opts := append(sc.callOptions(index), grantretry.WithoutRetryThrottle(), grantretry.WithoutBreaker())
				return grantretry.New(inner, opts...)
			},
		},
		{
			ID:       "throttle",
			Name:     "full jitter + throttle",
			Summary:  "grantretry with the retry throttle and WithoutBreaker",
			SendsKey: true,
			wrap: func(sc Scenario, index int, inner http.RoundTripper) http.RoundTripper {
				opts := append(append(sc.callOptions(index), sc.throttleOptions()...), grantretry.WithoutBreaker())
				return grantretry.New(inner, opts...)
			},
		},
		{
			ID:       "default",
			Name:     "grantretry defaults",
			Summary:  "grantretry as New builds it: full jitter, budget, retry throttle and breaker",
			SendsKey: true,
			wrap: func(sc Scenario, index int, inner http.RoundTripper) http.RoundTripper {
				opts := append(append(sc.callOptions(index), sc.throttleOptions()...), sc.breakerOptions()...)
				return grantretry.New(inner, opts...)
			},
		},
	}
}

// Policies returns every policy, in the order a run compares them.
func Policies() []Policy { return allPolicies() }

// Lookup returns the policies with the given IDs, in the given order.
func Lookup(ids []string) ([]Policy, error) {
	var out []Policy
	seen := make(map[string]bool)
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if seen[id] {
			return nil, fmt.Errorf("policy %q listed twice", id)
		}
		seen[id] = true
		p, ok := lookup(id)
		if !ok {
			return nil, fmt.Errorf("unknown policy %q (want %s)", id, strings.Join(PolicyIDs(), ", "))
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no policy")
	}
	return out, nil
}

func lookup(id string) (Policy, bool) {
	for _, p := range allPolicies() {
		if p.ID == id {
			return p, true
		}
	}
	return Policy{}, false
}

// PolicyIDs returns the IDs of every policy.
func PolicyIDs() []string {
	ps := allPolicies()
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

// callOptions are the per-call options every grantretry policy shares: the
// Scenario's backoff and budget, scaled to real time, and a jitter source
// seeded from the Scenario's seed.
func (s Scenario) callOptions(index int) []grantretry.Option {
	return append([]grantretry.Option{
		grantretry.WithBackoff(s.realTime(s.Base), s.realTime(s.Cap)),
		grantretry.WithBudget(s.Retries, s.realTime(s.Deadline)),
		grantretry.WithRandSource(rand.NewPCG(s.Seed, uint64(index))),
	}, s.Options...)
}

// throttleOptions are the retry throttle and its refill, scaled to real
// time, or WithoutRetryThrottle.
func (s Scenario) throttleOptions() []grantretry.Option {
	if !s.Throttle {
		return []grantretry.Option{grantretry.WithoutRetryThrottle()}
	}
	return []grantretry.Option{
		grantretry.WithRetryThrottle(s.MaxTokens, s.TokenRatio),
		grantretry.WithThrottleRefill(s.realTime(s.Refill)),
	}
}

func (s Scenario) breakerOption() grantretry.Option {
	if !s.Breaker {
		return grantretry.WithoutBreaker()
	}
	return grantretry.WithBreaker(s.Threshold, s.realTime(s.Cooldown))
}

func (s Scenario) breakerOptions() []grantretry.Option {
	if !s.Breaker {
		return []grantretry.Option{grantretry.WithoutBreaker()}
	}
	return []grantretry.Option{s.breakerOption(), grantretry.WithBreakerProbe(s.realTime(s.Probe))}
}

// retrier is a retry loop as it is often written by hand: retry every
// transient failure (grantretry.Classify's verdict, so all policies agree
// on what is transient) up to retries times, waiting wait(n) before retry
// n. It sends no Idempotency-Key, has no deadline of its own, and shares
// nothing between calls. Safe for concurrent use.
type retrier struct {
	next    http.RoundTripper
	retries int
	wait    func(retry int) time.Duration // real time
}

func (rt *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for n := 0; ; n++ {
		attempt := req
		if n > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			attempt = req.Clone(ctx)
			attempt.Body = body
		}
		resp, err := rt.next.RoundTrip(attempt)
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		if n == rt.retries || ctx.Err() != nil || req.GetBody == nil || !grantretry.Classify(status, err).Retryable {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
		if !sleep(ctx, rt.wait(n)) {
			return nil, ctx.Err()
		}
	}
}
