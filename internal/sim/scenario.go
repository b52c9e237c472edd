// Package sim is the storm simulator behind "grantretry sim": it runs retry
// policies, one after another, against a funder on a loopback server that
// has a capacity, goes fully down for a while and comes back, and measures
// what each policy did to it. Its low-volume scenario (RunLowVolume) is a
// pipeline of one call a minute or so, after a blip of failures, and
// measures how long the retry throttle keeps retries off.
//
// Time is simulated: every duration in a Scenario is in simulated time, and
// a run lasts Scenario.Scale times less in real time. The grantretry
// policies get their backoff, deadline and breaker cooldown divided by the
// scale, so the library runs with its real code on a faster clock. See
// docs/choosing-budgets.md.
package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/grantretry/grantretry"
)

// Kind names what a scenario measures, and which of Run and RunLowVolume
// runs it.
type Kind string

// The kinds of scenario.
const (
	// KindOutage is a full outage under load: the load each policy sends a
	// funder that is down, and how fast it recovers (Run).
	KindOutage Kind = "outage"
	// KindLowVolume is a pipeline of few calls, a blip of failures and
	// then a trickle of them: how long retries stay off (RunLowVolume).
	KindLowVolume Kind = "low-volume"
	// KindFlaky is a funder that is up but fails most attempts: it answers
	// the first FailFirst attempts of every call 503, then 201. It shows
	// what each policy's throttle and breaker make of such a funder
	// (RunFlaky).
	KindFlaky Kind = "flaky"
)

// Scenario is one simulated storm: the funder, the workload and the retry
// policy of the grantretry policies. Every duration is simulated time. The
// zero value is not valid; start from Default or LowVolumeDefault. It is a
// plain value, copied into each run, which never changes it.
type Scenario struct {
	Kind Kind

	// The funder.
	Capacity    int           // requests it accepts per simulated second; excess gets 429
	Latency     time.Duration // how long it works on an accepted request
	OutageStart time.Duration // when it goes fully down, from the start of the run
	Outage      time.Duration // how long it stays down: every request gets 503; 0 for none (KindLowVolume only)

	// The funder's other failures, all answered 503 at once, with no
	// Retry-After and nothing recorded (KindLowVolume).
	BlipAt       time.Duration // when the blip starts
	BlipFailures int           // the first BlipFailures requests from BlipAt on fail: the blip
	FailShare    float64       // each other request fails with this probability, independently
	// FailFirst is how many attempts of each call (told apart by their
	// X-Correlation-ID) the funder answers 503 before it serves one
	// (KindFlaky).
	FailFirst int

	// The workload.
	Workers int     // concurrent workers, each one call at a time
	Load    float64 // offered base load, as a share of Capacity; sets the think time
	Spread  float64 // each think time is uniform over Think·[1-Spread, 1+Spread]
	Run     time.Duration

	// The clock and the randomness.
	Scale float64 // simulated time per unit of real time
	Seed  uint64
	Seeds int // KindLowVolume: the runs use seeds Seed to Seed+Seeds-1

	// Probes are KindLowVolume's measurement of how long retries stay off: for
	// each delay d, each seed is run again with one more failure, the first
	// attempt of the first call to reach the funder d or more after the
	// blip, and that call's outcome says whether it got its retry.
	Probes []time.Duration

	// The grantretry policies, before scaling (WithBackoff, WithBudget,
	// WithRetryThrottle, WithThrottleRefill, WithBreaker).
	Base, Cap  time.Duration
	Retries    int
	Deadline   time.Duration
	Throttle   bool // the retry throttle of the "throttle" and "default" policies
	MaxTokens  float64
	TokenRatio float64
	Refill     time.Duration // the throttle's refill period
	Breaker    bool          // the breaker of the "default" policy
	Threshold  uint32
	Cooldown   time.Duration // the longest wait before a probe
	Probe      time.Duration // the first wait before a probe (WithBreakerProbe)

	// Options are added to every grantretry policy's options: for what
	// the run records (WithMeterProvider, WithLogger), not for its policy.
	Options []grantretry.Option
}

// Default returns the default scenario: a funder with a ceiling of 20
// requests per second, fully down from 30 s to 120 s, and 24 workers
// offering 60% of its capacity. The retry policy is the library's defaults.
// The whole run is 240 simulated seconds at a time scale of 50.
func Default() Scenario {
	return Scenario{
		Kind:        KindOutage,
		Capacity:    20,
		Latency:     100 * time.Millisecond,
		OutageStart: 30 * time.Second,
		Outage:      90 * time.Second,
		Workers:     24,
		Load:        0.6,
		Spread:      0.5,
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
		Refill:      60 * time.Second,
		Breaker:     true,
		Threshold:   5,
		Cooldown:    10 * time.Second,
		Probe:       2 * time.Second,
	}
}

// LowVolumeDefault returns the low-volume scenario: one worker
// making a call every 30 to 60 s (45 s on average) to a funder with no
// outage; 10 minutes in, a blip of 6 failures, and besides it 5% of
// requests answered 503 at random. The run is 4 hours at a time scale of
// 1000 (14.4 s of real time), over 20 seeds, with probes from 30 s to 2
// hours after the blip. The retry policy is the library's defaults.
func LowVolumeDefault() Scenario {
	s := Default()
	s.Kind = KindLowVolume
	s.Outage, s.OutageStart = 0, 0
	s.BlipAt, s.BlipFailures, s.FailShare = 10*time.Minute, 6, 0.05
	s.Workers = 1
	// 1/(45*20) of a capacity of 20 is one call every 45 s, less latency.
	s.Load = 1 / (45 * float64(s.Capacity))
	s.Spread = 1.0 / 3 // 30 to 60 s
	s.Run = 4 * time.Hour
	s.Scale = 1000
	s.Seeds = 20
	s.Probes = []time.Duration{
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
		20 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour, 90 * time.Minute, 2 * time.Hour,
	}
	return s
}

