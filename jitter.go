package grantretry

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// FullJitter returns the wait before retry number attempt (counting from 0):
// a uniform draw over [0, min(cap, base*2^attempt)]. It never overflows,
// whatever the attempt; a negative attempt counts as 0 and a non-positive
// base or cap gives 0. Safe for concurrent use; it draws from math/rand/v2's
// unseeded per-goroutine source, so no two workers share a schedule.
func FullJitter(attempt int, base, cap time.Duration) time.Duration {
	return fullJitter(runtimeRand{}, attempt, base, cap)
}

// backoffCeiling is min(cap, base*2^attempt) without overflow.
func backoffCeiling(attempt int, base, cap time.Duration) time.Duration {
	if base <= 0 || cap <= 0 {
		return 0
	}
	if attempt < 0 {
		attempt = 0
	}
	// base*2^attempt > cap exactly when base > cap>>attempt; shifting cap
	// down cannot overflow where shifting base up can.
	if attempt >= 63 || base > cap>>uint(attempt) {
		return cap
	}
	return base << uint(attempt)
}

func fullJitter(r randSource, attempt int, base, cap time.Duration) time.Duration {
	ceiling := backoffCeiling(attempt, base, cap)
	if ceiling <= 0 {
		return 0
	}
	if ceiling == math.MaxInt64 {
		return time.Duration(r.Int64N(math.MaxInt64))
	}
	return time.Duration(r.Int64N(int64(ceiling) + 1))
}

// randSource is the randomness a Transport owns.
type randSource interface {
	// Int64N returns a uniform value in [0, n); n > 0.
	Int64N(n int64) int64
}

// runtimeRand draws from math/rand/v2's top-level functions: lock-free,
// unseeded and per-goroutine, the right default for a fleet.
type runtimeRand struct{}

func (runtimeRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// lockedRand serialises a caller-supplied source, which math/rand/v2 does not
// make safe for concurrent use. Int64N requires nothing of the caller; mu
// guards r.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Int64N(n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Int64N(n)
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 section 10.2.3): either
// delay-seconds, digits only, or an HTTP-date in any form http.ParseTime
// accepts, measured from now. A date in the past gives 0. A delay too large
// for time.Duration saturates, so an absurd value still means "not soon".
// Empty, negative, fractional or otherwise malformed values give false.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		return parseDelaySeconds(v), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, true
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDelaySeconds converts a string of digits to a Duration, saturating at
// the largest Duration instead of overflowing.
func parseDelaySeconds(digits string) time.Duration {
	const maxSeconds = int64(math.MaxInt64 / int64(time.Second))
	var secs int64
	for i := 0; i < len(digits); i++ {
		secs = secs*10 + int64(digits[i]-'0')
		if secs > maxSeconds {
			return time.Duration(math.MaxInt64)
		}
	}
	return time.Duration(secs) * time.Second
}

// retryAfter returns the longest valid Retry-After among the response's
// values: when a funder repeats the header, the only wait that honours every
// value is the longest one.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	var longest time.Duration
	found := false
	for _, v := range h.Values("Retry-After") {
		if d, ok := ParseRetryAfter(v, now); ok {
			found = true
			longest = max(longest, d)
		}
	}
	return longest, found
}

// Wait sources, as logged in the wait_source audit field.
const (
	waitSourceBackoff    = "backoff"
	waitSourceRetryAfter = "retry_after"
)

// chooseWait is max(jitter, Retry-After): never earlier than the funder asked.
func chooseWait(jitter, after time.Duration, hasAfter bool) (time.Duration, string) {
	if hasAfter && after > jitter {
		return after, waitSourceRetryAfter
	}
	return jitter, waitSourceBackoff
}
