package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5/pgxpool"
)

const coordURL = "http://funder.example/submit"
const coordKey = "http://funder.example:80"

// process is one process of a fleet: a Coordinator and a Transport whose
// funder answers with status.
type process struct {
	co     *Coordinator
	tr     *grantretry.Transport
	status atomic.Int32
	sent   atomic.Int32
	probes probeLog // what the Transport asked of the fleet's probe
}

// probeLog is a Fleet that notes each TryProbe and ProbeDone its
// Transport makes, and their answers, for a failing test to say which
// path a call took.
type probeLog struct {
	grantretry.Fleet
	mu  sync.Mutex
	log []string
}

func (l *probeLog) Host(key string, p grantretry.FleetPolicy) grantretry.FleetHost {
	return probeLogHost{l.Fleet.Host(key, p).(recallingHost), l}
}

func (l *probeLog) add(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
}

func (l *probeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.log, "; ")
}

// recallingHost is a FleetHost that is a FleetRecall and a FleetChangeLog
// too, as the Coordinator's are: probeLogHost embeds it whole, since the
// Transport finds those by the FleetHost it gets, and a wrapper that
// embedded only the FleetHost would hide them.
type recallingHost interface {
	grantretry.FleetHost
	grantretry.FleetRecall
	grantretry.FleetChangeLog
}

type probeLogHost struct {
	recallingHost
	l *probeLog
}

func (h probeLogHost) TryProbe(ctx context.Context) (bool, error) {
	ok, err := h.recallingHost.TryProbe(ctx)
	h.l.add(fmt.Sprintf("TryProbe: %v, %v", ok, err))
	return ok, err
}

func (h probeLogHost) ProbeDone(ctx context.Context, ok bool) error {
	err := h.recallingHost.ProbeDone(ctx, ok)
	h.l.add(fmt.Sprintf("ProbeDone(%v): %v", ok, err))
	return err
}

func newProcess(t *testing.T, opts ...Option) *process {
	return newProcessOn(t, newPoolFor(t), opts, nil)
}

// newProcessOn is a process on pool whose Transport has trOpts too.
func newProcessOn(t *testing.T, pool *pgxpool.Pool, opts []Option, trOpts []grantretry.Option) *process {
	p := &process{}
	p.status.Store(503)
	p.co = NewCoordinator(pool, opts...)
	t.Cleanup(p.co.Close)
	p.probes.Fleet = p.co
	trOpts = append([]grantretry.Option{grantretry.WithFleet(&p.probes), grantretry.WithClock(instantClock{}),
		grantretry.WithBudget(0, time.Minute)}, trOpts...)
	p.tr = grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		p.sent.Add(1)
		rec := newRecorder()
		rec.WriteHeader(int(p.status.Load()))
		return rec.result(r), nil
	}), trOpts...)
	return p
}

