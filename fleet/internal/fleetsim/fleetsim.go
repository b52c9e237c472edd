// Package fleetsim runs the fleet storm: P Transports against one
// loopback funder that goes down and comes back, either each on its local
// state or sharing a breaker and a retry budget through the fleet's
// database, and measures fleet mode's targets (docs/fleet.md). The P
// Transports run in one OS process but share nothing but the database:
// each has its own Coordinator, its own connection pool and its own
// listener, so what one knows of the others comes only through
// PostgreSQL, as between OS processes. (16 OS processes would measure
// the same protocol and add 16 Go runtimes contending for this machine's
// 2 cores.)
package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config is one storm.
type Config struct {
	Processes int           // P
	Workers   int           // workers per process
	Pace      time.Duration // a worker's pause between calls
	Before    time.Duration // funder up
	Outage    time.Duration // funder down (503)
	After     time.Duration // funder up again
	Fleet     bool          // share the breaker and budget through DSN's database
	// NoBreaker turns every Transport's breaker off: only the retry
	// budget (local, shared or single) bounds the retries, which is what
	// the retries target measures.
	NoBreaker bool
	DSN       string
	// Seed, if not 0, spreads the workers: each starts after a random
	// part of Pace and pauses between Pace/2 and 3*Pace/2, drawn from
	// Seed. With 0 every worker starts at once and pauses exactly Pace,
	// so the workers call in step: bursts of P*Workers calls at once.
	Seed uint64
}

// Result is what one storm measured.
type Result struct {
	Config
	Calls            int
	OutageAttempts   int           // attempts the funder got while down
	OutageRetries    int           // retries (attempts past a call's first) by calls started in the outage or just before it
	StoppedAfter     int           // attempts in the outage before every process refused calls
	AllStopped       time.Duration // from the outage's start; -1 if some process never stopped
	ProbesPerProbe   float64       // attempts after AllStopped until recovery, per probe interval
	FirstProbeOK     time.Duration // from the recovery to the first success the funder answered
	MaxResume        time.Duration // from that success to the last process's first attempt after it
	ProcessesResumed int
	Breakdown        Breakdown // the fleet run's only

	// hits is every attempt the funder got, in the order it got them:
	// the timeline that WriteSVG draws.
	hits []hit
}

type hit struct {
	at   time.Duration
	proc int
	ok   bool
}

type funder struct {
	// start is when the storm's clock began; clock says it has. Before
	// that (the warm-up) the funder answers every call and records none.
	start  time.Time
	clock  atomic.Bool
	cfg    Config
	mu     sync.Mutex
	hits   []hit
	server *httptest.Server
}

func (f *funder) down(at time.Duration) bool {
	return at >= f.cfg.Before && at < f.cfg.Before+f.cfg.Outage
}

func (f *funder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.clock.Load() {
		w.WriteHeader(http.StatusCreated)
		return
	}
	at := time.Since(f.start)
	proc, _ := strconv.Atoi(r.Header.Get("X-Sim-Process"))
	ok := !f.down(at)
	f.mu.Lock()
	f.hits = append(f.hits, hit{at, proc, ok})
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// tagged sends through next with the process's index in a header.
type tagged struct {
	next http.RoundTripper
	proc string
}

func (t tagged) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Sim-Process", t.proc)
	return t.next.RoundTrip(r)
}

type call struct {
	start    time.Duration
	attempts int
	stopped  bool // refused by a breaker, nothing sent
}

// Run runs one storm and measures it.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Result, error) {
	f := &funder{cfg: cfg}
	f.server = httptest.NewServer(f)
	defer f.server.Close()
	inner := &http.Transport{MaxIdleConnsPerHost: 64}
	defer inner.CloseIdleConnections()
	tps := make([]*grantretry.Transport, cfg.Processes)
	pools := make([]*pgxpool.Pool, 0, cfg.Processes)
	tr := &tracer{}
	for i := range tps {
		opts := []grantretry.Option{grantretry.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}
		if cfg.NoBreaker {
			opts = append(opts, grantretry.WithoutBreaker())
		}
		if cfg.Fleet {
			pcfg, err := pgxpool.ParseConfig(cfg.DSN)
			if err != nil {
				return Result{}, err
			}
			pcfg.MaxConns, pcfg.MinConns = 2, 2
			pool, err := pgxpool.NewWithConfig(ctx, pcfg)
			if err != nil {
				return Result{}, err
			}
			defer pool.Close()
			pools = append(pools, pool)
			if i == 0 {
				if err := fleet.Migrate(ctx, pool); err != nil {
					return Result{}, err
				}
			}
			co := fleet.NewCoordinator(pool)
			defer co.Close()
			opts = append(opts, grantretry.WithFleet(tracedFleet{Fleet: co, tr: tr, proc: i}))
		}
		tps[i] = grantretry.New(tagged{inner, strconv.Itoa(i)}, opts...)
	}
	if progress != nil {
		fmt.Fprintf(progress, "fleetsim: P=%d x %d workers, fleet=%v: %v up, %v down, %v up\n",
			cfg.Processes, cfg.Workers, cfg.Fleet, cfg.Before, cfg.Outage, cfg.After)
	}
	if err := warmUp(ctx, cfg, f.server.URL, tps, pools, tr); err != nil {
		return Result{}, err
	}
	f.start = time.Now()
	tr.start = f.start
	f.clock.Store(true)
	end := cfg.Before + cfg.Outage + cfg.After
	calls := make([][]call, cfg.Processes)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var n atomic.Int64
	for p := range cfg.Processes {
		for w := range cfg.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(p*cfg.Workers+w)))
				pause := func() time.Duration {
					if cfg.Seed == 0 || cfg.Pace <= 0 {
						return cfg.Pace
					}
					return cfg.Pace/2 + time.Duration(rng.Int64N(int64(cfg.Pace)+1))
				}
				if cfg.Seed != 0 && cfg.Pace > 0 {
					time.Sleep(time.Duration(rng.Int64N(int64(cfg.Pace))))
				}
				var mine []call
				for time.Since(f.start) < end && ctx.Err() == nil {
					c := call{start: time.Since(f.start)}
					out := send(ctx, tps[p], f.server.URL, int(n.Add(1)))
					c.attempts, c.stopped = out.Attempts, out.StopReason == grantretry.StopCircuitOpen && out.Attempts == 0
					mine = append(mine, c)
					time.Sleep(pause())
				}
				mu.Lock()
				calls[p] = append(calls[p], mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	r := measure(cfg, f.hits, calls)
	r.hits = f.hits
	if cfg.Fleet {
		all := time.Duration(-1)
		if r.AllStopped >= 0 {
			all = r.AllStopped + cfg.Before
		}
		r.Breakdown = breakdown(cfg, f.hits, tr.ops, all)
	}
	return r, ctx.Err()
}