// FlakyDefault returns the flaky-funder scenario: four workers, each
// making a call every 2 s or so, to a funder with no outage that answers
// the first 2 attempts of every call 503 and the third 201. The run is 2
// minutes at a time scale of 50 (2.4 s of real time per policy). The retry
// policy is the library's defaults.
func FlakyDefault() Scenario {
	s := Default()
	s.Kind = KindFlaky
	s.Outage, s.OutageStart = 0, 0
	s.FailFirst = 2
	s.Workers = 4
	s.Load = 0.1 // 2 calls a second of a capacity of 20: one per worker every 2 s
	s.Run = 2 * time.Minute
	return s
}

// OutageEnd is when the funder recovers.
func (s Scenario) OutageEnd() time.Duration { return s.OutageStart + s.Outage }

// Think is the mean pause a worker takes between two calls: with Workers
// workers and calls that take Latency, it makes the offered load
// Load*Capacity requests per second. Each pause is drawn uniformly from
// [(1-Spread)*Think, (1+Spread)*Think].
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
	switch s.Kind {
	case KindOutage:
		if s.Run <= 0 || s.OutageStart < 0 || s.Outage <= 0 || s.OutageEnd() >= s.Run {
			bad("outage %v from %v in a run of %v: want 0 <= start, a positive length, and the end before the run's", s.Outage, s.OutageStart, s.Run)
		}
	case KindLowVolume:
		errs = append(errs, s.validateLowVolume()...)
	case KindFlaky:
		if s.Run <= 0 || s.FailFirst < 1 {
			bad("flaky funder failing the first %d attempts of each call in a run of %v: want at least one, and a positive run", s.FailFirst, s.Run)
		}
		if s.Outage < 0 || s.OutageStart < 0 || (s.Outage > 0 && s.OutageEnd() >= s.Run) {
			bad("outage %v from %v in a run of %v: want none, or one that ends before the run", s.Outage, s.OutageStart, s.Run)
		}
	default:
		bad("scenario %q: want %s, %s or %s", s.Kind, KindOutage, KindLowVolume, KindFlaky)
	}
	if !(s.Spread >= 0 && s.Spread < 1) {
		bad("spread %v: want a share in [0, 1)", s.Spread)
	}
	if s.FailFirst < 0 {
		bad("fail-first %d: want 0 or more attempts", s.FailFirst)
	}
	if !(s.FailShare >= 0 && s.FailShare < 1) || s.BlipFailures < 0 || s.BlipAt < 0 {
		bad("blip of %d failures at %v, fail share %v: want 0 or more failures from 0 on, and a share in [0, 1)", s.BlipFailures, s.BlipAt, s.FailShare)
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
		if s.Breaker && (s.Threshold == 0 || s.realTime(s.Cooldown) <= 0 || s.realTime(s.Probe) <= 0) {
			bad("breaker %d, %v, probe %v: want a positive threshold, cooldown and probe", s.Threshold, s.Cooldown, s.Probe)
		}
	}
	if s.Throttle && !(s.MaxTokens > 0 && s.MaxTokens <= 1000 && s.TokenRatio >= 0.001 && s.TokenRatio <= s.MaxTokens) {
		bad("throttle %v, %v: want 0 < maxTokens <= 1000 and 0.001 <= tokenRatio <= maxTokens", s.MaxTokens, s.TokenRatio)
	}
	if s.Throttle && s.Scale >= 1 && s.realTime(s.Refill) < time.Millisecond {
		bad("throttle refill %v: want at least 1ms once divided by the scale (%v at scale %v)", s.Refill, time.Duration(s.Scale)*time.Millisecond, s.Scale)
	}
	if s.Run > 24*time.Hour {
		bad("run %v: want at most 24h of simulated time", s.Run)
	}
	return errors.Join(errs...)
}

// validateLowVolume reports what the low-volume scenario needs beyond the
// common knobs: a blip inside the run, seeds, probes, and an outage (if
// any) that ends before the run does.
func (s Scenario) validateLowVolume() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Run <= 0 || s.BlipFailures <= 0 || s.BlipAt >= s.Run {
		bad("blip of %d failures at %v in a run of %v: want at least one failure, before the end of the run", s.BlipFailures, s.BlipAt, s.Run)
	}
	if s.Outage < 0 || s.OutageStart < 0 || (s.Outage > 0 && s.OutageEnd() >= s.Run) {
		bad("outage %v from %v in a run of %v: want none, or one that ends before the run", s.Outage, s.OutageStart, s.Run)
	}
	if s.Seeds < 1 || s.Seeds > 1000 {
		bad("seeds %d: want 1 to 1000", s.Seeds)
	}
	for i, d := range s.Probes {
		if d <= 0 || (i > 0 && d <= s.Probes[i-1]) {
			bad("probes %v: want positive delays in increasing order", s.Probes)
			break
		}
	}
	return errs
}