func (p *process) call(t *testing.T) grantretry.Outcome {
	req, _ := http.NewRequest(http.MethodGet, coordURL, nil)
	resp, err := p.tr.RoundTrip(req)
	var e *grantretry.Error
	if errors.As(err, &e) {
		return e.Outcome
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	return out
}

func (p *process) state() grantretry.FleetState {
	return p.co.Host(coordKey, grantretry.FleetPolicy{}).State()
}

func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("waited 5s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func TestCoordinatorSharesTheBreakerAcrossProcesses(t *testing.T) {
	pool := newPool(t)
	poolFor = func(*testing.T) any { return pool }
	defer func() { poolFor = nil }()
	// A long re-read: the other process learns by NOTIFY. A limit of a
	// second: this test is of what the processes share, and a report cut
	// at the 5 ms default on a loaded machine (a probe's success among
	// them, which leaves the row open until the next probe) is the
	// subject of the limit's own tests.
	a := newProcess(t, WithReread(time.Minute), WithLimit(time.Second))
	b := newProcess(t, WithReread(time.Minute), WithLimit(time.Second))
	a.call(t)
	b.call(t)
	waitFor(t, "the fleet's state", func() bool {
		return a.state() != grantretry.FleetUnknown && b.state() != grantretry.FleetUnknown
	})
	// Each failed call reports once; a report that misses the limit is
	// not counted, so call until it opens.
	calls := 2
	for ; a.state() != grantretry.FleetOpen && calls < 50; calls++ {
		a.call(t)
	}
	if a.state() != grantretry.FleetOpen {
		t.Fatalf("a: %v after %d failed calls in the fleet", a.state(), calls)
	}
	t.Logf("the fleet's breaker opened on failed call %d (threshold %d)", calls, DefaultThreshold)
	heard := waitFor(t, "b to hear the breaker open", func() bool { return b.state() == grantretry.FleetOpen })
	t.Logf("b heard the breaker open after %v", heard)
	sent := b.sent.Load()
	if out := b.call(t); out.Disposition != grantretry.CircuitOpen || b.sent.Load() != sent {
		t.Fatalf("b while the fleet is open: %+v", out)
	}
	// The probe lease: after DefaultProbeEvery, one process probes. The
	// lease is ended by hand, once no statement of either process is
	// still in flight: one cut at its limit (a loaded machine) that
	// landed after the edit would take the new lease, and a's probe
	// would be refused.
	waitFor(t, "the processes' statements to land", func() bool {
		return len(a.co.slots) == 0 && len(b.co.slots) == 0
	})
	a.status.Store(200)
	b.status.Store(200)
	if _, err := pool.Exec(context.Background(), `UPDATE grantretry_hosts SET probe_until = now()`); err != nil {
		t.Fatal(err)
	}
	// a may have asked for the lease while it was held (a call begun as
	// its breaker opened): it then waits out the lease it knows of,
	// DefaultProbeEvery at most, without asking.
	var out grantretry.Outcome
	waitFor(t, "a's probe", func() bool {
		out = a.call(t)
		return out.Disposition != grantretry.CircuitOpen
	})
	if out.Disposition != grantretry.Succeeded {
		t.Fatalf("a's probe: %+v", out)
	}
	start := time.Now()
	for b.state() != grantretry.FleetClosed {
		if time.Since(start) > 5*time.Second {
			var open bool
			err := pool.QueryRow(context.Background(), `SELECT opened_at IS NOT NULL FROM grantretry_hosts WHERE host = $1`,
				coordKey).Scan(&open)
			t.Fatalf("waited 5s for b to hear the breaker close: b %v, a %v, the row open %v (%v); a's probe questions: %v",
				b.state(), a.state(), open, err, &a.probes)
		}
		time.Sleep(5 * time.Millisecond)
	}
	back := time.Since(start)
	t.Logf("b sends again %v after the successful probe", back)
	if back > time.Second {
		t.Errorf("b heard the close after %v, want within 1s", back)
	}
}

func TestCoordinatorOneProbeAtATime(t *testing.T) {
	pool := newPool(t)
	poolFor = func(*testing.T) any { return pool }
	defer func() { poolFor = nil }()
	ps := make([]*process, 4)
	for i := range ps {
		ps[i] = newProcess(t)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO grantretry_hosts (host, tokens, max_tokens, opened_at, probe_until)
		VALUES ($1, 10, 10, now(), now() - interval '1s')`, coordKey); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, p := range ps {
		ok, err := p.co.Host(coordKey, grantretry.FleetPolicy{}).TryProbe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got++
		}
	}
	if got != 1 {
		t.Fatalf("%d processes got the probe lease, want 1", got)
	}
}

func TestCoordinatorSharedBudgetRefusesRetries(t *testing.T) {
	pool := newPool(t)
	poolFor = func(*testing.T) any { return pool }
	defer func() { poolFor = nil }()
	a, b := newProcess(t), newProcess(t)
	ctx := context.Background()
	allowed := true
	n := 0
	for allowed {
		p := a
		if n%2 == 1 {
			p = b
		}
		var err error
		if allowed, err = p.co.Host(coordKey, grantretry.FleetPolicy{}).Failed(ctx, grantretry.FleetFailure{Retryable: true}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	// 10 tokens, refused once at or below 5: the 5th failure across the
	// fleet ends retries, whichever process it came from (the 6th if the
	// time refill added a sliver meanwhile).
	if n != 5 && n != 6 {
		t.Fatalf("retries refused after %d failures, want 5", n)
	}
}

func TestCoordinatorGoesUnknownWhenTheDatabaseIsAwayAndRejoins(t *testing.T) {
	pool := newPool(t)
	poolFor = func(*testing.T) any { return pool }
	defer func() { poolFor = nil }()
	p := newProcess(t, WithReread(50*time.Millisecond))
	p.call(t)
	waitFor(t, "the fleet's state", func() bool { return p.state() == grantretry.FleetClosed })
	var db string
	if err := pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	away(t, pool, db, true)
	waitFor(t, "unknown", func() bool { return p.state() == grantretry.FleetUnknown })
	start := time.Now()
	out := p.call(t)
	if el := time.Since(start); el > 50*time.Millisecond {
		t.Errorf("a call with the database away took %v", el)
	}
	if out.Attempts != 1 {
		t.Fatalf("%+v", out)
	}
	away(t, pool, db, false)
	waitFor(t, "rejoin", func() bool { return p.state() == grantretry.FleetClosed })
}

func TestCoordinatorASuccessBreaksTheRunOfFailures(t *testing.T) {
	p := newProcess(t, WithDepositEvery(time.Hour)) // successes never reach the row
	// A report cut at 5 ms on a loaded machine lands late, after the
	// success that follows it, and is then rightly a failure after that
	// success: each success waits for the report before it to land.
	var landed time.Time
	for i := range 20 {
		if i%2 == 0 {
			p.status.Store(503)
			p.call(t)
			waitFor(t, "the failure report to land", func() bool {
				var at time.Time
				err := p.co.pool.QueryRow(context.Background(), `SELECT failed_at FROM grantretry_hosts WHERE host = $1`,
					coordKey).Scan(&at)
				if err != nil || !at.After(landed) {
					return false
				}
				landed = at
				return true
			})
			continue
		}
		p.status.Store(200)
		p.call(t)
	}
	var failures int
	if err := p.co.pool.QueryRow(context.Background(), `SELECT failures FROM grantretry_hosts WHERE host = $1`, coordKey).Scan(&failures); err != nil {
		t.Fatal(err)
	}
	if failures > 1 || p.state() == grantretry.FleetOpen {
		t.Fatalf("10 failed calls each after a success: %d in a row, state %v; want 1, not open", failures, p.state())
	}
}

func TestCoordinatorTryProbeDoesNotAskWhileAKnownLeaseIsHeld(t *testing.T) {
	pool := newPool(t)
	poolFor = func(*testing.T) any { return pool }
	defer func() { poolFor = nil }()
	p := newProcess(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO grantretry_hosts (host, tokens, max_tokens, opened_at, probe_until)
		VALUES ($1, 10, 10, now(), now() + interval '1h')`, coordKey); err != nil {
		t.Fatal(err)
	}
	h := p.co.Host(coordKey, grantretry.FleetPolicy{})
	if ok, err := h.TryProbe(ctx); ok || err != nil {
		t.Fatalf("another process holds the lease: %v, %v", ok, err)
	}
	// The lease ends early; this process, which saw it held for an hour,
	// does not ask again, and leaves the probe to the others.
	if _, err := pool.Exec(ctx, `UPDATE grantretry_hosts SET probe_until = now() - interval '1s'`); err != nil {
		t.Fatal(err)
	}
	if ok, err := h.TryProbe(ctx); ok || err != nil {
		t.Fatalf("asked the database while a lease it knew of was held: %v, %v", ok, err)
	}
	if ok, err := newProcess(t).co.Host(coordKey, grantretry.FleetPolicy{}).TryProbe(ctx); !ok || err != nil {
		t.Fatalf("a process that knew of no lease: %v, %v", ok, err)
	}
}

func TestCoordinatorReportCutAtTheLimitStillCounts(t *testing.T) {
	pool := newPool(t)
	poolFor = func(*testing.T) any { return pool }
	defer func() { poolFor = nil }()
	p := newProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller has stopped waiting before the statement ran
	if _, err := p.co.Host(coordKey, grantretry.FleetPolicy{}).Failed(ctx, grantretry.FleetFailure{CallFailed: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Failed with an ended context: %v", err)
	}
	waitFor(t, "the report to land", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT failures FROM grantretry_hosts WHERE host = $1`, coordKey).Scan(&n)
		return err == nil && n == 1
	})
}

// The shared row follows the policy the Transport's options give: its
// breaker opens after the Transport's threshold, leases probes for its
// probe wait, and sizes the bucket as its throttle.
func TestCoordinatorFollowsTheTransportsPolicy(t *testing.T) {
	pool := newPool(t)
	p := newProcessOn(t, pool, nil, []grantretry.Option{
		grantretry.WithBreaker(2, time.Minute), grantretry.WithBreakerProbe(1500 * time.Millisecond),
		grantretry.WithRetryThrottle(40, 1), grantretry.WithBudget(1, time.Minute)})
	start := time.Now()
	for calls := 0; p.state() != grantretry.FleetOpen; calls++ {
		if calls == 10 {
			// A report cut at 5 ms on a loaded machine lands later, and the
			// opening is heard by NOTIFY: a call refused a retry by a cut
			// report is quick, so give the reports their time to land.
			time.Sleep(2 * reportLimit)
			if st := p.state(); st != grantretry.FleetOpen {
				t.Fatalf("the fleet's breaker is %v after %d failed calls, threshold 2", st, calls)
			}
			break
		}
		p.call(t)
	}
	var failures int
	var lease time.Duration
	var tokens, maxTokens float64
	read := func() {
		if err := pool.QueryRow(context.Background(), `SELECT failures, probe_until - opened_at, tokens, max_tokens
			FROM grantretry_hosts WHERE host = $1`, coordKey).Scan(&failures, &lease, &tokens, &maxTokens); err != nil {
			t.Fatal(err)
		}
	}
	// A report cut at 5 ms on a loaded machine lets one more call out
	// before the process hears the breaker open: it is counted too. Each
	// call withdraws once for its attempt, and once more for its one
	// retry, which a report cut at the limit refuses (the database is
	// heard: see Failed). A cut report runs on and lands within
	// reportLimit: read again until the withdrawals of every counted call
	// are there, or that has passed. Between withdrawals the bucket
	// refills with time, 40/2 tokens per minute (the default refill): on a
	// loaded machine the calls take long enough for that to show, so the
	// upper bound allows for it.
	refilled := func() float64 { return time.Since(start).Seconds() * 40 / 2 / 60 }
	for deadline := time.Now().Add(2 * reportLimit); ; time.Sleep(10 * time.Millisecond) {
		if read(); tokens <= 40-float64(failures)+refilled() || time.Now().After(deadline) {
			break
		}
	}
	if failures < 2 || lease != 1500*time.Millisecond || maxTokens != 40 ||
		tokens < 40-2*float64(failures)-0.1 || tokens > 40-float64(failures)+refilled() {
		t.Fatalf("row: %d failures, lease %v, %v of %v tokens; want 2 or more, 1.5s, between 40-2*failures and 40-failures of 40",
			failures, lease, tokens, maxTokens)
	}
}

// A process killed while it holds the probe lease never reports the
// probe: the fleet's breaker stays open, no other process probes until
// the lease ends, and then exactly one does.
func TestCoordinatorProbeHolderKilledFreesTheProbeAfterTheLease(t *testing.T) {
	pool := newPool(t)
	const lease = 600 * time.Millisecond
	policy := []grantretry.Option{grantretry.WithBreakerProbe(lease)}
	own, err := pgxpool.New(context.Background(), pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	doomed := newProcessOn(t, own, nil, policy)
	others := []*process{newProcessOn(t, pool, nil, policy), newProcessOn(t, pool, nil, policy)}
	ctx := context.Background()
	doomed.call(t) // its host, with the policy
	for _, p := range others {
		p.call(t)
	}
	// The calls' failure reports create the host's row; on a loaded
	// machine one cut at the Transport's 5 ms limit lands later, and an
	// UPDATE before it would open nothing.
	waitFor(t, "the host's row", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_hosts WHERE host = $1`, coordKey).Scan(&n)
		return err == nil && n == 1
	})
	// Open, announced, with the probe free.
	tag, err := pool.Exec(ctx, `WITH u AS (UPDATE grantretry_hosts SET opened_at = now(), probe_until = now() - interval '1ms'
		WHERE host = $1 RETURNING host) SELECT pg_notify($2, 'open ' || host) FROM u`, coordKey, Channel)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("opening the host's row: %v, %d rows", err, tag.RowsAffected())
	}
	for _, p := range append(others, doomed) {
		waitFor(t, "the fleet's breaker open", func() bool { return p.state() == grantretry.FleetOpen })
	}
	got, err := doomed.co.Host(coordKey, grantretry.FleetPolicy{}).TryProbe(ctx)
	if err != nil || !got {
		t.Fatalf("the doomed process's probe: %v, %v", got, err)
	}
	took := time.Now()
	own.Close() // killed: its connections drop, ProbeDone never comes
	for _, p := range others {
		if got, err := p.co.Host(coordKey, grantretry.FleetPolicy{}).TryProbe(ctx); got || err != nil {
			t.Fatalf("a probe while the dead process's lease runs: %v, %v", got, err)
		}
		if out := p.call(t); out.Disposition != grantretry.CircuitOpen || out.Attempts != 0 {
			t.Fatalf("a call while the fleet is open and its probe lease held: %+v", out)
		}
	}
	var winners atomic.Int32
	waitFor(t, "another process to get the probe", func() bool {
		for _, p := range others {
			if ok, _ := p.co.Host(coordKey, grantretry.FleetPolicy{}).TryProbe(ctx); ok {
				winners.Add(1)
			}
		}
		return winners.Load() > 0
	})
	if at := time.Since(took); at < lease-50*time.Millisecond {
		t.Fatalf("the probe was free again %v after it was taken, before its %v lease ended", at, lease)
	}
	if n := winners.Load(); n != 1 {
		t.Fatalf("%d processes got the probe when the lease ended, want 1", n)
	}
}

