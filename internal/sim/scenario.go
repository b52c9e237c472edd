// Package sim is the storm simulator behind "grantretry sim": it runs retry
// policies, one after another, against a funder on a loopback server that
// has a capacity, goes fully down for a while and comes back, and measures
// what each policy did to it.
//
// Time is simulated: every duration in a Scenario is in simulated time, and
// a run lasts Scenario.Scale times less in real time. The grantretry
// policies get their backoff, deadline and breaker cooldown divided by the
// scale, so the library runs with its real code on a faster clock.
package sim

import (
	"errors"
	"fmt"
	"time"
)

// Scenario is one simulated storm: the funder, the workload and the retry
// policy of the grantretry policies. Every duration is simulated time. The
// zero value is not valid; start from Default. It is a plain value, copied
// into each run, which never changes it.
type Scenario struct {
	// The funder.
	Capacity    int           // requests it accepts per simulated second; excess gets 429
	Latency     time.Duration // how long it works on an accepted request
	OutageStart time.Duration // when it goes fully down, from the start of the run
	Outage      time.Duration // how long it stays down: every request gets 503

	// The workload.
	Workers int     // concurrent workers, each one call at a time
	Load    float64 // offered base load, as a share of Capacity; sets the think time
	Run     time.Duration

	// The clock and the randomness.
	Scale float64 // simulated time per unit of real time
	Seed  uint64

	// The grantretry policies, before scaling (WithBackoff, WithBudget,
	// WithRetryThrottle, WithBreaker).
	Base, Cap  time.Duration
	Retries    int
	Deadline   time.Duration
	Throttle   bool // the retry throttle of the "default" policy
	MaxTokens  float64
	TokenRatio float64
	Breaker    bool // the breaker of the "default" policy
	Threshold  uint32
	Cooldown   time.Duration
}

// Default returns the default scenario: a funder with a ceiling of 20
// requests per second, fully down from 30 s to 120 s, and 24 workers
// offering 60% of its capacity. The retry policy is the library's defaults.
// The whole run is 240 simulated seconds at a time scale of 50.
func Default() Scenario {
	return Scenario{
		Capacity:    20,
		Latency:     100 * time.Millisecond,
		OutageStart: 30 * time.Second,
		Outage:      90 * time.Second,
		Workers:     24,
		Load:        0.6,
		Run:         240 * time.Second,
		Scale:       50,
		Seed:        1,
		Base:        500 * time.Millisecond,
		Cap:         30 * time.Second,
		Retries:     4,
		Deadline:    45 * time.Second,
		Throttle:    true,
		MaxTokens:   10,
		TokenRatio:  0.1,
		Breaker:     true,
		Threshold:   5,
		Cooldown:    60 * time.Second,
	}
}

// OutageEnd is when the funder recovers.
func (s Scenario) OutageEnd() time.Duration { return s.OutageStart + s.Outage }

// Think is the mean pause a worker takes between two calls: with Workers
// workers and calls that take Latency, it makes the offered load
// Load*Capacity requests per second. Each pause is drawn uniformly from
// [Think/2, 3*Think/2].
func (s Scenario) Think() time.Duration {
	perWorker := float64(s.Workers) / (s.Load * float64(s.Capacity)) // seconds between calls
	return time.Duration(perWorker*float64(time.Second)) - s.Latency
}

// realTime converts simulated time to real time.
func (s Scenario) realTime(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.Scale)
}

// callGuard bounds one call in simulated time, whatever the policy: the
// caller's context deadline of every call. It is far beyond any schedule
// the policies can run, so it only ends calls when something is broken,
// and they are then counted as canceled.
func (s Scenario) callGuard() time.Duration {
	return max(2*time.Minute, 2*s.Deadline)
}

// Validate reports every knob out of range, joined.
func (s Scenario) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Capacity <= 0 {
		bad("capacity %d: want at least 1 request per second", s.Capacity)
	}
	if s.Workers <= 0 || s.Workers > 10000 {
		bad("workers %d: want 1 to 10000", s.Workers)
	}
	if !(s.Load > 0 && s.Load <= 1) {
		bad("load %v: want a share of capacity in (0, 1]", s.Load)
	}
	if !(s.Scale >= 1 && s.Scale <= 1000) { // NaN fails too
		bad("scale %v: want 1 to 1000", s.Scale)
	}
	if s.Latency < 0 {
		bad("latency %v: want 0 or more", s.Latency)
	}
	if s.Run <= 0 || s.OutageStart < 0 || s.Outage <= 0 || s.OutageEnd() >= s.Run {
		bad("outage %v from %v in a run of %v: want 0 <= start, a positive length, and the end before the run's", s.Outage, s.OutageStart, s.Run)
	}
	if s.Capacity > 0 && s.Workers > 0 && s.Load > 0 && s.Think() <= 0 {
		bad("%d workers cannot offer %v of %d requests per second with %v latency: add workers or lower the load", s.Workers, s.Load, s.Capacity, s.Latency)
	}
	if s.Retries < 0 {
		bad("retries %d: want 0 or more", s.Retries)
	}
	if s.Scale >= 1 {
		if s.realTime(s.Base) <= 0 || s.Cap < s.Base {
			bad("backoff base %v, cap %v: want 0 < base <= cap, and base at least 1ns once divided by the scale", s.Base, s.Cap)
		}
		if s.realTime(s.Deadline) <= 0 {
			bad("deadline %v: want a positive deadline", s.Deadline)
		}
		if s.Breaker && (s.Threshold == 0 || s.realTime(s.Cooldown) <= 0) {
			bad("breaker %d, %v: want a positive threshold and cooldown", s.Threshold, s.Cooldown)
		}
	}
	if s.Throttle && !(s.MaxTokens > 0 && s.MaxTokens <= 1000 && s.TokenRatio >= 0.001 && s.TokenRatio <= s.MaxTokens) {
		bad("throttle %v, %v: want 0 < maxTokens <= 1000 and 0.001 <= tokenRatio <= maxTokens", s.MaxTokens, s.TokenRatio)
	}
	if s.Run > 24*time.Hour {
		bad("run %v: want at most 24h of simulated time", s.Run)
	}
	return errors.Join(errs...)
}
