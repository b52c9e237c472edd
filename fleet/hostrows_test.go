package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// answerAll answers every request itself, with no network, by host.
type answerAll func(host string) int

func (a answerAll) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: a(req.URL.Hostname()), Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// tickClock is a Clock that moves on only when told to.
type tickClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *tickClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *tickClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func get(t testing.TB, rt http.RoundTripper, host string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/v1/applications", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// held is how many hosts the Coordinator holds in memory.
func (c *Coordinator) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.hosts)
}

func redirectTarget(i int) string {
	i++
	return fmt.Sprintf("127.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
}

// TestCoordinatorHostsStayBoundedOver100000Hosts: a funder that sends
// each call to a new host makes the Transport drop the hosts it no longer
// holds, and the Coordinator forgets them with it: its map is bounded by
// what the Transports keep, not by every host they ever met.
func TestCoordinatorHostsStayBoundedOver100000Hosts(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 calls")
	}
	c := NewCoordinator(newPool(t), WithReread(time.Hour))
	defer c.Close()
	clk := &tickClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	tr := grantretry.New(answerAll(func(string) int { return http.StatusOK }),
		grantretry.WithFleet(c), grantretry.WithClock(clk))
	const hosts = 100_000
	for i := range hosts {
		if code := get(t, tr, redirectTarget(i)); code != http.StatusOK {
			t.Fatalf("call %d: status %d", i, code)
		}
		clk.advance(time.Second)
	}
	// The Transport keeps the hosts of the last HostIdle, twice over at
	// most before it sweeps; the Coordinator, once the collector has run
	// the cleanups of the rest, as many.
	bound := 2*int(grantretry.HostIdle/time.Second) + 64
	// The collector queues the cleanups of the dropped hosts, and one
	// goroutine runs them, under the race detector slowly: wait for them
	// (a bound on the wait, not a timing the test measures).
	n := c.held()
	for end := time.Now().Add(30 * time.Second); n > bound && time.Now().Before(end); n = c.held() {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n > bound {
		t.Errorf("after %d hosts the Coordinator holds %d, want at most %d", hosts, n, bound)
	}
	runtime.KeepAlive(tr)
}

// TestCoordinatorSweepsRowsAtRestAndKeepsProtectingOnes: the rows of hosts
// that failed once and whose bucket has refilled are deleted by the sweep
// once idle; an open breaker's row, a bucket still short of full, and a
// row busy within the idle window are kept.
func TestCoordinatorSweepsRowsAtRestAndKeepsProtectingOnes(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	c := NewCoordinator(pool, WithReread(time.Hour))
	defer c.Close()
	clk := &tickClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	tr := grantretry.New(answerAll(func(string) int { return http.StatusServiceUnavailable }),
		grantretry.WithFleet(c), grantretry.WithClock(clk), grantretry.WithBudget(0, time.Minute),
		grantretry.WithThrottleRefill(time.Millisecond), // full again at once
		grantretry.ForHost("open.test", grantretry.WithBreaker(1, time.Hour)),
		grantretry.ForHost("drained.test", grantretry.WithThrottleRefill(24*time.Hour)),
	)
	const failing = 300
	for i := range failing {
		get(t, tr, redirectTarget(i))
	}
	get(t, tr, "open.test")
	get(t, tr, "drained.test")
	// Reports cut at the Transport's limit land a little later (detach),
	// each within reportLimit.
	for len(c.slots) > 0 {
		time.Sleep(time.Millisecond)
	}
	rows := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_hosts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != failing+2 {
		t.Fatalf("%d rows after %d failing hosts and 2 more, want %d (a report cut at its limit?)", n, failing, failing+2)
	}
	c.sweep(ctx, time.Hour)
	if n := rows(); n != failing+2 {
		t.Fatalf("the sweep deleted rows that failed within the idle window: %d left of %d", n, failing+2)
	}
	c.sweep(ctx, 0)
	var left []string
	r, err := pool.Query(ctx, `SELECT host FROM grantretry_hosts ORDER BY host`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var h string
		if err := r.Scan(&h); err != nil {
			t.Fatal(err)
		}
		left = append(left, h)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"http://drained.test:80", "http://open.test:80"}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("rows left after the sweep: %v, want %v", left, want)
	}

	// A host whose row was swept starts again from no row: closed, full.
	if code := get(t, tr, redirectTarget(0)); code != http.StatusServiceUnavailable {
		t.Errorf("a swept host's next call: status %d, want its funder's 503", code)
	}
	for len(c.slots) > 0 { // its report too may land after the call
		time.Sleep(time.Millisecond)
	}
	if n := rows(); n != 3 {
		t.Errorf("%d rows after a swept host failed again, want 3", n)
	}
}