// The Coordinator prepares the failure path's statements on the pool's
// idle connections, and a report on such a connection runs the prepared
// statement with the same results: counted, withdrawn, opened.
func TestCoordinatorWarmsTheFailurePathOnIdleConnections(t *testing.T) {
	pool, _ := newPoolOfTwo(t)
	co := NewCoordinator(pool, WithReread(20*time.Millisecond))
	t.Cleanup(co.Close)
	h := co.Host(coordKey, grantretry.FleetPolicy{Threshold: 3, Probe: time.Second, MaxTokens: 8, TokenRatio: 1, Refill: time.Hour})
	ctx := context.Background()
	// idle reports, when it could take both connections (the Coordinator's
	// warm takes idle ones for a moment every tick), their backends' pids
	// and whether both have the failure path's statements prepared and
	// run past the runs the server plans for their parameters.
	idle := func() (pids [2]uint32, warm, both bool) {
		conns := pool.AcquireAllIdle(ctx)
		defer func() {
			for _, c := range conns {
				c.Release()
			}
		}()
		if len(conns) < 2 {
			return pids, false, false
		}
		warm = true
		for i, c := range conns {
			pids[i] = c.Conn().PgConn().PID()
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
				WHERE statement = ANY($1) AND generic_plans + custom_plans >= $2`,
				warmSQL, warmRuns).Scan(&n); err != nil || n != len(warmSQL) {
				warm = false
			}
		}
		return pids, warm, true
	}
	var before [2]uint32
	waitFor(t, "both connections warm", func() bool { var warm bool; before, warm, _ = idle(); return warm })
	for i := 1; i <= 3; i++ {
		retry, err := h.Failed(ctx, grantretry.FleetFailure{CallFailed: true, Retryable: true})
		if err != nil {
			t.Fatal(err)
		}
		if !retry { // 8 tokens, refused at or below 4: three withdrawals leave 5
			t.Fatalf("report %d: retries refused", i)
		}
	}
	if h.State() != grantretry.FleetOpen {
		t.Fatalf("after 3 reports with threshold 3: %v", h.State())
	}
	var failures int
	var tokens float64
	if err := pool.QueryRow(ctx, `SELECT failures, tokens FROM grantretry_hosts WHERE host = $1`, coordKey).Scan(&failures, &tokens); err != nil {
		t.Fatal(err)
	}
	if failures != 3 || tokens < 5 || tokens > 5.01 {
		t.Fatalf("row: %d failures, %v tokens; want 3 and 5", failures, tokens)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_hosts`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d rows in grantretry_hosts (%v), want the host's alone: warming left one", rows, err)
	}
	var after [2]uint32
	var warm, both bool
	waitFor(t, "both connections idle", func() bool { after, warm, both = idle(); return both })
	if !warm || (after != before && after != [2]uint32{before[1], before[0]}) {
		t.Fatalf("the reports left a connection without the prepared statements (backends %v before, %v after, both prepared: %v)", before, after, warm)
	}
}