// warmUp brings the processes to where a running fleet is before the
// storm's clock starts: each has called the funder once (unrecorded), so
// its Transport has asked the fleet for the funder's host; and in a fleet
// run every pool holds its connections and every process knows the
// fleet's state (its listener and first re-read are done). Without it the
// fleet's start-up overlapped the storm: on a 2-core AMD VM (2026-12-01)
// the 48 new server backends of 16 processes kept both cores busy for
// about 2 s, past the outage's start at 2 s, and the outage's first
// reports queued behind them.
func warmUp(ctx context.Context, cfg Config, url string, tps []*grantretry.Transport, pools []*pgxpool.Pool, tr *tracer) error {
	for _, tp := range tps {
		send(ctx, tp, url, 0)
	}
	if !cfg.Fleet {
		return nil
	}
	ready := func() bool {
		for _, p := range pools {
			if p.Stat().TotalConns() < p.Config().MinConns {
				return false
			}
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if len(tr.hosts) < len(tps) {
			return false
		}
		for _, h := range tr.hosts {
			if h.State() == grantretry.FleetUnknown {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(10 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return errors.New("grantretry: fleetsim: the fleet's processes were not ready after 30s (connections, or the fleet's state)")
		}
	}
	tr.mu.Lock()
	tr.ops = nil // the warm-up's
	tr.mu.Unlock()
	return nil
}

func send(ctx context.Context, tp *grantretry.Transport, url string, i int) grantretry.Outcome {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/submit", nil)
	req.Header.Set(grantretry.HeaderIdempotencyKey, "k-"+strconv.Itoa(i))
	resp, err := tp.RoundTrip(req)
	var e *grantretry.Error
	if errors.As(err, &e) {
		return e.Outcome
	}
	if err != nil {
		return grantretry.Outcome{}
	}
	resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	return out
}

// straddle is how long before the outage a call may begin and still
// send its first attempt into it.
const straddle = 50 * time.Millisecond

func measure(cfg Config, hits []hit, calls [][]call) Result {
	r := Result{Config: cfg, AllStopped: -1, FirstProbeOK: -1}
	slices.SortFunc(hits, func(a, b hit) int { return int(a.at - b.at) })
	down, up := cfg.Before, cfg.Before+cfg.Outage
	// Each process has stopped at its first call refused in the outage.
	var all time.Duration
	for _, cs := range calls {
		r.Calls += len(cs)
		first := time.Duration(-1)
		for _, c := range cs {
			// A call that began just before the outage may have failed in
			// it and retried: its retries are the outage's too (one that
			// succeeded before it has none to count).
			if c.start >= down-straddle && c.start < up {
				r.OutageRetries += max(c.attempts-1, 0)
			}
			if c.start >= down && c.start < up && c.stopped && first < 0 {
				first = c.start
			}
		}
		if first < 0 {
			all = -1
		} else if all >= 0 {
			all = max(all, first)
		}
	}
	if all >= 0 {
		r.AllStopped = all - down
	}
	var firstOK time.Duration = -1
	resumed := map[int]time.Duration{}
	var afterStop int
	for _, h := range hits {
		switch {
		case h.at >= down && h.at < up:
			r.OutageAttempts++
			if all < 0 || h.at <= all {
				r.StoppedAfter++
			} else {
				afterStop++
			}
		case h.at >= up && h.ok && firstOK < 0:
			firstOK = h.at
			resumed[h.proc] = 0
		case firstOK >= 0:
			if _, ok := resumed[h.proc]; !ok {
				resumed[h.proc] = h.at - firstOK
			}
		}
	}
	if all >= 0 && up > all {
		r.ProbesPerProbe = float64(afterStop) / (float64(up-all) / float64(grantretry.DefaultBreakerProbe))
	}
	if firstOK >= 0 {
		r.FirstProbeOK = firstOK - up
	}
	for _, d := range resumed {
		r.MaxResume = max(r.MaxResume, d)
	}
	r.ProcessesResumed = len(resumed)
	return r
}
