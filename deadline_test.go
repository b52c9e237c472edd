package grantretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// queuedCall is a call with only what the deadline queue touches.
func queuedCall() *call {
	c := &call{}
	c.octx.Context = context.Background()
	return c
}

// checkHeap fails unless every call in d knows its place and no call's
// deadline is before its parent's.
func checkHeap(t *testing.T, d *deadlines) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, e := range d.q {
		if int(e.c.dlIdx) != i {
			t.Fatalf("q[%d].dlIdx = %d", i, e.c.dlIdx)
		}
		if p := (i - 1) / 2; i > 0 && e.when.Before(d.q[p].when) {
			t.Fatalf("q[%d] is due before its parent q[%d]", i, p)
		}
	}
}

// Calls that finish take themselves out, in any order; the queue ends the
// others at their deadline, and only those that are due.
func TestDeadlineQueueEndsOnlyDueCalls(t *testing.T) {
	var d deadlines
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	var near, far, removed []*call
	for i := range 300 {
		c := queuedCall()
		// Due after the removals below, however long a loaded machine
		// takes over them: a removed call must never have been due.
		when := now.Add(time.Duration(300+rng.IntN(30)) * time.Millisecond)
		if i%3 == 0 {
			when = now.Add(time.Hour)
			far = append(far, c)
		} else {
			near = append(near, c)
		}
		d.add(c, when, now)
	}
	checkHeap(t, &d)
	for i := 0; i < len(near); i += 4 {
		d.remove(near[i])
		removed = append(removed, near[i])
		near[i] = nil
	}
	for i := 0; i < len(far); i += 2 {
		d.remove(far[i])
	}
	checkHeap(t, &d)
	limit := time.Now().Add(5 * time.Second)
	for _, c := range near {
		if c == nil {
			continue
		}
		for context.Cause(c.callCtx()) != errCallDeadline {
			if time.Now().After(limit) {
				t.Fatal("a call past its deadline was not ended")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, c := range append(removed, far...) {
		if err := c.callCtx().Err(); err != nil {
			t.Fatalf("a call removed or not due was ended: %v", err)
		}
	}
	checkHeap(t, &d)
	d.mu.Lock()
	left := len(d.q)
	d.mu.Unlock()
	if want := len(far) / 2; left != want {
		t.Fatalf("%d calls left in the queue, want %d (the far ones not removed)", left, want)
	}
}

// The timer is armed for the earliest deadline; when that call finishes
// and a later one is queued, the later one still ends on time.
func TestDeadlineQueueRearmsForTheNextCall(t *testing.T) {
	var d deadlines
	now := time.Now()
	first, second := queuedCall(), queuedCall()
	d.add(first, now.Add(time.Millisecond), now)
	d.add(second, now.Add(20*time.Millisecond), now)
	d.remove(first)
	select {
	case <-second.callCtx().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the later call was not ended")
	}
	if late := time.Since(now.Add(20 * time.Millisecond)); late < 0 {
		t.Fatalf("ended %v before its deadline", -late)
	}
	if first.callCtx().Err() != nil {
		t.Fatal("the finished call was ended")
	}
}

// BenchmarkCallDeadline is what arming and disarming one call's deadline
// costs: a time.AfterFunc per call, as before the queue, against the
// Transport's queue; alone, and with 1000 goroutines doing it at once.
func BenchmarkCallDeadline(b *testing.B) {
	mechs := []struct {
		name string
		arm  func(s *deadlineShards, c *call) func()
	}{
		{"afterfunc", func(_ *deadlineShards, c *call) func() {
			t := time.AfterFunc(time.Minute, c.deadlineExpired)
			return func() { t.Stop() }
		}},
		{"queue", func(s *deadlineShards, c *call) func() {
			d := &s[s.pick()]
			now := time.Now()
			d.add(c, now.Add(time.Minute), now)
			return func() { d.remove(c) }
		}},
	}
	for _, m := range mechs {
		b.Run("goroutines=1/mech="+m.name, func(b *testing.B) {
			var s deadlineShards
			c := queuedCall()
			b.ReportAllocs()
			for range b.N {
				m.arm(&s, c)()
			}
		})
		b.Run("goroutines=1000/mech="+m.name, func(b *testing.B) {
			var s deadlineShards
			b.ReportAllocs()
			b.SetParallelism(500)
			b.RunParallel(func(pb *testing.PB) {
				c := queuedCall()
				for pb.Next() {
					stop := m.arm(&s, c)
					runtime.Gosched() // leave the call queued while others run
					stop()
				}
			})
		})
	}
}

// A wait that would end exactly at the deadline is refused ("at or after").
func TestWaitEndingExactlyAtDeadlineIsRefused(t *testing.T) {
	h := newHarness(t, WithBudget(10, 400*time.Millisecond),
		WithBackoff(400*time.Millisecond, 400*time.Millisecond), WithRandSource(maxSource{}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopDeadline || o.Attempts != 1 || len(h.clock.waits()) != 0 {
		t.Errorf("outcome %+v waits %v, want dead_letter (deadline) after 1 attempt, no wait", o, h.clock.waits())
	}
}

// The call's deadline ends a wait in progress as dead_letter (deadline), not
// as the caller's cancellation.
func TestCallDeadlineInterruptsWait(t *testing.T) {
	h := newHarness(t, WithBudget(3, 30*time.Millisecond), WithBackoff(time.Millisecond, time.Millisecond))
	h.clock.block = true
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := h.tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		e := mustError(t, err)
		if e.Disposition != DeadLetter || e.StopReason != StopDeadline || e.Attempts != 1 || !errors.Is(err, ErrDeadLetter) {
			t.Errorf("outcome %+v, want dead_letter (deadline) after 1 attempt", e.Outcome)
		}
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Fatal("the call's deadline did not end the wait")
	}
}
