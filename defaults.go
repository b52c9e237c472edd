package grantretry

import "time"

// The defaults of the retry policy and the limits of a call, one block per
// concern. New uses the defaults where no option sets a value; each
// option's documentation says what it changes, and docs/options.md lists
// them all.

// Defaults of the per-call retry budget (see WithBudget).
const (
	// DefaultMaxRetries is how many retries one logical call may spend: at
	// most DefaultMaxRetries+1 attempts.
	DefaultMaxRetries = 4
	// DefaultDeadline bounds one logical call from its first attempt,
	// waits and attempts in flight included.
	DefaultDeadline = 45 * time.Second
)

// Defaults of the backoff (see WithBackoff).
const (
	// DefaultBackoffBase is the ceiling of the first wait; each retry
	// doubles it.
	DefaultBackoffBase = 500 * time.Millisecond
	// DefaultBackoffCap is the largest ceiling a wait is drawn under.
	DefaultBackoffCap = 30 * time.Second
)

// Defaults of the per-host circuit breaker (see WithBreaker and
// WithBreakerProbe).
const (
	// DefaultBreakerThreshold is how many consecutive failed calls to one
	// host open its breaker: it opens on the 5th.
	DefaultBreakerThreshold uint32 = 5
	// DefaultBreakerCooldown is the longest an open breaker refuses calls
	// before it lets one probe through (half-open): the wait before a
	// probe grows to it during a long outage. Set from the storm
	// simulator (docs/choosing-budgets.md): a funder that is back is found
	// within about 10 s, outages of 30 s to 10 min alike, for one probe
	// per host every 5 to 10 s while it is down.
	DefaultBreakerCooldown = 10 * time.Second
	// DefaultBreakerProbe is how long a breaker that has just opened
	// refuses calls before its first probe.
	DefaultBreakerProbe = 2 * time.Second
)

// Defaults of the per-host retry throttle (see WithRetryThrottle and
// WithThrottleRefill). The bucket and its ratio are those of gRPC's retry
// throttling (gRFC A6); the refill with time is grantretry's own floor, in
// the manner of Finagle's retry budget.
const (
	// DefaultThrottleMaxTokens is the size of each host's token bucket, and
	// where it starts.
	DefaultThrottleMaxTokens = 10
	// DefaultThrottleTokenRatio is what each success gives back; each
	// transient failure takes one whole token.
	DefaultThrottleTokenRatio = 0.1
	// DefaultThrottleRefill is the time a drained bucket takes, with no
	// success at all, to allow retries again: by then it holds more than
	// half, even once the failure that asks for a retry has taken its
	// token. The bucket refills with time at a steady rate, maxTokens/2 + 1
	// tokens (and a thousandth) per refill period: about 6 tokens a minute
	// with the defaults, so while a funder stays down, at most about 6
	// retries a minute per host beyond gRFC A6's burst.
	DefaultThrottleRefill = 60 * time.Second
)

// Defaults of what a call buffers and waits for (see WithReplayLimit and
// WithFleet).
const (
	// DefaultReplayLimit is how many bytes of a request body without GetBody the
	// Transport buffers so it can replay them (see WithReplayLimit). Requests
	// built by http.NewRequest from a *bytes.Buffer, *bytes.Reader or
	// *strings.Reader carry GetBody and are replayed through it, unbuffered. A
	// larger body without GetBody is sent once, and since the key is a hash of
	// the body it gets no derived Idempotency-Key: give such requests GetBody,
	// or set the key yourself.
	DefaultReplayLimit = 10 << 20
	// DefaultFleetLimit bounds the fleet's I/O that one attempt waits on (see
	// WithFleet): past it the call goes on with the process's local breaker
	// and throttle, as without a fleet.
	DefaultFleetLimit = 5 * time.Millisecond
)

// Limits on what a call reads and keeps of a request or a response.
const (
	// MaxClassifyPeek is the most of a response body a ClassifyFunc is shown:
	// the first 64 KiB.
	MaxClassifyPeek = 64 << 10
	// MaxLetterBody is the largest request body a Letter holds. A larger one
	// (through GetBody, or buffered under a replay limit set above it) is left
	// out, and the Letter says why.
	MaxLetterBody = 64 << 20
	// MaxSubmissionIDLen bounds the submission id given to WithSubmissionID.
	MaxSubmissionIDLen = 255
)
