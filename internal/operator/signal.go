package operator

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// SignalContext returns a context that ends at the first SIGINT or
// SIGTERM, so that a run can finish and record the letter in flight, then
// stop; its cause (context.Cause) is a StopSignal naming the signal. Only
// the first is caught: from then on the signals have Go's default action,
// so a second one ends the process at once. stop releases the signals;
// call it when the run is over.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var once sync.Once
	release := func() { once.Do(func() { signal.Stop(ch) }) }
	go func() {
		select {
		case sig := <-ch:
			release() // before ctx ends: a second signal meets the default action
			cancel(StopSignal{sig})
		case <-ctx.Done():
			release()
		}
	}()
	return ctx, func() { release(); cancel(context.Canceled) }
}

// StopSignal is the cause of a SignalContext ended by a signal.
type StopSignal struct{ Signal os.Signal }

// Error names the signal as a run's summary says it: "interrupt (SIGINT)",
// "terminated (SIGTERM)".
func (s StopSignal) Error() string {
	switch s.Signal {
	case os.Interrupt:
		return "interrupt (SIGINT)"
	case syscall.SIGTERM:
		return "terminated (SIGTERM)"
	}
	return s.Signal.String()
}

// stopCause says what ended ctx, as the summary's "stopped:" line does:
// the signal, or the context's cause.
func stopCause(ctx context.Context) string {
	cause := context.Cause(ctx)
	var sig StopSignal
	if errors.As(cause, &sig) {
		return sig.Error()
	}
	if cause == nil {
		return ""
	}
	return cause.Error()
}
