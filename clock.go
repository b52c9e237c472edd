package grantretry

import (
	"context"
	"time"
)

// Clock is the time a Transport reads and waits on. The default is the
// system clock; tests inject one that advances instantly so no test sleeps a
// real backoff. Implementations must be safe for concurrent use.
//
// The Clock governs the retry policy (budget deadline, Retry-After dates,
// waits, the retry throttle's refill, elapsed times in the audit trail).
// Attempts themselves run on real
// sockets, so the per-attempt timeout and the deadline that bounds an attempt
// in flight are real time, and so is the circuit breaker's cooldown, which
// gobreaker measures itself.
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
