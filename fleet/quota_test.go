package fleet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// quotaHost is a Coordinator's host, as the Transport finds it.
type quotaHost interface {
	grantretry.FleetHost
	grantretry.FleetQuota
}

const quotaKey = "https://funder.example:443"

// quotaProcess is one process of a fleet sharing pool's database: a pool
// of its own and a Coordinator that re-reads only when told to, and the
// Coordinator's host for quotaKey.
func quotaProcess(t *testing.T, pool *pgxpool.Pool) (*Coordinator, quotaHost) {
	t.Helper()
	cfg := pool.Config().Copy()
	cfg.MaxConns = 8
	own, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	// Connected before the test's first statement, which a slow connect
	// would cut at its limit (reportLimit).
	if err := own.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	co := NewCoordinator(own, WithReread(time.Hour))
	t.Cleanup(co.Close)
	return co, co.Host(quotaKey, grantretry.FleetPolicy{}).(quotaHost)
}

// heldUntil is the hold as h heard it, for a failure's message.
func heldUntil(h quotaHost) string {
	until, known := h.QuotaUntil()
	if until.IsZero() {
		return "not held"
	}
	kind := "a probe turn"
	if known {
		kind = "the funder's time"
	}
	return until.Format(time.RFC3339Nano) + " (" + kind + ")"
}

func TestQuotaOwedWithTheFundersTimeHoldsEveryProcess(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	_, a := quotaProcess(t, pool)
	coB, b := quotaProcess(t, pool)
	if until, _ := b.QuotaUntil(); !until.IsZero() {
		t.Fatalf("before any call was owed, B is held until %s", heldUntil(b))
	}
	// The funder's time with nanoseconds: the database keeps microseconds,
	// and the hold must not end before the funder's time.
	notBefore := time.Now().Add(time.Hour).Truncate(time.Microsecond).Add(300 * time.Nanosecond)
	if err := a.Owed(ctx, notBefore, time.Minute); err != nil {
		t.Fatal(err)
	}
	check := func(who string, h quotaHost) {
		t.Helper()
		until, known := h.QuotaUntil()
		if !known || until.Before(notBefore) || until.Sub(notBefore) >= time.Microsecond {
			t.Fatalf("%s is held until %s, want the funder's time %s", who, heldUntil(h), notBefore.Format(time.RFC3339Nano))
		}
	}
	check("A, which made the call", a)
	coB.reread(ctx)
	check("B, after its re-read", b)
}

