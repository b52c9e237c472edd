package grantretry

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// milli is the throttle's fixed point: tokens are counted in thousandths,
// the precision gRFC A6 gives tokenRatio.
const milli = 1000

// The bucket's state is one int64: the Clock time of its last failure (0
// until one), in milliseconds since the bucket was made, above tokenBits
// bits of tokens in thousandths (at most 1000 tokens: 1,000,000 < 2^20).
// 43 bits of milliseconds last 278 years.
const (
	tokenBits = 20
	tokenMask = 1<<tokenBits - 1
	maxStamp  = 1<<(63-tokenBits) - 1
)

// retryThrottle is one host's retry throttle, in the gRFC A6 sense: a token
// bucket shared by every call of one Transport to that host. Each
// transient failure takes a token, each success gives back tokenRatio of
// one, and retries are refused while the bucket is at or below half full.
// When a funder is down, failures drain the bucket and the fleet stops
// retrying: each call makes one attempt, so the load a down funder sees is
// the load it would see without retries.
//
// Beyond A6, the bucket also refills with time, so a pipeline that makes
// few calls is not left without retries for hours after a blip: from
// empty, with no success at all, a call that fails one refill period later
// gets its retry. The refill is computed lazily, from the Clock time of
// the last update: no goroutine, no timer. Each failure takes a whole
// token, and a storm of them drains far faster than the refill adds (20
// failures a second against 6 tokens a minute by default), so under load
// the bucket behaves as A6's.
//
// It is lock-free: one atomic integer, tokens and time packed, updated by
// compare-and-swap. A success only adds tokens, so it neither reads the
// Clock nor moves the time of the last update: adding the refill and the
// success in either order gives the same level, as both only add and the
// cap at max applies once. A failure reads the Clock, adds the refill
// since the last update, takes its token and stores the time. The zero
// value is not usable; a nil *retryThrottle (WithoutRetryThrottle) allows
// every retry.
type retryThrottle struct {
	max    int64  // in thousandths of a token
	ratio  int64  // in thousandths of a token
	gain   uint64 // thousandths the refill adds per period: max/2 + 1001
	period uint64 // the refill period, in whole milliseconds, at least 1
	clock  Clock
	epoch  time.Time // the Clock's time when the bucket was made
	state  atomic.Int64
}

func newRetryThrottle(maxTokens, tokenRatio float64, refill time.Duration, clk Clock) *retryThrottle {
	rt := &retryThrottle{
		max:    int64(math.Round(maxTokens * milli)),
		ratio:  int64(math.Round(tokenRatio * milli)),
		period: uint64(max(refill.Milliseconds(), 1)),
		clock:  clk,
		epoch:  clk.Now(),
	}
	// After one period from empty, a failure's token taken, more than
	// half is left: max/2 + milli + 1 thousandths.
	rt.gain = uint64(rt.max/2 + milli + 1)
	rt.state.Store(rt.max) // full, at time 0
	return rt
}

// allowRetry reports whether the bucket is more than half full now.
func (rt *retryThrottle) allowRetry() bool {
	return rt == nil || rt.allowRetryAt(rt.clock.Now())
}

// allowRetryAt reports whether the bucket is more than half full at now.
func (rt *retryThrottle) allowRetryAt(now time.Time) bool {
	return rt.levelAt(rt.state.Load(), rt.stamp(now)) > rt.max/2
}

// onFailure takes one token for a transient failure, once the refill since
// the last update is added.
func (rt *retryThrottle) onFailure() {
	if rt != nil {
		rt.failAt(rt.clock.Now())
	}
}

// failAt takes one token at now, the floor at 0 applied after the refill.
func (rt *retryThrottle) failAt(now time.Time) {
	at := rt.stamp(now)
	for {
		old := rt.state.Load()
		// Another failure may have stored a later time than ours: keep it,
		// so no stretch of time is counted twice.
		t := max(at, old>>tokenBits)
		next := t<<tokenBits | max(rt.levelAt(old, t)-milli, 0)
		if next == old || rt.state.CompareAndSwap(old, next) {
			return
		}
	}
}

// onSuccess gives back tokenRatio of a token. It leaves the time of the
// last update alone, so the refill pending since then is still added.
func (rt *retryThrottle) onSuccess() {
	if rt == nil {
		return
	}
	for {
		old := rt.state.Load()
		tokens := min(old&tokenMask+rt.ratio, rt.max)
		next := old&^tokenMask | tokens
		if next == old || rt.state.CompareAndSwap(old, next) {
			return
		}
	}
}

// levelAt is the tokens the bucket in state s holds at stamp t: the stored
// tokens plus the refill since the stored time, at most max. A t before
// the stored time adds nothing.
func (rt *retryThrottle) levelAt(s, t int64) int64 {
	tokens, last := s&tokenMask, s>>tokenBits
	if t <= last || tokens >= rt.max {
		return tokens
	}
	// gain*elapsed/period, in 128 bits: a refill period of years times a
	// gain of 500,000 does not fit in 64.
	hi, lo := bits.Mul64(uint64(t-last), rt.gain)
	if hi >= rt.period {
		return rt.max // the quotient would not fit in 64 bits
	}
	add, _ := bits.Div64(hi, lo, rt.period)
	if add >= uint64(rt.max-tokens) {
		return rt.max
	}
	return tokens + int64(add)
}

// stamp is now as the bucket keeps time: whole milliseconds since it was
// made, within [0, maxStamp].
func (rt *retryThrottle) stamp(now time.Time) int64 {
	return min(max(now.Sub(rt.epoch).Milliseconds(), 0), maxStamp)
}

// level returns the tokens in the bucket now, for tests and diagnostics.
func (rt *retryThrottle) level() float64 {
	return float64(rt.levelAt(rt.state.Load(), rt.stamp(rt.clock.Now()))) / milli
}

// fullAt reports whether the bucket is full at now, as a new one is; a
// nil throttle is.
func (rt *retryThrottle) fullAt(now time.Time) bool {
	return rt == nil || rt.levelAt(rt.state.Load(), rt.stamp(now)) >= rt.max
}
