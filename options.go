package grantretry

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// An Option configures a Transport. Options are applied in order by New; the
// Transport never changes afterwards.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// policyOption is an option of the retry policy: one that ForHost may set
// for one host, and WithCallOptions for one call.
type policyOption func(*config)

func (f policyOption) apply(c *config) { f(c) }

// hostOption is an option of the retry policy that shapes state every call
// to a host shares, its circuit breaker or its retry throttle, or turns it
// off: ForHost may set it for one host, but no call can set it for itself.
type hostOption func(*config)

func (f hostOption) apply(c *config) { f(c) }

// config is everything New assembles. It is copied into the Transport and
// never written again.
type config struct {
	base, cap      time.Duration
	maxRetries     int
	deadline       time.Duration
	attemptTimeout time.Duration
	breakerOn      bool
	threshold      uint32
	cooldown       time.Duration
	probe          time.Duration
	throttleOn     bool
	maxTokens      float64
	tokenRatio     float64
	refill         time.Duration
	log            *zap.Logger
	slog           *slog.Logger // nil: no slog logger (WithSlog)
	sets           statusSets
	clock          Clock
	rand           randSource
	replayLimit    int64
	redact         redactor
	letters        DeadLetterSink
	classifier     ClassifyFunc // nil: the status sets alone
	rules          []hostRule   // ForHost's, in the order given
	reconciler     ReconcileFunc
	trail          AuditSink            // nil: no audit trail
	trailCore      zapcore.Core         // writes the trail's records; nil without a trail
	fleet          Fleet                // nil: every process on its own
	meterProvider  metric.MeterProvider // nil: no metrics
	tracerProvider trace.TracerProvider // nil: no spans
	errs           []error
}