func TestQuotaHoldIsAnnouncedToEveryProcess(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	_, a := quotaProcess(t, pool)
	_, b := quotaProcess(t, pool)
	// B re-reads only once an hour: it hears the hold by the announcement.
	waitFor(t, "B's listener", func() bool { return b.State() == grantretry.FleetClosed })
	notBefore := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := a.Owed(ctx, notBefore, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to hear the hold", func() bool { until, _ := b.QuotaUntil(); return until.Equal(notBefore) })
	if err := a.QuotaCleared(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to hear the hold end", func() bool { until, _ := b.QuotaUntil(); return until.IsZero() })
}

// quotaRowOf reads the host's hold as the database has it.
func quotaRowOf(t *testing.T, pool *pgxpool.Pool) (until *time.Time, known bool, left time.Duration) {
	t.Helper()
	var secs *float64
	err := pool.QueryRow(context.Background(), `SELECT quota_until, quota_known, EXTRACT(EPOCH FROM quota_until - now())::float8
		FROM grantretry_hosts WHERE host = $1`, quotaKey).Scan(&until, &known, &secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	if secs != nil {
		left = time.Duration(*secs * float64(time.Second))
	}
	return until, known, left
}

func TestQuotaOwedKeepsTheLongerHold(t *testing.T) {
	base := time.Now().Truncate(time.Microsecond)
	type owed struct {
		until time.Time // zero: the funder gave no time
		probe time.Duration
	}
	for _, tc := range []struct {
		name      string
		owed      []owed
		wantUntil time.Time // the funder's time held; zero: a probe turn
		wantLeft  time.Duration
	}{
		{name: "a later funder's time extends", owed: []owed{{until: base.Add(time.Hour)}, {until: base.Add(2 * time.Hour)}},
			wantUntil: base.Add(2 * time.Hour)},
		{name: "an earlier funder's time does not shorten", owed: []owed{{until: base.Add(2 * time.Hour)}, {until: base.Add(time.Hour)}},
			wantUntil: base.Add(2 * time.Hour)},
		{name: "a later funder's time replaces a probe turn", owed: []owed{{probe: time.Minute}, {until: base.Add(time.Hour)}},
			wantUntil: base.Add(time.Hour)},
		{name: "an earlier funder's time does not shorten a probe turn", owed: []owed{{probe: 3 * time.Hour}, {until: base.Add(time.Hour)}},
			wantLeft: 3 * time.Hour},
		{name: "a probe turn does not shorten the funder's time", owed: []owed{{until: base.Add(2 * time.Hour)}, {probe: time.Minute}},
			wantUntil: base.Add(2 * time.Hour)},
		{name: "a probe turn extends a shorter funder's time", owed: []owed{{until: base.Add(time.Second)}, {probe: time.Hour}},
			wantLeft: time.Hour},
		{name: "a shorter probe turn does not shorten a probe turn", owed: []owed{{probe: time.Hour}, {probe: time.Minute}},
			wantLeft: time.Hour},
		{name: "a funder's time past is no hold to keep", owed: []owed{{until: base.Add(-time.Hour)}, {until: base.Add(time.Minute)}},
			wantUntil: base.Add(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool := newPool(t)
			_, a := quotaProcess(t, pool)
			_, b := quotaProcess(t, pool)
			for i, o := range tc.owed {
				h := []quotaHost{a, b}[i%2] // each from another process
				if err := h.Owed(ctx, o.until, o.probe); err != nil {
					t.Fatal(err)
				}
			}
			until, known, left := quotaRowOf(t, pool)
			switch {
			case until == nil:
				t.Fatal("the row holds nothing")
			case !tc.wantUntil.IsZero() && (!known || !until.Equal(tc.wantUntil)):
				t.Fatalf("held until %s, known %v; want the funder's %s", until, known, tc.wantUntil)
			case tc.wantUntil.IsZero() && (known || left > tc.wantLeft || left < tc.wantLeft-time.Minute):
				t.Fatalf("held %s more, known %v; want a probe turn of %s", left, known, tc.wantLeft)
			}
		})
	}
}

// passTurn ends the host's probe turn on the database's clock, and has
// each process re-read it: the test's stand-in for a probe wait gone by.
func passTurn(t *testing.T, pool *pgxpool.Pool, cos ...*Coordinator) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE grantretry_hosts SET quota_until = now() - interval '1 ms' WHERE host = $1`, quotaKey); err != nil {
		t.Fatal(err)
	}
	for _, co := range cos {
		co.reread(ctx)
	}
}

func TestQuotaProbeTurnGoesToOneCallOfTheFleet(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	coA, a := quotaProcess(t, pool)
	coB, b := quotaProcess(t, pool)
	if err := a.Owed(ctx, time.Time{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	coB.reread(ctx)
	if until, known := b.QuotaUntil(); known || time.Until(until) < 59*time.Minute {
		t.Fatalf("after a call owed with no time, B is held until %s, want a probe turn an hour away", heldUntil(b))
	}
	if ok, err := b.TryQuotaProbe(ctx, time.Hour); ok || err != nil {
		t.Fatalf("before the turn passed, TryQuotaProbe = %v, %v; want false", ok, err)
	}
	for turn := range 3 {
		passTurn(t, pool, coA, coB)
		const perProcess = 8
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 * perProcess {
			h := []quotaHost{a, b}[i%2]
			wg.Go(func() {
				<-start
				ok, err := h.TryQuotaProbe(ctx, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("turn %d: %d calls of %d were given the probe, want 1", turn, n, 2*perProcess)
		}
		coA.reread(ctx)
		coB.reread(ctx)
		for _, h := range []quotaHost{a, b} {
			if until, known := h.QuotaUntil(); known || time.Until(until) < 59*time.Minute {
				t.Fatalf("turn %d: after the probe was given, a process is held until %s, want another turn", turn, heldUntil(h))
			}
		}
	}
}

// The statement alone, asked at once by more connections than one
// process ever uses for it, gives each turn to one of them.
func TestQuotaProbeStatementGivesEachTurnOnce(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	co, h := quotaProcess(t, pool)
	if err := h.Owed(ctx, time.Time{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	ch := h.(*coordHost)
	for turn := range 5 {
		passTurn(t, pool, co)
		var sent, took atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				send, tk, _, err := ch.tryQuotaProbe(ctx, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if send {
					sent.Add(1)
				}
				if tk {
					took.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if sent.Load() != 1 || took.Load() != 1 {
			t.Fatalf("turn %d: %d statements answered send, %d took the turn; want 1 and 1", turn, sent.Load(), took.Load())
		}
	}
}

func TestQuotaClearedReleasesEveryProcess(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	coA, a := quotaProcess(t, pool)
	coB, b := quotaProcess(t, pool)
	if err := a.Owed(ctx, time.Now().Add(time.Hour), time.Minute); err != nil {
		t.Fatal(err)
	}
	coB.reread(ctx)
	if until, _ := b.QuotaUntil(); until.IsZero() {
		t.Fatal("B did not hear the hold")
	}
	if err := b.QuotaCleared(ctx); err != nil {
		t.Fatal(err)
	}
	coA.reread(ctx)
	for name, h := range map[string]quotaHost{"A": a, "B": b} {
		if until, _ := h.QuotaUntil(); !until.IsZero() {
			t.Fatalf("after the quota cleared, %s is held until %s", name, heldUntil(h))
		}
		if ok, err := h.TryQuotaProbe(ctx, time.Minute); !ok || err != nil {
			t.Fatalf("after the quota cleared, %s's TryQuotaProbe = %v, %v; want true: nothing holds the host", name, ok, err)
		}
	}
	if until, known, _ := quotaRowOf(t, pool); until != nil || known {
		t.Fatalf("after the quota cleared, the row holds until %v, known %v", until, known)
	}
}

// A known hold that has passed is no hold: TryQuotaProbe lets every call
// go, and takes no turn.
func TestQuotaProbeAfterTheFundersTimeLetsEveryCallGo(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	_, a := quotaProcess(t, pool)
	_, b := quotaProcess(t, pool)
	if err := a.Owed(ctx, time.Now().Add(-time.Second), time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]quotaHost{"A": a, "B": b} {
		if ok, err := h.TryQuotaProbe(ctx, time.Hour); !ok || err != nil {
			t.Fatalf("%s's TryQuotaProbe = %v, %v; want true", name, ok, err)
		}
	}
	if until, known, left := quotaRowOf(t, pool); until == nil || !known || left > 0 {
		t.Fatalf("the row holds until %v, known %v, %s left; want the funder's time, passed, untouched", until, known, left)
	}
}

// A hold of the quota keeps the host's row from the sweep of rows at rest:
// a row swept would forget the hold.
func TestSweepKeepsARowHeldForTheQuota(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	co, a := quotaProcess(t, pool)
	if err := a.Owed(ctx, time.Now().Add(time.Hour), time.Minute); err != nil {
		t.Fatal(err)
	}
	co.sweep(ctx, 0)
	if until, _, _ := quotaRowOf(t, pool); until == nil {
		t.Fatal("the row holds nothing after the sweep")
	}
	if err := a.QuotaCleared(ctx); err != nil {
		t.Fatal(err)
	}
	co.sweep(ctx, 0)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_hosts`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the hold ended the sweep left %d rows (%v), want 0", n, err)
	}
}

func TestQuotaStatementsReturnTheErrorWhenTheDatabaseIsAway(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	cfg := pool.Config().Copy()
	own, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	co := NewCoordinator(own, WithReread(time.Hour))
	defer co.Close()
	h := co.Host(quotaKey, grantretry.FleetPolicy{}).(quotaHost)
	notBefore := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := h.Owed(ctx, notBefore, time.Minute); err != nil {
		t.Fatal(err)
	}
	own.Close() // the store is away
	if err := h.Owed(ctx, notBefore.Add(time.Hour), time.Minute); err == nil {
		t.Error("Owed with the database away returned no error")
	}
	if err := h.QuotaCleared(ctx); err == nil {
		t.Error("QuotaCleared with the database away returned no error")
	}
	if until, known := h.QuotaUntil(); !known || !until.Equal(notBefore) {
		t.Errorf("with the database away, the hold last heard is %s, want %s", heldUntil(h), notBefore)
	}
	ch := h.(*coordHost)
	ch.quota.Store(&quotaHeard{until: time.Now().Add(-time.Second)}) // a probe turn passed
	if ok, err := h.TryQuotaProbe(ctx, time.Minute); ok || err == nil {
		t.Errorf("TryQuotaProbe with the database away = %v, %v; want false and the error", ok, err)
	}
}

// A re-read asked before a statement of the process answered does not
// put back the hold that statement replaced.
func TestQuotaReReadDoesNotOverwriteANewerAnswer(t *testing.T) {
	h := &coordHost{}
	h.quota.Store(&quotaHeard{until: time.Now().Add(time.Minute), known: true})
	old := h.quota.Load()
	newer := time.Now().Add(time.Hour)
	h.quota.Store(&quotaHeard{until: newer, known: true}) // Owed answered
	h.hearQuota(old, quotaHeard{})                        // the re-read, asked before, found no hold
	if until, known := h.QuotaUntil(); !known || !until.Equal(newer) {
		t.Fatalf("held until %s, %v; want the answer's %s", until, known, newer)
	}
	old = h.quota.Load()
	h.hearQuota(old, quotaHeard{})
	if until, _ := h.QuotaUntil(); !until.IsZero() {
		t.Fatalf("a re-read asked after the answer left the host held until %s", until)
	}
}

// A database migrated before the hosts' rows had a quota hold gains the
// columns, and its existing rows are not held.
func TestMigrateAddsTheQuotaHoldToExistingHostRows(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `ALTER TABLE grantretry_hosts DROP COLUMN quota_until, DROP COLUMN quota_known`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO grantretry_hosts (host, tokens, max_tokens) VALUES ($1, 5, 10)`, quotaKey); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if until, known, _ := quotaRowOf(t, pool); until != nil || known {
		t.Fatalf("an existing row is held until %v, known %v", until, known)
	}
	_, h := quotaProcess(t, pool)
	notBefore := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := h.Owed(ctx, notBefore, time.Minute); err != nil {
		t.Fatal(err)
	}
	var tokens float64
	if err := pool.QueryRow(ctx, `SELECT tokens FROM grantretry_hosts WHERE host = $1`, quotaKey).Scan(&tokens); err != nil || tokens != 5 {
		t.Fatalf("the row's bucket after Owed: %v tokens (%v), want the 5 it had", tokens, err)
	}
	if until, known, _ := quotaRowOf(t, pool); until == nil || !known || !until.Equal(notBefore) {
		t.Fatalf("after Owed the upgraded row holds until %v, known %v; want %s", until, known, notBefore)
	}
}

// A funder in quota as AWS API Gateway answers a usage plan's quota
// spent (gateway response QUOTA_EXCEEDED: 429 {"message":"Limit
// Exceeded"} with x-amzn-ErrorType LimitExceededException and no
// Retry-After; docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html,
// the source of ClassifyLimits' rule). Once a call of process A ends
// owed, a call of process B is held and sends nothing.
func TestQuotaOwedInOneProcessHoldsTheOthers(t *testing.T) {
	var inQuota atomic.Bool
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if inQuota.Load() {
			w.Header().Set("x-amzn-ErrorType", "LimitExceededException")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"message":"Limit Exceeded"}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	key := "http://" + srv.Listener.Addr().String()

	pool := newPool(t)
	process := func() (*grantretry.Transport, quotaHost) {
		co, _ := quotaProcess(t, pool)
		tr := grantretry.New(http.DefaultTransport, grantretry.WithFleet(co), grantretry.WithClock(instantClock{}),
			grantretry.WithBreakerProbe(time.Hour))
		return tr, co.Host(key, grantretry.FleetPolicy{}).(quotaHost)
	}
	trA, _ := process()
	trB, hostB := process()
	call := func(tr *grantretry.Transport) (grantretry.Outcome, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/submit", strings.NewReader(`{"application":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			var e *grantretry.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is no *grantretry.Error", err)
			}
			return e.Outcome, err
		}
		resp.Body.Close()
		out, _ := grantretry.OutcomeOf(resp)
		return out, nil
	}
	// Both processes have called the funder before its quota ran out.
	for _, tr := range []*grantretry.Transport{trA, trB} {
		if out, err := call(tr); err != nil || out.Disposition != grantretry.Succeeded {
			t.Fatalf("before the quota: %+v, %v", out, err)
		}
	}
	inQuota.Store(true)
	got.Store(0)
	if out, err := call(trA); out.StopReason != grantretry.StopOwedLater || out.Attempts != 1 {
		t.Fatalf("A's call in quota: %+v, %v; want owed_later after 1 attempt", out, err)
	}
	waitFor(t, "B to hear the hold", func() bool { until, _ := hostB.QuotaUntil(); return !until.IsZero() })
	out, err := call(trB)
	if out.Disposition != grantretry.DeadLetter || out.StopReason != grantretry.StopOwedLater || out.Attempts != 0 {
		t.Errorf("B's call: %+v, %v; want dead_letter (owed_later) after 0 attempts", out, err)
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the funder in quota received %d requests, want A's 1", n)
	}
}

