package grantretry

import (
	"math"
	"sync/atomic"
)

// Defaults of the per-host retry throttle (see WithRetryThrottle), those of
// gRPC's retry throttling (gRFC A6).
const (
	// DefaultThrottleMaxTokens is the size of each host's token bucket, and
	// where it starts.
	DefaultThrottleMaxTokens = 10
	// DefaultThrottleTokenRatio is what each success gives back; each
	// transient failure takes one whole token.
	DefaultThrottleTokenRatio = 0.1
)

// milli is the throttle's fixed point: tokens are counted in thousandths,
// the precision gRFC A6 gives tokenRatio.
const milli = 1000

// retryThrottle is one host's retry throttle, in the gRFC A6 sense: a token
// bucket shared by every call of one Transport to that host. Each transient
// failure takes a token, each success gives back tokenRatio of one, and
// retries are refused while the bucket is at or below half full. When a
// funder is down, failures drain the bucket and the fleet stops retrying:
// each call makes one attempt, so the load a down funder sees is the load
// it would see without retries.
//
// It is lock-free: one atomic integer, updated by compare-and-swap. The zero
// value is not usable; a nil *retryThrottle (WithoutRetryThrottle) allows
// every retry.
type retryThrottle struct {
	max    int64 // in thousandths of a token
	ratio  int64 // in thousandths of a token
	tokens atomic.Int64
}

func newRetryThrottle(maxTokens, tokenRatio float64) *retryThrottle {
	rt := &retryThrottle{
		max:   int64(math.Round(maxTokens * milli)),
		ratio: int64(math.Round(tokenRatio * milli)),
	}
	rt.tokens.Store(rt.max)
	return rt
}

// allowRetry reports whether the bucket is more than half full.
func (rt *retryThrottle) allowRetry() bool {
	return rt == nil || rt.tokens.Load() > rt.max/2
}

// onFailure takes one token for a transient failure.
func (rt *retryThrottle) onFailure() { rt.add(-milli) }

// onSuccess gives back tokenRatio of a token.
func (rt *retryThrottle) onSuccess() {
	if rt != nil {
		rt.add(rt.ratio)
	}
}

// add moves the bucket by delta thousandths, within [0, max].
func (rt *retryThrottle) add(delta int64) {
	if rt == nil {
		return
	}
	for {
		old := rt.tokens.Load()
		next := min(max(old+delta, 0), rt.max)
		if next == old || rt.tokens.CompareAndSwap(old, next) {
			return
		}
	}
}

// level returns the tokens in the bucket, for tests and diagnostics.
func (rt *retryThrottle) level() float64 {
	return float64(rt.tokens.Load()) / milli
}
