package fleet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// dbProxy is a loopback TCP proxy to the test's database: closing it is
// the database going away for the pools that connect through it (their
// connections cut, new ones refused), while the shared server, and the
// other tests on it, go on.
type dbProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func newDBProxy(t testing.TB, target string) *dbProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

func (p *dbProxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

func (p *dbProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// Close refuses new connections and cuts every one made.
func (p *dbProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// poolThrough returns a pool on the database of direct that connects
// through p, of two connections as docs/fleet.md asks of a Coordinator's.
func poolThrough(t *testing.T, direct *pgxpool.Pool, p *dbProxy) *pgxpool.Pool {
	cfg := direct.Config().Copy()
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", p.port()
	cfg.ConnConfig.Fallbacks = nil
	cfg.MinConns, cfg.MaxConns = 2, 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func proxyTarget(direct *pgxpool.Pool) string {
	cc := direct.Config().ConnConfig
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
}

// lostFunder is a funder that answers 503 until up is set, and notes when
// each request came and from which process (header X-Process).
type lostFunder struct {
	srv *httptest.Server
	up  atomic.Bool
	mu  sync.Mutex
	got []lostHit
}

type lostHit struct {
	at   time.Time
	proc int
	ok   bool
}

func newLostFunder(t *testing.T) *lostFunder {
	f := &lostFunder{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		proc, _ := strconv.Atoi(r.Header.Get("X-Process"))
		ok := f.up.Load()
		f.mu.Lock()
		f.got = append(f.got, lostHit{time.Now(), proc, ok})
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// since returns the requests from t on.
func (f *lostFunder) since(t time.Time) []lostHit {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []lostHit
	for _, h := range f.got {
		if !h.at.Before(t) {
			out = append(out, h)
		}
	}
	return out
}

// lostProcess is one process of the fleet: its own pool through the
// proxy, Coordinator and Transport.
type lostProcess struct {
	co *Coordinator
	tr *grantretry.Transport
}

func (p lostProcess) state(key string) grantretry.FleetState {
	return p.co.Host(key, grantretry.FleetPolicy{}).State()
}

func lostCall(tr *grantretry.Transport, url string) {
	req, _ := http.NewRequest(http.MethodPost, url+"/submit", strings.NewReader(`{}`))
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
}

// The processes' breaker: a threshold of 20 failed calls, for the fleet,
// so that each process has counted only a few of them locally when the
// fleet's breaker opens.
const (
	lostThreshold = 20
	lostProbe     = 300 * time.Millisecond
	lostCooldown  = 2 * time.Second
)

// TestFleetLostMidOutageSendsOnlyProbes runs four processes against a
// funder that is down, until the fleet's breaker is open and every
// process refuses calls, then takes the database away from all of them
// (a proxy closed, the shared server untouched). The funder must get no
// more than each process's local probes: what the fleet knew carries
// over into the local breakers, which had counted no failure, since the
// fleet refused the calls. When the funder comes back, every process
// finds it.
func TestFleetLostMidOutageSendsOnlyProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an outage in real time")
	}
	direct := newPool(t)
	proxy := newDBProxy(t, proxyTarget(direct))
	f := newLostFunder(t)
	key := f.srv.URL
	const procs, workers = 4, 2
	ps := make([]lostProcess, procs)
	for i := range ps {
		co := NewCoordinator(poolThrough(t, direct, proxy), WithReread(100*time.Millisecond))
		t.Cleanup(co.Close)
		inner := &http.Transport{MaxIdleConnsPerHost: workers}
		t.Cleanup(inner.CloseIdleConnections)
		tag := strconv.Itoa(i)
		ps[i] = lostProcess{co: co, tr: grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Process", tag)
			return inner.RoundTrip(r)
		}), grantretry.WithFleet(co), grantretry.WithBreakerProbe(lostProbe), grantretry.WithBreaker(lostThreshold, lostCooldown),
			grantretry.WithBackoff(5*time.Millisecond, 20*time.Millisecond))}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range ps {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					lostCall(p.tr, f.srv.URL)
				}
			}()
		}
	}
	defer func() { close(stop); wg.Wait() }()

	waitFor(t, "every process to hear the fleet's breaker open", func() bool {
		for _, p := range ps {
			if p.state(key) != grantretry.FleetOpen {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * lostProbe) // a lease or two: the fleet's probes
	opened := len(f.since(time.Time{}))

	proxy.Close()
	lost := time.Now()
	waitFor(t, "every process to lose the fleet", func() bool {
		for _, p := range ps {
			if p.state(key) != grantretry.FleetUnknown {
				return false
			}
		}
		return true
	})
	const window = 1500 * time.Millisecond
	time.Sleep(window - time.Since(lost))
	after := f.since(lost)
	per := make([]int, procs)
	for _, h := range after {
		per[h.proc]++
	}
	// A local breaker's waits are drawn from [d/2, d], d = probe, 2
	// probe, 4 probe...: at most 3 probes in the window, with the
	// fleet's probe in flight as the database went: 4 a process.
	t.Logf("the funder got %d requests before the database went, %d in the %v after (per process %v)",
		opened, len(after), window, per)
	for i, n := range per {
		if n > 4 {
			t.Errorf("process %d sent %d requests to the down funder in the %v after it lost the fleet, want at most its probes (4)", i, n, window)
		}
	}

	// The funder back, the database still away: every process's probe
	// finds it.
	f.up.Store(true)
	back := time.Now()
	first := make([]time.Time, procs)
	waitFor(t, "every process to send again", func() bool {
		n := 0
		for _, h := range f.since(back) {
			if h.ok && first[h.proc].IsZero() {
				first[h.proc] = h.at
			}
		}
		for _, at := range first {
			if !at.IsZero() {
				n++
			}
		}
		return n == procs
	})
	earliest, latest := slices.MinFunc(first, time.Time.Compare), slices.MaxFunc(first, time.Time.Compare)
	t.Logf("funder back: first success %v after, the last process's %v after the first",
		earliest.Sub(back).Round(time.Millisecond), latest.Sub(earliest).Round(time.Millisecond))
}

// TestFleetTrailHasTheSharedBreakersChanges drives a fleet's shared
// breaker through open, a failed probe and a good one, and reads the
// fleet's trail: one breaker line for each change, marked as the
// fleet's, in the chain of the process that made it.
func TestFleetTrailHasTheSharedBreakersChanges(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	f := newLostFunder(t)
	key := f.srv.URL
	co := NewCoordinator(pool, WithReread(100*time.Millisecond))
	t.Cleanup(co.Close)
	tr := newTrail(t, pool)
	tp := grantretry.New(http.DefaultTransport, grantretry.WithFleet(co), grantretry.WithAuditTrail(tr),
		grantretry.WithBreakerProbe(100*time.Millisecond), grantretry.WithClock(instantClock{}),
		grantretry.WithBudget(0, time.Minute))
	host := co.Host(key, grantretry.FleetPolicy{})
	lostCall(tp, f.srv.URL)
	waitFor(t, "the fleet's breaker to open", func() bool {
		lostCall(tp, f.srv.URL)
		return host.State() == grantretry.FleetOpen
	})
	n := len(f.since(time.Time{}))
	waitFor(t, "the fleet's probe", func() bool {
		lostCall(tp, f.srv.URL)
		return len(f.since(time.Time{})) > n
	})
	f.up.Store(true)
	waitFor(t, "the fleet's breaker to close", func() bool {
		lostCall(tp, f.srv.URL)
		return host.State() == grantretry.FleetClosed
	})
	lostCall(tp, f.srv.URL) // its disposition commits what came before

	type line struct{ from, to string }
	var got []line
	_, err := ReadTrail(ctx, pool, func(r TrailRecord) error {
		if r.Msg != grantretry.MsgBreaker || r.Fields[grantretry.FieldBreakerFleet] != true {
			return nil
		}
		if r.Writer != tr.Writer() || r.Fields[grantretry.FieldBreaker] != key {
			return errors.New("a fleet breaker line of another writer or host: " + r.Writer)
		}
		from, _ := r.Fields[grantretry.FieldBreakerFrom].(string)
		to, _ := r.Fields[grantretry.FieldBreakerTo].(string)
		got = append(got, line{from, to})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []line{{"closed", "open"}, {"open", "half_open"}, {"half_open", "open"}, {"open", "half_open"}, {"half_open", "closed"}}
	if !slices.Equal(got, want) {
		t.Fatalf("the fleet's breaker lines in the trail: %v, want %v", got, want)
	}
}
