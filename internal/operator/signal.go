package operator

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext returns a context that ends at the first SIGINT or
// SIGTERM, so that a run can finish and record the letter in flight, then
// stop. Only the first is caught: from then on the signals have Go's
// default action, so a second one ends the process at once. stop releases
// the signals; call it when the run is over.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, stop = signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}
