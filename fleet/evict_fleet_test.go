package fleet

import (
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// This process called down.test while it was up. Another process then
// opened the fleet's breaker for it, and this one learned so. This process
// makes no call to down.test for HostIdle: its local state (closed, full)
// is at rest, so it is dropped and the Coordinator forgets the host. The
// next call to down.test, with the fleet's breaker still open, must be
// refused, not sent.
func TestEvictedHostKeepsTheFleetsOpenBreaker(t *testing.T) {
	pool := newPool(t)
	policy := grantretry.ForHost("down.test", grantretry.WithBreaker(1, time.Hour))
	var up atomic.Bool
	up.Store(true)
	var sent atomic.Int64
	funder := answerAll(func(h string) int {
		if h != "down.test" {
			return http.StatusOK
		}
		sent.Add(1)
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	c2 := NewCoordinator(pool)
	defer c2.Close()
	clk := &tickClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	p2 := grantretry.New(funder, grantretry.WithFleet(c2), grantretry.WithClock(clk), grantretry.WithBudget(0, time.Minute), policy)
	if code := get(t, p2, "down.test"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}

	up.Store(false)
	c1 := NewCoordinator(pool)
	defer c1.Close()
	p1 := grantretry.New(funder, grantretry.WithFleet(c1), grantretry.WithBudget(0, time.Minute), policy)
	get(t, p1, "down.test") // opens the fleet's breaker
	key := "http://down.test:80"
	waitFor(t, "this process to learn the fleet's breaker is open", func() bool {
		c2.mu.Lock()
		defer c2.mu.Unlock()
		h := c2.hosts[key].Value()
		return h != nil && h.State() == grantretry.FleetOpen
	})
	before := sent.Load()
	if get(t, p2, "down.test"); sent.Load() != before {
		t.Fatalf("a call with the fleet's breaker known open was sent")
	}
	clk.advance(grantretry.HostIdle + time.Minute)
	for i := range 200 {
		get(t, p2, redirectTarget(i))
	}
	for range 100 {
		runtime.GC()
		c2.mu.Lock()
		gone := c2.hosts[key].Value() == nil
		c2.mu.Unlock()
		if gone {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c2.mu.Lock()
	t.Logf("forgotten: %v", c2.hosts[key].Value() == nil)
	c2.mu.Unlock()
	before = sent.Load()
	code := get(t, p2, "down.test")
	if n := sent.Load() - before; n != 0 {
		t.Fatalf("after its state was dropped, a call to down.test was sent (status %d) while the fleet's breaker is open", code)
	}
}
