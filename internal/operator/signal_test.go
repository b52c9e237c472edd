//go:build unix

package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// signalChildEnv makes the test binary the process that is signalled.
const signalChildEnv = "GRANTRETRY_SIGNAL_CHILD"

// The first SIGINT ends SignalContext's context, and the process goes on
// (to record the letter in flight); a second one, or a SIGTERM, while it
// is still busy, ends the process.
func TestSecondSignalEndsTheProcess(t *testing.T) {
	for _, second := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalChild$")
		cmd.Env = append(os.Environ(), signalChildEnv+"="+fmt.Sprint(int(second)))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("after a first SIGINT and a %v: %v, want the process ended\n%s", second, err, out)
		}
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != second {
			t.Errorf("after a first SIGINT and a %v: %v, want the process ended by the %v\n%s", second, err, second, out)
		}
	}
}

// TestSignalChild is the signalled process of
// TestSecondSignalEndsTheProcess; alone, it does nothing.
func TestSignalChild(t *testing.T) {
	var second int
	if _, err := fmt.Sscan(os.Getenv(signalChildEnv), &second); err != nil {
		t.Skip("run by TestSecondSignalEndsTheProcess")
	}
	ctx, stop := SignalContext(context.Background())
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	<-ctx.Done() // the first signal: the run records the letter in flight
	for i := 0; i < 100; i++ {
		// The handler is released just after ctx ends, on its own
		// goroutine: a signal sent before then would still be caught.
		syscall.Kill(os.Getpid(), syscall.Signal(second))
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("still running after a second signal")
	os.Exit(0)
}

// A signal's context names it as its cause, for the summary's stopped
// line.
func TestSignalContextNamesTheSignal(t *testing.T) {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not end the context")
	}
	if got := stopCause(ctx); got != "terminated (SIGTERM)" {
		t.Errorf("cause %q, want terminated (SIGTERM)", got)
	}
	ctx2, stop2 := SignalContext(context.Background())
	stop2()
	if ctx2.Err() == nil || stopCause(ctx2) != context.Canceled.Error() {
		t.Errorf("stop: %v, %q", ctx2.Err(), stopCause(ctx2))
	}
}
