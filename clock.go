package grantretry

import (
	"context"
	"time"
)

// Clock is the time a Transport reads and waits on ([WithClock]). The
// default is the system clock; tests inject one that advances instantly
// so no test sleeps a real backoff. Implementations must be safe for
// concurrent use.
//
// The Clock governs the retry policy: the budget's deadline as the policy
// checks it before each wait, Retry-After dates, the waits between
// attempts, the retry throttle's refill ([WithThrottleRefill]), the
// circuit breaker's waits before each half-open probe (from
// [WithBreakerProbe]'s up to [WithBreaker]'s cooldown: advancing the
// Clock past the wait lets the probe through, with no real wait), how
// long an idle host's state is kept ([HostIdle]), and the times a call
// records: each audit record's ts and the elapsed times, and a
// [Letter]'s FirstAttempt, LastAttempt and Created. Attempts themselves
// run on real sockets, so the per-attempt timeout ([WithAttemptTimeout]),
// the deadline that cuts an attempt in flight, and each attempt's latency
// are real time. A [Fleet] ([WithFleet]) keeps its own time: the fleet
// module's shared breaker and budget run on its database's clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, whichever is first; it returns
	// ctx's error in the latter case and nil otherwise.
	Sleep(ctx context.Context, d time.Duration) error
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