func (c *config) invalid(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

func defaultConfig() config {
	return config{
		base:        DefaultBackoffBase,
		cap:         DefaultBackoffCap,
		maxRetries:  DefaultMaxRetries,
		deadline:    DefaultDeadline,
		breakerOn:   true,
		threshold:   DefaultBreakerThreshold,
		cooldown:    DefaultBreakerCooldown,
		probe:       DefaultBreakerProbe,
		throttleOn:  true,
		maxTokens:   DefaultThrottleMaxTokens,
		tokenRatio:  DefaultThrottleTokenRatio,
		refill:      DefaultThrottleRefill,
		log:         zap.NewNop(),
		sets:        defaultStatusSets,
		clock:       systemClock{},
		rand:        runtimeRand{},
		replayLimit: DefaultReplayLimit,
	}
}

// WithBackoff sets the full-jitter backoff: the wait before retry n is drawn
// uniformly from [0, min(cap, base*2^n)]. Defaults DefaultBackoffBase and
// DefaultBackoffCap. base must be positive and cap at least base.
func WithBackoff(base, cap time.Duration) Option {
	return policyOption(func(c *config) {
		if base <= 0 || cap < base {
			c.invalid("WithBackoff(%v, %v): want 0 < base <= cap", base, cap)
			return
		}
		c.base, c.cap = base, cap
	})
}

// WithBudget bounds one logical call: at most maxRetries retries, and a
// deadline from its first attempt that bounds waits and attempts in flight
// alike (the caller's context deadline applies too, if earlier). Defaults
// DefaultMaxRetries and DefaultDeadline. maxRetries 0 turns retries off;
// it must not be negative, and the deadline must be positive.
func WithBudget(maxRetries int, deadline time.Duration) Option {
	return policyOption(func(c *config) {
		if maxRetries < 0 || deadline <= 0 {
			c.invalid("WithBudget(%d, %v): want maxRetries >= 0 and deadline > 0", maxRetries, deadline)
			return
		}
		c.maxRetries, c.deadline = maxRetries, deadline
	})
}

// WithAttemptTimeout bounds each attempt from the moment it is sent until
// its response headers arrive (and, for a response that is discarded, until
// its body is drained). A timed-out attempt is transient
// ("transport:timeout"). Zero, the default, means no per-attempt bound
// beyond the call's deadline.
func WithAttemptTimeout(d time.Duration) Option {
	return policyOption(func(c *config) {
		if d < 0 {
			c.invalid("WithAttemptTimeout(%v): want d >= 0", d)
			return
		}
		c.attemptTimeout = d
	})
}

// WithBreaker sets the per-host circuit breaker: it opens on the
// threshold-th consecutive failed call to a host (a call counts once,
// however many of its attempts fail), refuses calls to it for a while,
// then lets one probe through; the wait before a probe starts at the
// WithBreakerProbe interval, doubles with each failed probe, and is never
// longer than cooldown. Defaults DefaultBreakerThreshold and
// DefaultBreakerCooldown. threshold and cooldown must be positive.
func WithBreaker(threshold uint32, cooldown time.Duration) Option {
	return hostOption(func(c *config) {
		if threshold == 0 || cooldown <= 0 {
			c.invalid("WithBreaker(%d, %v): want threshold > 0 and cooldown > 0", threshold, cooldown)
			return
		}
		c.breakerOn, c.threshold, c.cooldown = true, threshold, cooldown
	})
}

// WithBreakerProbe sets how long a breaker that has just opened waits
// before its first probe (default DefaultBreakerProbe). Each failed probe
// doubles the wait, up to WithBreaker's cooldown, and each wait is drawn
// from its upper half so that many processes do not probe in step. A
// probe longer than the cooldown is cut to it. d must be positive.
func WithBreakerProbe(d time.Duration) Option {
	return hostOption(func(c *config) {
		if d <= 0 {
			c.invalid("WithBreakerProbe(%v): want d > 0", d)
			return
		}
		c.probe = d
	})
}

// WithoutBreaker turns the per-host circuit breaker off: calls to a host
// that is down are still bounded by the budget and the retry throttle, but
// none is short-circuited. For pipelines that break circuits elsewhere.
// It is set with New or ForHost: [WithCallOptions] refuses it.
func WithoutBreaker() Option {
	return hostOption(func(c *config) { c.breakerOn = false })
}

// WithRetryThrottle sets the per-host retry throttle (gRFC A6): a bucket of
// maxTokens tokens, shared by all calls of the Transport to one host. Each
// transient failure takes one token, each 1xx-3xx response gives back
// tokenRatio, and retries are refused while the bucket holds maxTokens/2 or
// less; a refused retry ends the call at once as DeadLetter
// ("retry_throttled"). Terminal answers and cancellations leave the bucket
// as it is. The bucket also refills with time (see WithThrottleRefill).
// Defaults DefaultThrottleMaxTokens and DefaultThrottleTokenRatio.
// maxTokens must be in (0, 1000] and tokenRatio in [0.001, maxTokens];
// tokens are counted in thousandths.
func WithRetryThrottle(maxTokens, tokenRatio float64) Option {
	return hostOption(func(c *config) {
		if !(maxTokens > 0 && maxTokens <= 1000 && tokenRatio >= 0.001 && tokenRatio <= maxTokens) {
			c.invalid("WithRetryThrottle(%v, %v): want 0 < maxTokens <= 1000 and 0.001 <= tokenRatio <= maxTokens", maxTokens, tokenRatio)
			return
		}
		c.throttleOn, c.maxTokens, c.tokenRatio = true, maxTokens, tokenRatio
	})
}

// WithThrottleRefill sets how fast the retry throttle's bucket refills with
// time, on the Transport's Clock, successes or not: d is the time after
// which a drained bucket allows retries again (a call that fails then
// still gets its retry, its own failure's token taken). The refill is
// steady, maxTokens/2 + 1 tokens per d, so while a funder stays down it
// allows at most about that many retries per d per host beyond gRFC A6's
// burst; a storm of failures drains the bucket far faster than that. A
// longer d is closer to A6, which refills on successes only. Default
// DefaultThrottleRefill. d must be at least a millisecond, the resolution
// the bucket keeps time in. It does not turn on a throttle that
// WithoutRetryThrottle turned off.
func WithThrottleRefill(d time.Duration) Option {
	return hostOption(func(c *config) {
		if d < time.Millisecond {
			c.invalid("WithThrottleRefill(%v): want d >= 1ms", d)
			return
		}
		c.refill = d
	})
}

// WithoutRetryThrottle turns the per-host retry throttle off, leaving each
// call its own budget and nothing that bounds retries across calls. Only
// for a funder that can absorb a fleet retrying at once. It is set with
// New or ForHost: [WithCallOptions] refuses it.
func WithoutRetryThrottle() Option {
	return hostOption(func(c *config) { c.throttleOn = false })
}

// WithLogger sets the audit logger. The default, [zap.NewNop], writes
// nothing and costs nothing. The audit lines and their fields are described
// by the Msg* and Field* constants. Audit lines are never sampled: they are
// written past the samplers of l's core (zap.NewProductionConfig samples),
// and l is an invalid option if its core holds one grantretry cannot reach
// past (docs/audit-lines.md says which). l's own lines keep their sampling.
// [WithSlog] sends the same lines to a log/slog logger, with or without l.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.invalid("WithLogger(nil)")
			return
		}
		ul, err := unsampled(l)
		if err != nil {
			c.invalid("%v", err)
			return
		}
		c.log = ul
	})
}