// A store that accepts connections and never answers: while one
// TryQuotaProbe statement hangs, the process's other calls are given an
// error, so that the Transport's own state decides, not a refusal that
// holds them as if another process had the turn.
func TestQuotaProbeWithAStoreThatDoesNotAnswerGivesEveryCallAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@"+ln.Addr().String()+"/x?connect_timeout=30")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	co := NewCoordinator(pool, WithReread(time.Hour))
	defer co.Close()
	h := co.Host(quotaKey, grantretry.FleetPolicy{}).(quotaHost)
	h.(*coordHost).quota.Store(&quotaHeard{until: time.Now().Add(-time.Millisecond)}) // a probe turn passed
	first := make(chan struct{})
	var wg sync.WaitGroup
	var held atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			if i > 0 {
				<-first
			}
			ctx, cancel := context.WithTimeout(context.Background(), grantretry.DefaultFleetLimit)
			defer cancel()
			if i == 0 {
				// Let the others ask while this one's statement is out.
				time.AfterFunc(time.Millisecond, func() { close(first) })
			}
			if ok, err := h.TryQuotaProbe(ctx, time.Second); !ok && err == nil {
				held.Add(1)
			}
		})
	}
	wg.Wait()
	if n := held.Load(); n > 0 {
		t.Errorf("with the store not answering, %d of 8 calls were refused the turn with no error", n)
	}
}

