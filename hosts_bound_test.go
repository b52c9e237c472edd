package grantretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
)

// answering is an inner transport that answers every request itself, with
// no network: these tests are about the Transport's per-host state, not
// sockets. status decides each answer by the request's host.
type answering struct{ status func(host string) int }

func (a answering) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	code := http.StatusOK
	if a.status != nil {
		code = a.status(req.URL.Hostname())
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// distinctHost is the i-th of a funder's redirect targets: 127.a.b.c.
func distinctHost(i int) string {
	i++
	return fmt.Sprintf("127.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
}

// callHost makes one GET to host through tr, and returns its status.
func callHost(t testing.TB, tr *Transport, host string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/v1/applications", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// heapInuse is the heap in use once the garbage is collected.
func heapInuse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func (h *hosts) count() (states, spellings int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	states = len(h.byKey)
	if m := h.aliases.Load(); m != nil {
		spellings = len(*m)
	}
	h.moreAliases.Range(func(any, any) bool { spellings++; return true })
	return states, spellings
}

// TestPerHostStateStaysFlatOver100000Hosts is a funder that sends each
// call to a new host: the Transport's breakers, throttles, spellings and
// named series must not grow with the number of hosts. The bound is the
// cost of one kept host, measured in the same run on a Transport that
// keeps 2,000: from 10,000 hosts to 100,000, the heap may grow by at most
// a tenth of what keeping the 90,000 new ones would take.
func TestPerHostStateStaysFlatOver100000Hosts(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 calls")
	}
	opts := func(clk Clock) []Option {
		return []Option{WithClock(clk), WithMeterProvider(noop.NewMeterProvider())}
	}

	// What one kept host costs: 2,000 hosts on a clock that stands
	// still, so that none is idle and none is dropped.
	base := heapInuse()
	keep := New(answering{}, opts(newFakeClock())...)
	const kept = 2000
	for i := range kept {
		callHost(t, keep, distinctHost(i))
	}
	perHost := float64(heapInuse()-base) / kept
	if n, _ := keep.hosts.count(); n != kept {
		t.Fatalf("the measuring Transport keeps %d hosts, want %d", n, kept)
	}
	runtime.KeepAlive(keep)
	keep = nil

	clk := newFakeClock()
	tr := New(answering{}, opts(clk)...)
	var at10k uint64
	for i := range 100_000 {
		if code := callHost(t, tr, distinctHost(i)); code != http.StatusOK {
			t.Fatalf("call %d: status %d", i, code)
		}
		clk.advance(time.Second) // each host idle for HostIdle after 600 more calls
		if i+1 == 10_000 {
			at10k = heapInuse()
		}
	}
	at100k := heapInuse()
	growth := float64(at100k) - float64(at10k)
	allowed := 90_000 * perHost / 10
	t.Logf("one kept host %.0f B; heap in use %d B at 10,000 hosts, %d B at 100,000: %+.0f B, allowed %.0f",
		perHost, at10k, at100k, growth, allowed)
	if growth > allowed {
		t.Errorf("the heap grew by %.0f B from 10,000 hosts to 100,000, beyond %.0f B (a tenth of %.0f B a host)", growth, allowed, perHost)
	}
	states, spellings := tr.hosts.count()
	// Hosts idle for HostIdle are dropped once the states have doubled.
	idleBound := 2*int(HostIdle/time.Second) + minSweep
	if states > idleBound || spellings > maxSpellings*idleBound {
		t.Errorf("after 100,000 hosts the Transport keeps %d states and %d spellings, want at most %d and %d", states, spellings, idleBound, maxSpellings*idleBound)
	}
	tr.hosts.mu.Lock()
	named, other := len(tr.hosts.named), len(tr.hosts.other)
	tr.hosts.mu.Unlock()
	if named != MaxHostSeries || other != 1 {
		t.Errorf("%d hosts named on instruments and %d OtherHost series, want %d and 1", named, other, MaxHostSeries)
	}
	runtime.KeepAlive(tr)
}

// TestPerHostStateIsCappedAtMaxHosts: on a clock that stands still no host
// is ever idle, and the states stop at the cap all the same.
func TestPerHostStateIsCappedAtMaxHosts(t *testing.T) {
	tr := New(answering{}, WithClock(newFakeClock()))
	const limit = 200
	tr.hosts.max = limit
	for i := range 5000 {
		callHost(t, tr, distinctHost(i))
		if n, _ := tr.hosts.count(); n > limit {
			t.Fatalf("after %d hosts the Transport keeps %d, beyond its cap of %d", i+1, n, limit)
		}
	}
}

// TestHostStateIsDroppedOnlyAtRest: a host idle for HostIdle is dropped
// if its state is as a new one would be, and kept if its breaker is open,
// its breaker counts a failure, its bucket is below full, or a call is
// in flight on it: dropping those would forget protection against a
// funder that is down, or leave a call reporting to a state its host no
// longer has.
func TestHostStateIsDroppedOnlyAtRest(t *testing.T) {
	clk := newFakeClock()
	clk.freeze()
	const (
		open    = "127.1.0.1" // breaker open
		failing = "127.1.0.2" // one failed call counted
		drained = "127.1.0.3" // bucket below full, breaker closed by a success
		resting = "127.1.0.4"
		busy    = "127.1.0.5" // a call in flight
	)
	var mu sync.Mutex
	down := map[string]bool{open: true, failing: true, drained: true}
	entered, release := make(chan struct{}), make(chan struct{})
	inner := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Hostname() == busy {
			close(entered)
			<-release
		}
		mu.Lock()
		d := down[req.URL.Hostname()]
		mu.Unlock()
		code := http.StatusOK
		if d {
			code = http.StatusServiceUnavailable
		}
		return answering{status: func(string) int { return code }}.RoundTrip(req)
	})
	// A refill so slow that the drained bucket is still short of full
	// after HostIdle.
	tr := New(inner, WithClock(clk), WithBudget(0, time.Minute), WithBreaker(3, time.Hour), WithThrottleRefill(24*time.Hour))
	for range 3 {
		callHost(t, tr, open)
	}
	callHost(t, tr, failing)
	callHost(t, tr, drained)
	mu.Lock()
	down[drained] = false
	mu.Unlock()
	callHost(t, tr, drained) // ends the run of failures; the bucket is not full yet
	callHost(t, tr, resting)
	done := make(chan struct{})
	go func() { defer close(done); callHost(t, tr, busy) }()
	<-entered

	before := map[string]*hostState{}
	for _, h := range []string{open, failing, drained, resting, busy} {
		before[h] = tr.hosts.get("http://" + h + ":80")
	}
	if !before[open].breaker.isOpen() {
		t.Fatal("the breaker of the host that is down did not open")
	}
	if before[drained].throttle.fullAt(clk.Now()) {
		t.Fatal("the bucket of the host that failed is full")
	}

	clk.advance(HostIdle + time.Second)
	for i := range 2 * minSweep {
		callHost(t, tr, distinctHost(1000+i)) // inserts, which sweep
	}
	tr.hosts.mu.Lock()
	now := make(map[string]*hostState, len(before))
	for h := range before {
		now[h] = tr.hosts.byKey["http://"+h+":80"]
	}
	tr.hosts.mu.Unlock()
	for _, h := range []string{open, failing, drained, busy} {
		if now[h] != before[h] {
			t.Errorf("the state of %s was dropped", h)
		}
	}
	if now[resting] != nil {
		t.Errorf("the state of %s, at rest and idle for HostIdle, was kept", resting)
	}
	close(release)
	<-done

	// Once the call has ended and the bucket has refilled, both go: the
	// busy host at rest, the drained one full again.
	clk.advance(HostIdle + 24*time.Hour)
	for i := range 4 * minSweep {
		callHost(t, tr, distinctHost(2000+i))
	}
	tr.hosts.mu.Lock()
	busyKept, drainedKept := tr.hosts.byKey["http://"+busy+":80"], tr.hosts.byKey["http://"+drained+":80"]
	openKept := tr.hosts.byKey["http://"+open+":80"]
	tr.hosts.mu.Unlock()
	if busyKept != nil || drainedKept != nil {
		t.Errorf("kept once at rest and idle: busy %v, drained %v", busyKept != nil, drainedKept != nil)
	}
	if openKept != before[open] {
		t.Error("the open breaker was dropped for idleness")
	}
}