// WithStatusSets replaces the transient status set (default 429, 500, 502,
// 503, 504) and the terminal one (default 400, 401, 403, 404, 422). Any
// other status of 400 or more stays terminal as "unclassified:<code>".
// Codes must be 400 to 599 and in at most one set.
func WithStatusSets(transient, terminal []int) Option {
	return policyOption(func(c *config) {
		seen := make(map[int]bool)
		for _, code := range append(append([]int(nil), transient...), terminal...) {
			if code < 400 || code > 599 {
				c.invalid("WithStatusSets: status %d is not a 4xx or 5xx", code)
				return
			}
			if seen[code] {
				c.invalid("WithStatusSets: status %d is listed twice", code)
				return
			}
			seen[code] = true
		}
		c.sets = newStatusSets(transient, terminal)
	})
}

// WithClock sets the clock the retry policy reads and waits on. Tests use
// it to run whole retry schedules without sleeping; see Clock for what it
// does not govern.
func WithClock(clk Clock) Option {
	return optionFunc(func(c *config) {
		if clk == nil {
			c.invalid("WithClock(nil)")
			return
		}
		c.clock = clk
	})
}

// WithRandSource makes the jitter draw from src, for reproducible schedules
// in tests and simulations. The Transport serialises access to src. The
// default is math/rand/v2's unseeded per-goroutine source: leave it in
// production, where a shared seed would line a fleet up.
func WithRandSource(src rand.Source) Option {
	return optionFunc(func(c *config) {
		if src == nil {
			c.invalid("WithRandSource(nil)")
			return
		}
		c.rand = &lockedRand{r: rand.New(src)}
	})
}

// WithReplayLimit sets how many bytes of a body without GetBody are buffered
// to replay it (default DefaultReplayLimit). A larger body is sent exactly
// once, never retried, and the audit line says why. It must be positive.
func WithReplayLimit(n int64) Option {
	return optionFunc(func(c *config) {
		if n <= 0 {
			c.invalid("WithReplayLimit(%d): want n > 0", n)
			return
		}
		c.replayLimit = n
	})
}

// WithRedact names more headers and query parameters that carry secrets,
// matched without regard to case, beyond the built-in ones (see
// SecretName). The values of secret
// headers are scrubbed from audit lines and error messages (as every query
// value is), and secret headers and query parameters are left out of dead
// letters. Names must be valid header names; repeated calls add up.
func WithRedact(names ...string) Option {
	return optionFunc(func(c *config) {
		extra := make(map[string]bool, len(c.redact.extra)+len(names))
		for n := range c.redact.extra {
			extra[n] = true
		}
		for _, n := range names {
			if !validHeaderName(n) {
				c.invalid("WithRedact(%q): not a valid header or parameter name", n)
				return
			}
			extra[strings.ToLower(n)] = true
		}
		c.redact.extra = extra
	})
}

// WithDeadLetter hands every call that ends DeadLetter or CircuitOpen to
// sink, as a *Letter, before RoundTrip returns; the Outcome carries the
// letter's ID, or in RecordErr why it could not be kept. deadletter.Dir
// (package github.com/grantretry/grantretry/deadletter) is the durable
// sink; deadletter.Redeliver sends a letter again.
// A Transport without this option keeps no letters.
func WithDeadLetter(sink DeadLetterSink) Option {
	return optionFunc(func(c *config) {
		if isNil(sink) {
			c.invalid("WithDeadLetter(nil)")
			return
		}
		c.letters = sink
	})
}

// isNil reports whether v is nil, or an interface holding a nil pointer,
// map, slice, func or channel: a typed nil that would panic on first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// configError is the error every call of a misconfigured Transport returns.
func (c *config) configError() error {
	switch len(c.errs) {
	case 0:
		return nil
	case 1:
		return c.errs[0]
	}
	return &optionErrors{errs: c.errs}
}

// optionErrors is several invalid options in one error, on one line: an
// error is often logged as one, and errors.Join's newlines split it. Each
// of them matches ErrInvalidOption. It is used by pointer, so that the
// error can be compared with ==, as errors.Is does.
type optionErrors struct{ errs []error }

func (e *optionErrors) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidOption.Error())
	fmt.Fprintf(&b, ": %d options are invalid: ", len(e.errs))
	prefix := ErrInvalidOption.Error() + ": "
	for i, err := range e.errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.TrimPrefix(err.Error(), prefix))
	}
	return b.String()
}

// Unwrap returns each invalid option's error, for errors.Is and errors.As.
func (e *optionErrors) Unwrap() []error { return e.errs }

var _ http.RoundTripper = (*Transport)(nil)
