package grantretry

import (
	"testing"
	"time"
)

// The deadline checks of the hostile-funder tests. The fault suite over
// real TCP (the faults/ module) holds its calls to the same bounds, with a
// copy of these helpers: a module of its own cannot reach a test file here.

// hangMargin is how far past its deadline any call may end before a test
// fails. It catches hangs, on every call, in one run: scheduling under
// -race on two busy cores can delay a single call by this much, not the
// library. The precise bound is deadlineSlack.
const hangMargin = 1500 * time.Millisecond

// deadlineSlack is how far past the time it should end a call may end, in
// the best of deadlineRuns runs of the same scenario. Measured under -race
// on two cores, a call cut by its deadline ends 0.2 to 2 ms past it. The
// defects this catches (sleeping past the deadline, draining a body, a
// missed cancellation left to an attempt timeout or a backoff step) cost
// tens of milliseconds. 5 ms is a few times the first and well under the
// second.
const deadlineSlack = 5 * time.Millisecond

// deadlineRuns is how many runs of a scenario may miss deadlineSlack before
// the test fails. The scheduler only ever adds delay, and seldom to every
// run; a defect adds its delay to each.
const deadlineRuns = 5

// checkEndsOnTime runs a scenario up to deadlineRuns times and passes as
// soon as a run's call ended within deadlineSlack of want (measured from
// the start of RoundTrip); it fails with every overshoot if none did. A call
// that ended more than early before want fails at once, since ending early
// is never noise. run(i) makes run i's call with a fresh Transport and
// submission, checks everything else about it, and returns how long it
// took.
func checkEndsOnTime(t *testing.T, want, early time.Duration, run func(i int) time.Duration) {
	t.Helper()
	var over []time.Duration
	for i := 0; i < deadlineRuns; i++ {
		took := run(i)
		if took < want-early {
			t.Errorf("run %d: call ended after %v, more than %v before %v", i+1, took, early, want)
			return
		}
		over = append(over, took-want)
		t.Logf("run %d: call ended after %v, %v past %v", i+1, took, took-want, want)
		if took-want <= deadlineSlack {
			return
		}
	}
	t.Errorf("call ended %v past %v in its %d runs, want within %v in at least one", over, want, deadlineRuns, deadlineSlack)
}

// checkTook is the coarse bound every call is held to: it catches hangs.
func checkTook(t *testing.T, took, deadline time.Duration) {
	t.Helper()
	if took > deadline+hangMargin {
		t.Errorf("call took %v, past its %v deadline", took, deadline)
	}
}