// TestHostsAtCapDropRestingBeforeProtected: at MaxHosts, the hosts at rest
// go first, least recently used first; the open breakers stay while there
// are such hosts to drop.
func TestHostsAtCapDropRestingBeforeProtected(t *testing.T) {
	clk := newFakeClock()
	inner := answering{status: func(host string) int {
		if strings.HasPrefix(host, "127.9.") {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}}
	tr := New(inner, WithClock(clk), WithBudget(0, time.Minute), WithBreaker(1, time.Hour))
	const limit = 100
	tr.hosts.max = limit
	var opened []string
	for i := range 10 {
		h := fmt.Sprintf("127.9.0.%d", i+1)
		callHost(t, tr, h)
		opened = append(opened, h)
	}
	for i := range 1000 {
		callHost(t, tr, distinctHost(i))
		clk.advance(time.Millisecond)
	}
	for _, h := range opened {
		hs := tr.hosts.get("http://" + h + ":80")
		if !hs.breaker.isOpen() {
			t.Errorf("%s: its open breaker was dropped at the cap while hosts at rest were left", h)
		}
	}
}

// TestManySpellingsOfOneHostStayBounded: a host spelled many ways keeps
// at most maxSpellings of them, and every spelling still finds its state.
func TestManySpellingsOfOneHostStayBounded(t *testing.T) {
	tr := New(answering{}, WithClock(newFakeClock()))
	var first *hostState
	for i := range 1000 {
		u := mustURL(t, fmt.Sprintf("http://funder.test:%s80/", strings.Repeat("0", i)))
		hs := tr.hosts.forURL(u)
		hs.inflight.Add(-1)
		if first == nil {
			first = hs
		} else if hs != first {
			t.Fatalf("spelling %d found another state", i)
		}
	}
	if _, n := tr.hosts.count(); n > maxSpellings {
		t.Errorf("%d spellings kept for one host, want at most %d", n, maxSpellings)
	}
}

// TestDroppedHostIsNotHeldByARacingCall: calls that race the sweep on a
// host it drops either hold the old state before it is dropped (and so
// keep it) or get a new one; none holds a dropped state.
func TestDroppedHostIsNotHeldByARacingCall(t *testing.T) {
	clk := newFakeClock()
	tr := New(answering{}, WithClock(clk))
	u := mustURL(t, "http://funder.test/")
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hs := tr.hosts.forURL(u)
				if hs.inflight.Load() <= 0 {
					t.Error("a call holds a dropped state")
				}
				hs.inflight.Add(-1)
			}
		}()
	}
	for i := range 20_000 {
		clk.advance(HostIdle)
		hs := tr.hosts.forURL(mustURL(t, "http://"+distinctHost(i)+"/"))
		hs.inflight.Add(-1)
	}
	cancel()
	wg.Wait()
}
