package grantretry

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unicode"
)

type callOptionsKey struct{}

// callOptions is what WithCallOptions puts in a context. It is never
// modified once there: each WithCallOptions makes a new one.
type callOptions struct {
	opts []Option // policy options only, in the order given
	errs []error  // each matches ErrInvalidOption; nil when every option is valid
}

// WithCallOptions returns a copy of ctx that carries opts, options of the
// retry policy for the call made with it: a status poll that should make
// one attempt ([WithBudget](0, ...)), a call that may wait longer than the
// others, without a second [Transport]. A Transport reads them from the
// request's context and applies them over its own policy for the call's
// host: a call's options take precedence over [ForHost]'s, which take
// precedence over the Transport's. Calls made with other contexts, at
// the same time or later, keep the Transport's policy.
//
// The options a call may set are those of its own retry policy:
// [WithBackoff], [WithBudget], [WithAttemptTimeout], [WithStatusSets],
// [WithClassifier] and [WithReconciler]. The host's circuit breaker and
// retry throttle are shared by every call to the host and hold them all
// back while it is down, so no call may set them or leave them, lest a
// retry storm be one context away: [WithBreaker], [WithBreakerProbe],
// [WithRetryThrottle], [WithThrottleRefill], [WithoutBreaker] and
// [WithoutRetryThrottle] are set with [New] or [ForHost], not per call.
// Any of those, any other option (WithLogger, WithClock, ForHost, ...),
// or an invalid one, makes the call fail before anything is sent:
// RoundTrip returns an error matching [ErrInvalidOption] that names the
// option and says why, and the call ends DeadLetter ([StopInvalidOption]),
// as a call through a misconfigured Transport does.
//
// Options are applied in order, after those of a WithCallOptions that ctx
// already carries, so a later one wins. A nil option is ignored; with no
// options ctx is returned as it is. A nil ctx is taken as
// [context.Background].
func WithCallOptions(ctx context.Context, opts ...Option) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	prev := callOptionsOf(ctx)
	co := &callOptions{}
	if prev != nil {
		co.opts = append(co.opts, prev.opts...)
		co.errs = append(co.errs, prev.errs...)
	}
	var check config
	added := false
	for i, o := range opts {
		if o == nil {
			continue
		}
		added = true
		name := optionName(o)
		switch o.(type) {
		case policyOption:
		case hostOption:
			co.refuse("option %d (%s) sets or turns off the host's circuit breaker or retry throttle, which every call to the host shares to hold back a retry storm: set it with New or ForHost, not for one call", i+1, name)
			continue
		default:
			co.refuse("option %d (%s) is not part of the retry policy, and cannot be set for one call", i+1, name)
			continue
		}
		// A policy option's validity does not depend on the policy it
		// is applied to: checked once here, not at every call.
		check.errs = nil
		o.apply(&check)
		for _, err := range check.errs {
			co.refuse("%s", strings.TrimPrefix(err.Error(), ErrInvalidOption.Error()+": "))
		}
		co.opts = append(co.opts, o)
	}
	if !added {
		return ctx
	}
	return context.WithValue(ctx, callOptionsKey{}, co)
}

func (co *callOptions) refuse(format string, args ...any) {
	co.errs = append(co.errs, fmt.Errorf("%w: WithCallOptions: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// callOptionsOf returns what WithCallOptions put in ctx, nil if nothing.
func callOptionsOf(ctx context.Context) *callOptions {
	co, _ := ctx.Value(callOptionsKey{}).(*callOptions)
	return co
}

// optionName is the name of the function that made o ("WithLogger"), or
// "" if it cannot tell. Options carry no name of their own: this one is
// read from the name the compiler gives the option's function, that of
// the function literal inside its constructor ("grantretry.WithLogger.func1",
// or, with the constructor inlined into its caller,
// "main.run.WithLogger.func2"). It is for error messages only.
func optionName(o Option) string {
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Func || v.IsNil() {
		return fmt.Sprintf("%T", o)
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return "unnamed"
	}
	parts := strings.Split(f.Name()[strings.LastIndex(f.Name(), "/")+1:], ".")
	if n := len(parts); n >= 2 && strings.HasPrefix(parts[n-1], "func") {
		if name := parts[n-2]; name != "" && unicode.IsUpper(rune(name[0])) {
			return name
		}
	}
	return "unnamed"
}

// callPolicy returns the error of an invalid option, the Transport's or
// the call's (WithCallOptions), and otherwise sets the call's policy: its
// host's, with the call's options on top, if its context carries any.
func (c *call) callPolicy() error {
	if c.t.err != nil {
		return c.t.err
	}
	co := callOptionsOf(c.req.Context())
	if co == nil {
		return nil
	}
	if len(co.errs) > 0 {
		return (&config{errs: co.errs}).configError()
	}
	pol := *c.pol
	pol.errs, pol.rules = nil, nil
	for _, o := range co.opts {
		o.apply(&pol)
	}
	c.pol = &pol
	return nil
}