// With every detached statement slot taken, TryQuotaProbe gives an error.
func TestQuotaProbeWithNoStatementSlotGivesAnError(t *testing.T) {
	pool := newPool(t)
	co, h := quotaProcess(t, pool)
	h.(*coordHost).quota.Store(&quotaHeard{until: time.Now().Add(-time.Millisecond)})
	for range cap(co.slots) {
		co.slots <- struct{}{}
	}
	defer func() {
		for range cap(co.slots) {
			<-co.slots
		}
	}()
	if ok, err := h.TryQuotaProbe(context.Background(), time.Second); ok || err == nil {
		t.Errorf("TryQuotaProbe with no slot = %v, %v; want false and an error", ok, err)
	}
}

// A probe turn given back goes to the next call of any process at once.
func TestQuotaProbeTurnGivenBackGoesToTheNextCall(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	coA, a := quotaProcess(t, pool)
	coB, b := quotaProcess(t, pool)
	if err := a.Owed(ctx, time.Time{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	passTurn(t, pool, coA, coB)
	if ok, err := a.TryQuotaProbe(ctx, time.Hour); !ok || err != nil {
		t.Fatalf("TryQuotaProbe = %v, %v; want the turn", ok, err)
	}
	if err := a.GiveBackQuotaProbe(ctx); err != nil {
		t.Fatal(err)
	}
	coB.reread(ctx)
	if ok, err := b.TryQuotaProbe(ctx, time.Hour); !ok || err != nil {
		t.Fatalf("after the turn was given back, B's TryQuotaProbe = %v, %v; want the turn", ok, err)
	}
	// A turn that is not this process's, or a funder's time, is not given back.
	if err := b.Owed(ctx, time.Now().Add(2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.GiveBackQuotaProbe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, known, left := quotaRowOf(t, pool); !known || left < time.Hour {
		t.Errorf("a funder's time was given back: known %v, %s left", known, left)
	}
}

// An owed answer whose time has come, or ends before the hold does, may
// be to a request sent before the hold: it does not shorten it.
func TestQuotaOwedAnswerDoesNotShortenAHold(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		probe time.Duration // the hold, a probe turn this long
		until time.Duration // the answer's time, from now
	}{
		{"a time come already", time.Hour, -time.Second},
		{"a time now", time.Hour, 0},
		{"a time before the turn ends", time.Hour, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t)
			_, a := quotaProcess(t, pool)
			if err := a.Owed(ctx, time.Time{}, tc.probe); err != nil {
				t.Fatal(err)
			}
			if err := a.Owed(ctx, time.Now().Add(tc.until), time.Second); err != nil {
				t.Fatal(err)
			}
			if until, known, left := quotaRowOf(t, pool); until == nil || known || left < tc.probe-time.Minute {
				t.Errorf("held %s more, known %v; want the probe turn of %s kept", left, known, tc.probe)
			}
			if until, known := a.QuotaUntil(); known || time.Until(until) < tc.probe-time.Minute {
				t.Errorf("the process heard %s; want the probe turn kept", heldUntil(a))
			}
		})
	}
}

// A funder's time that has passed is no hold: the process stops hearing
// it, and a re-read does not bring it back.
func TestQuotaFundersTimePassedIsNotHeld(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	co, a := quotaProcess(t, pool)
	notBefore := time.Now().Add(time.Second)
	if err := a.Owed(ctx, notBefore, time.Second); err != nil {
		t.Fatal(err)
	}
	if until, _ := a.QuotaUntil(); until.IsZero() && time.Now().Before(notBefore) {
		t.Fatal("not held after Owed")
	}
	waitFor(t, "the funder's time to pass", func() bool {
		until, _ := a.QuotaUntil()
		return until.IsZero()
	})
	co.reread(ctx)
	if until, _ := a.QuotaUntil(); !until.IsZero() {
		t.Errorf("after a re-read, the process hears %s, a funder's time passed", heldUntil(a))
	}
}

// QuotaUntil's probe turns are on the wall clock (time.Now), the clock a
// Transport with the default Clock compares them with.
func TestQuotaUntilIsOnTheWallClock(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	_, a := quotaProcess(t, pool)
	before := time.Now()
	if err := a.Owed(ctx, time.Time{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	until, known := a.QuotaUntil()
	// The database's clock is the machine's: allow for the statement.
	if known || until.Before(before.Add(time.Hour-time.Second)) || until.After(after.Add(time.Hour+time.Second)) {
		t.Errorf("probe turn heard as %s; want an hour after the wall clock's %s", heldUntil(a), before)
	}
}
