package fleet

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Channel is the NOTIFY channel on which a host's breaker row is
// announced when it opens or closes. The payload is "open " or "closed "
// and the host key: notifications arrive in commit order, so a listener
// applies each as it comes, with no re-read. A payload that is the bare
// key (the first format, and the announcement that a host's quota hold
// grew or ended) makes the listener re-read the row.
const Channel = "grantretry_hosts"

// Defaults of the shared breaker and budget, the core's own: a host's
// policy comes from its Transport (Fleet.Host), and these fill what it
// leaves at zero.
const (
	DefaultThreshold  = int(grantretry.DefaultBreakerThreshold)
	DefaultProbeEvery = grantretry.DefaultBreakerProbe
	DefaultMaxTokens  = grantretry.DefaultThrottleMaxTokens
	DefaultTokenRatio = grantretry.DefaultThrottleTokenRatio
	DefaultRefill     = grantretry.DefaultThrottleRefill
)

func ptr[T any](v T) *T { return &v }

// withDefaults fills what p leaves at zero with the defaults. The fleet
// probes once per p.Probe across all its processes (the lease), without
// the local breaker's doubling up to the cooldown: one probe per interval
// for the whole fleet is already a P-th of what P local breakers send.
func withDefaults(p grantretry.FleetPolicy) grantretry.FleetPolicy {
	if p.Threshold == 0 {
		p.Threshold = uint32(DefaultThreshold)
	}
	if p.Probe <= 0 {
		p.Probe = DefaultProbeEvery
	}
	if p.MaxTokens <= 0 {
		p.MaxTokens, p.TokenRatio = DefaultMaxTokens, DefaultTokenRatio
	}
	if p.TokenRatio <= 0 {
		p.TokenRatio = DefaultTokenRatio
	}
	if p.Refill <= 0 {
		p.Refill = DefaultRefill
	}
	return p
}

// asyncCommit, joined to a statement on grantretry_hosts, commits it
// without waiting for its WAL to reach the disk. Every failure report and
// withdrawal updates the host's one row, and a row's writers queue on its
// lock until the writer before them has committed: with a flush per
// commit they queued about 0.4 ms each on this project's machine, so a
// burst of 32 failures took over 10 ms and most reports were cut at the
// Transport's 5 ms limit (bench/results/README.md). The row is
// soft state: a crash loses at most the last few hundred milliseconds of
// counts and tokens (wal_writer_delay), after which a breaker may count a
// few failures again or a budget hold a few tokens more. The letters and
// the trail, whose commits must survive a crash, keep the server's
// setting: set_config(..., true) lasts for the statement's transaction only.
const asyncCommit = `(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`

// Coordinator is a grantretry.Fleet on PostgreSQL: one row per funder
// host in grantretry_hosts holds the fleet's breaker (consecutive failed
// calls, when it opened, the probe lease), its retry budget (the gRFC
// A6 bucket with a time refill) and its quota hold (until when a host in
// quota is sent nothing, and whose turn it is to probe one whose end is
// not known). Give it to grantretry.WithFleet.
//
// A call's success path only reads an atomic and adds to a counter; the
// counted successes are deposited once a second. A failure asks the
// database (one statement, bounded by the Transport's limit). A breaker
// that opens or closes is announced with NOTIFY, heard on one dedicated
// connection, and every row is also re-read on a timer in case a
// notification is lost. While the database does not answer, every host's
// state is FleetUnknown and the Transport runs on its local state, from
// what the Coordinator last heard (a host's FleetHost is a
// grantretry.FleetRecall: an open breaker stays open, and its processes
// probe together); the Coordinator keeps trying, and rejoins when the
// database is back. Each change of a shared breaker this process makes
// is handed to its Transport (grantretry.FleetChangeLog), which writes it
// to its audit trail (with a Trail, the fleet's) as a breaker line. Close
// it to stop its goroutines. It is safe for concurrent use.
type Coordinator struct {
	pool *pgxpool.Pool
	cfg  config

	// hosts holds every host a Transport holds, weakly: a host is kept
	// in memory by the Transports that hold its state, and forgotten
	// once none does (a Transport drops a host's state as MaxHosts and
	// HostIdle in the core say), so that the map is bounded by what the
	// Transports keep. While one is held, Host gives it to every caller
	// of its key. mu guards hosts.
	mu    sync.Mutex
	hosts map[string]weak.Pointer[coordHost]
	fresh chan struct{} // a host was added: read its row soon
	// swept is when, on the monotonic clock since start, the rows were
	// last swept (see sweep); tick's own.
	swept time.Duration

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time // the base of coordHost.probeAfter's monotonic clock
	// wallOffset is the wall clock's Unix ns less time.Since(start), read
	// at New and at each deposit: wallNow is then a monotonic reading (36
	// ns on the project's AMD VM) where time.Now takes 61, on every
	// success's path. A step of the wall clock reaches it within a
	// deposit interval.
	wallOffset atomic.Int64

	// slots bounds the statements run beyond their caller's limit (see
	// detach). closing, under closeMu, refuses new ones once Close began,
	// so that wg.Add never races wg.Wait.
	slots   chan struct{}
	closeMu sync.Mutex
	closing bool

	warmed map[*pgx.Conn]bool // the connections warm prepared; tick's own
}

// reportLimit bounds a fleet statement that its caller stopped waiting
// for, and maxDetached how many run at once in one Coordinator (see
// detach): at most that many goroutines wait on a database that does not
// answer.
const (
	reportLimit = time.Second
	maxDetached = 64
)

// errBusy: too many statements are already running past their callers'
// limit; the caller goes on with its local state.
var errBusy = errors.New("grantretry: fleet: too many statements in flight")

var (
	_ grantretry.Fleet          = (*Coordinator)(nil)
	_ grantretry.FleetRecall    = (*coordHost)(nil)
	_ grantretry.FleetChangeLog = (*coordHost)(nil)
	_ grantretry.FleetQuota     = (*coordHost)(nil)
)

type coordHost struct {
	c   *Coordinator
	key string
	// policy is the host's, with the defaults filled in; given says a
	// Transport gave it (a zero FleetPolicy gives none: the defaults
	// stand until a Transport's policy replaces them, once).
	policy    atomic.Pointer[grantretry.FleetPolicy]
	given     bool         // under c.mu
	state     atomic.Int32 // grantretry.FleetState
	successes atomic.Int64 // counted since the last deposit
	// lastOK is when an attempt last succeeded here (Unix ns): a failed
	// call reported after a success newer than the fleet's last failure
	// restarts the fleet's run of failures.
	lastOK atomic.Int64
	// probeAfter is when, on the Coordinator's monotonic clock (since
	// c.start), the probe lease another process holds ends: until then
	// TryProbe answers no without asking. While the fleet's breaker is open
	// every call asks for the probe, and asking the database each time put
	// one statement per refused call on the host's row.
	probeAfter atomic.Int64
	// asking says a TryProbe statement of this process is in flight: the
	// other calls meanwhile are refused without asking. leased is the end
	// of a lease that statement took after its caller stopped waiting (0
	// if none): the next call takes it.
	asking atomic.Bool
	leased atomic.Int64
	// spentAt is when the newest report whose answer allowed no retry was
	// made, grantedAt the newest whose answer allowed one; on the
	// Coordinator's monotonic clock, 0 for never. Dated when the report was
	// made, not when its answer came: a report cut at the limit answers
	// later, and its answer must not pass for newer than one made after it.
	spentAt, grantedAt atomic.Int64
	// heard is the state last heard from the database (FleetOpen or
	// FleetClosed; FleetUnknown before the first answer), which state
	// forgets while the database is away (see LastHeard).
	heard atomic.Int32

	// changes are the changes of the fleet's breaker that this process's
	// statements made, for TakeChanges; cmu guards them, and
	// hasChanges lets TakeChanges skip cmu when there are none.
	cmu        sync.Mutex
	changes    []grantretry.FleetChange
	hasChanges atomic.Bool

	// quota is the host's quota hold as last heard, nil or a zero until
	// for none; each store is a new value, so that a re-read that was
	// asked before a statement of this process answered does not
	// overwrite that answer (see hearQuota). quotaAsk is the
	// TryQuotaProbe statement of this process in flight, nil if none, and
	// quotaTurn is the end (Unix ns) of a probe turn that statement took
	// after its caller stopped waiting, 0 if none: the next call takes it.
	quota     atomic.Pointer[quotaHeard]
	quotaAsk  atomic.Pointer[quotaAsk]
	quotaTurn atomic.Int64
}

// maxChanges bounds the changes a host keeps for TakeChanges: a caller
// that never takes them (a FleetHost wrapped by another that does not
// pass TakeChanges on) costs at most that much; past it the oldest go.
const maxChanges = 64

// NewCoordinator starts the Coordinator of this process on pool's
// database: its listener and its timers. Run Migrate first. Give the
// pool MinConns of at least 2 (pool_min_conns=2 in the DSN): the
// Coordinator prepares its failure statements on idle connections, and
// an outage's first reports then find them warm (see warm).
func NewCoordinator(pool *pgxpool.Pool, opts ...Option) *Coordinator {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{pool: pool, cfg: newConfig(opts), hosts: map[string]weak.Pointer[coordHost]{}, ctx: ctx, cancel: cancel,
		fresh: make(chan struct{}, 1), start: time.Now(), slots: make(chan struct{}, maxDetached),
		warmed: map[*pgx.Conn]bool{}}
	c.rebaseWall()
	c.wg.Add(2)
	go c.listen(ctx)
	go c.tick(ctx)
	return c
}

// Close stops the Coordinator's goroutines and deposits what it counted.
func (c *Coordinator) Close() {
	c.closeMu.Lock()
	c.closing = true
	c.closeMu.Unlock()
	c.cancel()
	c.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.deposit(ctx)
}

// Host returns the fleet's view of the host key, the same for one key.
// The policy this process applies to the shared row is the first
// non-zero p given for the key (a Transport's, see grantretry.Fleet): its
// threshold, probe wait and bucket go with each statement, so processes
// configured alike share one policy. A zero p (a caller that only reads
// State) leaves the policy to the Transport. What p leaves at zero takes
// the core's defaults. Two Transports of one process that give one host
// different policies share the first one's here: give them one
// Coordinator each, or one policy. The Coordinator holds a host only as
// long as a caller holds what Host returned: a host no Transport holds
// any longer is forgotten, and its next Host starts from its row.
func (c *Coordinator) Host(key string, p grantretry.FleetPolicy) grantretry.FleetHost {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hosts[key].Value()
	if h == nil {
		h = &coordHost{c: c, key: key}
		h.policy.Store(ptr(withDefaults(grantretry.FleetPolicy{})))
		wp := weak.Make(h)
		c.hosts[key] = wp
		runtime.AddCleanup(h, c.forget, heldHost{key, wp})
		select { // never waits: tick reads it
		case c.fresh <- struct{}{}:
		default:
		}
	}
	if p != (grantretry.FleetPolicy{}) && !h.given {
		h.given = true
		h.policy.Store(ptr(withDefaults(p)))
	}
	return h
}

// heldHost names a host of the map, for its cleanup.
type heldHost struct {
	key string
	wp  weak.Pointer[coordHost]
}

// forget removes a host that nothing holds any longer, unless its key
// has a newer one.
func (c *Coordinator) forget(hh heldHost) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hosts[hh.key] == hh.wp {
		delete(c.hosts, hh.key)
	}
}

func (c *Coordinator) all() []*coordHost {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*coordHost, 0, len(c.hosts))
	for _, wp := range c.hosts {
		if h := wp.Value(); h != nil {
			out = append(out, h)
		}
	}
	return out
}

// detach runs q under the Coordinator's own context, bounded by
// reportLimit, and waits for it until ctx ends. A statement cut at the
// caller's limit is not cancelled: pgx would close its connection (the
// next statement then waits for a new one, and was cut in turn), and the
// report would not be counted. It lands a little late instead, and its
// answer still sets the host's state. Each Coordinator runs at most
// slots such statements at once; past that, errBusy.
func (c *Coordinator) detach(ctx context.Context, q func(context.Context) error) error {
	c.closeMu.Lock()
	if c.closing {
		c.closeMu.Unlock()
		return errBusy
	}
	select {
	case c.slots <- struct{}{}:
	default:
		c.closeMu.Unlock()
		return errBusy
	}
	c.wg.Add(1)
	c.closeMu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer c.wg.Done()
		defer func() { <-c.slots }()
		qctx, cancel := context.WithTimeout(c.ctx, reportLimit)
		defer cancel()
		done <- q(qctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *coordHost) State() grantretry.FleetState { return grantretry.FleetState(h.state.Load()) }

// Succeeded counts a success for the deposit, and notes its time.
func (h *coordHost) Succeeded() {
	h.successes.Add(1)
	h.lastOK.Store(h.c.wallNow())
}

// wallNow is the wall clock in Unix ns, from the monotonic clock (see
// wallOffset).
func (c *Coordinator) wallNow() int64 { return c.wallAt(time.Since(c.start)) }

// wallAt is the wall clock in Unix ns at since, a reading of
// time.Since(c.start).
func (c *Coordinator) wallAt(since time.Duration) int64 { return c.wallOffset.Load() + int64(since) }

// rebaseWall re-reads the wall clock for wallNow, both clocks in one
// reading.
func (c *Coordinator) rebaseWall() {
	now := time.Now()
	c.wallOffset.Store(now.UnixNano() - int64(now.Sub(c.start)))
}

func (h *coordHost) set(open bool) {
	st := grantretry.FleetClosed
	if open {
		st = grantretry.FleetOpen
	} else {
		h.leased.Store(0)
	}
	h.state.Store(int32(st))
	h.heard.Store(int32(st))
}

// leaseAtLeast notes that the fleet's probe lease runs at least until
// end, on the Coordinator's monotonic clock: TryProbe does not ask
// before then, and LastHeard tells it.
func (h *coordHost) leaseAtLeast(end time.Duration) {
	for {
		old := h.probeAfter.Load()
		if int64(end) <= old || h.probeAfter.CompareAndSwap(old, int64(end)) {
			return
		}
	}
}

// LastHeard returns the host's state as last heard from the database,
// even while the database is away, and for an open breaker how long from
// now the fleet's probe lease, as last heard, ends: when the fleet's next
// probe was due. The Transport carries it into its local breaker when it
// loses the fleet (see grantretry.WithFleet), and every process that
// heard the same lease probes at the same moment.
func (h *coordHost) LastHeard() (grantretry.FleetState, time.Duration) {
	st := grantretry.FleetState(h.heard.Load())
	if st != grantretry.FleetOpen {
		return st, -1
	}
	left := time.Duration(h.probeAfter.Load()) - time.Since(h.c.start)
	if left <= 0 {
		return st, -1 // the lease heard has ended: the next one is not known
	}
	return st, left
}

// change notes a change of the fleet's breaker that this process made.
func (h *coordHost) change(from, to grantretry.FleetBreakerState) {
	h.cmu.Lock()
	defer h.cmu.Unlock()
	if len(h.changes) >= maxChanges {
		h.changes = append(h.changes[:0], h.changes[1:]...)
	}
	h.changes = append(h.changes, grantretry.FleetChange{From: from, To: to})
	h.hasChanges.Store(true)
}

// TakeChanges returns the changes of the fleet's breaker that this
// process's statements made since it was last called: the report that
// opened it, each probe lease taken (half-open), and each probe's result
// (see grantretry.FleetChangeLog). The Transport writes them to its
// audit trail, so that the fleet's trail has one breaker line for each,
// in the chain of the process that made it.
func (h *coordHost) TakeChanges() []grantretry.FleetChange {
	if !h.hasChanges.Load() {
		return nil
	}
	h.cmu.Lock()
	defer h.cmu.Unlock()
	out := h.changes
	h.changes = nil
	h.hasChanges.Store(false)
	return out
}

// Failed reports a failed attempt in one statement on the host's row:
// f.CallFailed counts a failed call, and the threshold-th in a row opens
// the fleet's breaker and announces it; f.Retryable takes a token from
// the shared bucket, refilled with time first (a drained bucket allows
// retries again after the policy's Refill), and retry says whether it is
// still more than half full. One statement, where there were two (a count
// and a withdrawal): an outage's first failures all report at once, and
// each statement on the row waits for the one before it to commit, so a
// second statement per failure doubled the queue.
//
// A success this process saw after the fleet's last failure restarts the
// run at 1: successes reach the row only with the deposit, once a second,
// and without this a funder failing one call in five would open the
// fleet's breaker between two deposits. A failure is dated when Failed is
// called, on this process's clock as its successes are, not when its
// statement runs: a report that lands late (the first ones after the
// database comes back, or one detached past its limit) would otherwise
// date its failure after the successes that followed it, and the next
// failure would continue the run through them. (Comparing processes'
// clocks: skew between machines shifts which failures count as after a
// success.)
//
// A report that ctx cuts short, or that fails, still lands if it can (see
// detach). It answers no retry, with no error, while the database is
// heard (the host's state is not FleetUnknown: the database is slow, not
// away), or when the budget's last answer to this process was no (see
// knownSpent); otherwise it returns the error, and the Transport's local
// throttle decides, as it does while the database is away. A slow
// database must not turn the shared budget into P local ones: reports
// queue on the host's row when an outage starts, and each report cut
// there was a retry the budget never granted (on the AMD machine of
// 2026-12-01, in the sim without breakers, seeds 1-3: 13-21 retries
// against a single process's 4, all but 0-3 of them from reports cut at
// the limit).
func (h *coordHost) Failed(ctx context.Context, f grantretry.FleetFailure) (bool, error) {
	made := time.Since(h.c.start)
	at := time.Unix(0, h.c.wallAt(made))
	var lastOK *time.Time
	if ns := h.lastOK.Load(); ns != 0 {
		t := time.Unix(0, ns)
		lastOK = &t
	}
	var retry atomic.Bool
	err := h.c.detach(ctx, func(ctx context.Context) error {
		r, err := h.failed(ctx, f, lastOK, at, made)
		retry.Store(r)
		return err
	})
	if err != nil && h.refusesCut(f) {
		return false, nil
	}
	return retry.Load(), err
}

// refusesCut says a report cut at the limit, or failed, answers no retry
// (see Failed): the database is heard, or the budget known spent.
func (h *coordHost) refusesCut(f grantretry.FleetFailure) bool {
	return f.Retryable && (h.knownSpent() || h.State() != grantretry.FleetUnknown)
}

// knownSpent says the fleet's budget allowed no retry in its last answer
// to this process, less than a deposit interval ago (deposits may have
// refilled it since). A report cut at the limit, or failed, is then
// answered no: without this, the Transport decided on its local
// throttle, which at an outage's start has not yet seen enough failures
// to refuse, and each report cut there was a retry the shared budget had
// refused (in the sim without breakers, seeds 1-6: 5-8 retries against a
// single process's 4, the runs over 5 exactly those with reports cut;
// with this, 5 in each). It decides only while the database is away
// (FleetUnknown): while it is heard, every cut report answers no (see
// Failed). (Announcing the bucket's crossing to every process with
// NOTIFY did no better there, and woke 16 listeners at an outage's
// start.)
func (h *coordHost) knownSpent() bool {
	s := h.spentAt.Load()
	return s != 0 && s > h.grantedAt.Load() && time.Since(h.c.start)-time.Duration(s) < h.c.cfg.depositEvery
}

// learn notes an answer on the host's budget.
func (h *coordHost) learn(retry bool, made time.Duration) {
	v := &h.spentAt
	if retry {
		v = &h.grantedAt
	}
	for {
		old := v.Load()
		if int64(made) <= old || v.CompareAndSwap(old, int64(made)) {
			return
		}
	}
}

// failedSQL is Failed's statement. Its third column is true when the
// statement opened the fleet's breaker (and announced it).
const failedSQL = `
		WITH u AS (
			INSERT INTO grantretry_hosts AS h (host, tokens, max_tokens, failures, failed_at, opened_at, probe_until, levels_at, levels, refill_s)
			VALUES ($1, GREATEST($5::float8 - 1, 0), $5, CASE WHEN $2::int8 > 0 THEN 1 ELSE 0 END,
				CASE WHEN $2 > 0 THEN $9::timestamptz ELSE '-infinity' END,
				CASE WHEN $2 = 1 THEN now() END,
				CASE WHEN $2 = 1 THEN now() + $3::interval ELSE '-infinity' END,
				CASE WHEN $5 > 0 THEN ARRAY[now()] ELSE '{}' END,
				CASE WHEN $5 > 0 THEN ARRAY[GREATEST($5 - 1, 0)] ELSE '{}' END,
				CASE WHEN $5 > 0 THEN $7::float8 ELSE 0 END)
			ON CONFLICT (host) DO UPDATE SET
				failures = CASE WHEN $2 = 0 THEN h.failures WHEN $6 > h.failed_at THEN 1 ELSE h.failures + 1 END,
				failed_at = CASE WHEN $2 = 0 THEN h.failed_at ELSE GREATEST(h.failed_at, $9) END,
				opened_at = CASE WHEN $2 > 0 AND h.opened_at IS NULL
					AND CASE WHEN $6 > h.failed_at THEN 1 ELSE h.failures + 1 END >= $2 THEN now() ELSE h.opened_at END,
				probe_until = CASE WHEN $2 > 0 AND h.opened_at IS NULL
					AND CASE WHEN $6 > h.failed_at THEN 1 ELSE h.failures + 1 END >= $2 THEN now() + $3::interval ELSE h.probe_until END,
				max_tokens = CASE WHEN $5 = 0 THEN h.max_tokens ELSE $5 END,
				refilled = CASE WHEN $5 = 0 THEN h.refilled ELSE now() END,
				refill_s = CASE WHEN $5 = 0 THEN h.refill_s ELSE $7 END,
				tokens = CASE WHEN $5 = 0 THEN h.tokens WHEN h.max_tokens = 0 THEN GREATEST($5 - 1, 0)
					ELSE ` + withdrawnTokens + ` END,
				levels_at = CASE WHEN $5 = 0 THEN h.levels_at WHEN h.max_tokens = 0 THEN ARRAY[now()]
					ELSE (h.levels_at || now())[GREATEST(cardinality(h.levels_at) - ` + keptLevels + ` + 2, 1):] END,
				levels = CASE WHEN $5 = 0 THEN h.levels WHEN h.max_tokens = 0 THEN ARRAY[GREATEST($5 - 1, 0)]
					ELSE (CASE WHEN $8 = 0 OR $6 IS NULL THEN h.levels
						ELSE grantretry_credit(h.levels_at, h.levels, $6, ` + carriedCredit + `, $5) END
						|| ` + withdrawnTokens + `)[GREATEST(cardinality(h.levels) - ` + keptLevels + ` + 2, 1):] END
			RETURNING opened_at IS NOT NULL AS open, opened_at = now() AS just, tokens > max_tokens / 2 AS retry)
		SELECT open, retry, CASE WHEN just THEN pg_notify($4, 'open ' || $1) IS NOT NULL ELSE false END FROM u, ` + asyncCommit

// keptLevels is how many of the bucket's recent levels its row keeps
// (levels_at, levels), one per withdrawal. At 40 withdrawals a second (5%
// of 800 calls failing) they span 0.4 s, and a deposit's last success is
// usually a few tens of milliseconds old; one older than them all is
// measured against the oldest (see grantretry_level_at).
const keptLevels = "16"

// carriedCredit is what the successes a report carries ($8, this
// process's since its last deposit) add to the bucket before the
// withdrawal: at most what the bucket lacked when this process last
// succeeded ($6), by its recent levels (see depositSQL).
const carriedCredit = `CASE WHEN $8::float8 = 0 OR $6::timestamptz IS NULL THEN 0 ELSE LEAST($8,
	GREATEST($5 - grantretry_level_at(h.levels_at, h.levels, $6, $5), 0)) END`

// withdrawnTokens is the bucket after a report's withdrawal: refilled by
// the time since the last one ($7 the refill period), credited the
// carried successes, less the token.
const withdrawnTokens = `GREATEST(LEAST($5, h.tokens + EXTRACT(EPOCH FROM now() - h.refilled) * $5 / 2 / $7::float8
	+ ` + carriedCredit + `) - 1, 0)`

// failed runs in QueryExecModeExec, one round trip: in pgx's default mode
// a statement's first run on a connection prepares it first, and a
// process's first failures come with the outage's start, when every
// connection is cold and the row is busiest. On a connection warm
// prepared (see warm), pgx uses the prepared statement instead, whatever
// the mode: no parse and no plan from scratch. $2 is the threshold, 0 for
// a host without a breaker (never opens); $5 the bucket's size, 0 for a
// host without a throttle (no withdrawal); $8 the tokens of the successes
// deposited with the withdrawal; $9 the failure's time, on this process's
// clock (see Failed). A row such a report creates
// has max_tokens 0: no bucket yet, and the first withdrawal finds it
// full. The casts fix the parameters' types where the server would infer
// them from the first use (int4 for $5 - 1, which refuses a bucket of 2.5
// in Exec mode and truncates it prepared).
func (h *coordHost) failed(ctx context.Context, f grantretry.FleetFailure, lastOK *time.Time, at time.Time, made time.Duration) (bool, error) {
	p := h.policy.Load()
	threshold := int64(p.Threshold)
	if !f.CallFailed {
		threshold = 0
	}
	maxTokens, refill := p.MaxTokens, p.Refill.Seconds()
	if !f.Retryable || maxTokens <= 0 || refill <= 0 {
		maxTokens, refill = 0, 1
	}
	// A withdrawal first deposits the successes counted since the last
	// deposit, as a single process's throttle has them at once: the
	// answer whether to retry sees the bucket they refilled, as far as
	// it lacked them when they came (carriedCredit, as in depositSQL).
	var n int64
	if maxTokens > 0 {
		n = h.successes.Swap(0)
	}
	var open, retry, opened bool
	asked := time.Since(h.c.start)
	err := h.c.pool.QueryRow(ctx, failedSQL,
		pgx.QueryExecModeExec, h.key, threshold, p.Probe, Channel, maxTokens, lastOK, refill,
		float64(n)*p.TokenRatio, at).Scan(&open, &retry, &opened)
	if err != nil {
		if n > 0 && !errors.Is(err, context.Canceled) {
			h.successes.Add(n) // for the next deposit, as deposit does
		}
		return false, err
	}
	if opened {
		// This report opened the fleet's breaker, and its lease runs
		// the probe wait from the statement's time.
		h.leaseAtLeast(asked + p.Probe)
		h.change(grantretry.FleetBreakerClosed, grantretry.FleetBreakerOpen)
	}
	h.set(open)
	if maxTokens > 0 {
		h.learn(retry, made)
	}
	return retry, nil
}

// TryProbe takes the fleet's probe lease if it is free. It asks the
// database only when no lease it knows of is held and no other call of
// this process is asking: the lease is the database's, and this only
// skips questions whose answer is known. A caller that stops waiting is
// refused, not given an error: it did not get the probe, and the fleet's
// breaker is still open as far as this process knows (State says
// otherwise when the database is away). A lease taken after its caller
// stopped waiting goes to the next call.
func (h *coordHost) TryProbe(ctx context.Context) (bool, error) {
	now := int64(time.Since(h.c.start))
	if l := h.leased.Load(); l > now && h.leased.CompareAndSwap(l, 0) {
		return true, nil
	}
	if now < h.probeAfter.Load() || !h.asking.CompareAndSwap(false, true) {
		return false, nil
	}
	// st hands the lease over once: 1 the caller stopped waiting first,
	// 2 the statement took the lease first.
	var st atomic.Int32
	err := h.c.detach(ctx, func(qctx context.Context) error {
		defer h.asking.Store(false)
		got, err := h.tryProbe(qctx)
		if got {
			h.change(grantretry.FleetBreakerOpen, grantretry.FleetBreakerHalfOpen)
		}
		if got && !st.CompareAndSwap(0, 2) {
			h.leased.Store(h.probeAfter.Load()) // for the next call
		}
		return err
	})
	switch {
	case errors.Is(err, errBusy):
		h.asking.Store(false)
		return false, nil
	case err != nil && ctx.Err() != nil:
		return !st.CompareAndSwap(0, 1), nil
	case err != nil:
		return false, err
	}
	return st.Load() == 2, nil
}

// tryProbeSQL is TryProbe's statement.
const tryProbeSQL = `
		WITH u AS (UPDATE grantretry_hosts SET probe_until = now() + $2::interval
			WHERE host = $1 AND opened_at IS NOT NULL AND probe_until < now() RETURNING probe_until)
		SELECT EXISTS (SELECT FROM u), CASE WHEN l > now() THEN EXTRACT(EPOCH FROM l - now())::float8 ELSE 0 END
		FROM (SELECT COALESCE((SELECT probe_until FROM u), h.probe_until) AS l
			FROM grantretry_hosts h WHERE h.host = $1) AS lease, ` + asyncCommit

// tryProbe takes the lease if it is free, and notes when the lease held
// (taken now or by another process) ends.
func (h *coordHost) tryProbe(ctx context.Context) (bool, error) {
	var got bool
	var left float64 // seconds
	asked := time.Since(h.c.start)
	err := h.c.pool.QueryRow(ctx, tryProbeSQL,
		h.key, h.policy.Load().Probe).Scan(&got, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.leaseAtLeast(asked + time.Duration(left*float64(time.Second)))
	return got, nil
}

// ProbeDone closes the fleet's breaker everywhere after a good probe; a
// failed one keeps it open, and the lease it holds spaces the next probe.
func (h *coordHost) ProbeDone(ctx context.Context, ok bool) error {
	if !ok {
		h.change(grantretry.FleetBreakerHalfOpen, grantretry.FleetBreakerOpen)
		return nil
	}
	return h.c.detach(ctx, h.probeOK)
}

func (h *coordHost) probeOK(ctx context.Context) error {
	_, err := h.c.pool.Exec(ctx, `
		WITH u AS (UPDATE grantretry_hosts SET opened_at = NULL, failures = 0, probe_until = '-infinity'
			WHERE host = $1 RETURNING host)
		SELECT pg_notify($2, 'closed ' || host) FROM u, `+asyncCommit, h.key, Channel)
	if err == nil {
		// The change first: a call that hears the breaker closed finds it.
		h.change(grantretry.FleetBreakerHalfOpen, grantretry.FleetBreakerClosed)
		h.set(false)
	}
	return err
}

// listen holds the dedicated connection that hears the announcements,
// and reconnects, a second apart, when it is lost.
func (c *Coordinator) listen(ctx context.Context) {
	defer c.wg.Done()
	for ctx.Err() == nil {
		err := c.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err
		c.unknown()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *Coordinator) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	c.reread(ctx) // what was announced before we listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		state, key, ok := strings.Cut(n.Payload, " ")
		if !ok || (state != "open" && state != "closed") {
			key = n.Payload
		}
		c.mu.Lock()
		h := c.hosts[key].Value()
		c.mu.Unlock()
		switch {
		case h == nil:
		case key != n.Payload:
			h.set(state == "open")
		default:
			// On the listener's own connection: the pool's may all be
			// busy with the failure reports that opened the breaker.
			c.rereadHosts(ctx, conn, []*coordHost{h})
		}
	}
}

// warmSQL are the statements of the failure path, prepared on the pool's
// idle connections by warm.
var warmSQL = []string{failedSQL, tryProbeSQL}

// warm prepares the failure path's statements on the pool's idle
// connections that lack them, named by their text, so that pgx runs the
// prepared statement there, and runs them there (warmRun). The first
// failure reports of an outage come all at once, each on a connection
// that has never run them: a cold server backend took 1 to 3.5 ms to
// parse the report (loading its catalog caches), against well under 1 ms
// warm, its first runs cost more again, and every report queues behind
// the one before on the host's row. A pool whose connections are
// closed when idle (MinConns 0) leaves the next ones cold; give it
// MinConns of at least 2 (docs/fleet.md).
//
// warm holds at most one connection at a time, and each for at most
// warmLimit: the idle connections it took and knows warm (c.warmed, by
// identity: pgxpool keeps one *pgx.Conn for a connection's life) go back
// at once, and the cold ones one by one, so that the pool's other users
// and the failure reports always find the rest. A Prepare that waits (a
// migration's lock on the table) is cut at warmLimit; pgx then closes
// that connection, and the next tick tries a new one. Only tick calls it.
func (c *Coordinator) warm(ctx context.Context) {
	for range warmRounds {
		var cold *pgxpool.Conn
		for _, conn := range c.pool.AcquireAllIdle(ctx) {
			if cold != nil || c.warmed[conn.Conn()] {
				conn.Release()
				continue
			}
			cold = conn
		}
		if cold == nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, warmLimit)
		ok := true
		for _, sql := range warmSQL {
			if _, err := cold.Conn().Prepare(pctx, sql, sql); err != nil {
				ok = false
				break
			}
		}
		ok = ok && warmRun(pctx, cold.Conn()) == nil
		cancel()
		if ok {
			if len(c.warmed) >= maxWarmed { // connections closed since: forget them all
				clear(c.warmed)
			}
			c.warmed[cold.Conn()] = true
		}
		cold.Release()
		if !ok {
			return
		}
	}
}

// warmRun runs the failure path's statements warmRuns times on conn, in
// a transaction it rolls back, for a host key no funder has: the
// server's first runs of a prepared statement are its dearest. On the
// project's AMD VM, one backend that had only prepared the report took
// 3.3-3.9 ms for its first run, 0.6-1 ms for its second, 0.3-0.4 ms for
// the next three, which the server plans for their parameters, and
// 0.1-0.2 ms from the sixth, when it keeps one plan (psql, 2026-12-01).
// An outage's first reports came on 32 such backends at once in the
// simulator, and both cores were busy with them for its first 100 ms
// (perf). The runs' first inserts the key's row and the rest update it,
// as a report on a host's row does, each carrying a success, as a
// process's first report does, so that the backend also compiles the
// bucket's level functions (PL/pgSQL, compiled by each backend at its
// first call); nothing is committed, and no other row is touched.
func warmRun(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // nothing to keep
	key := "grantretry warm " + strconv.FormatUint(rand.Uint64(), 36)
	now := time.Now()
	for range warmRuns {
		if err := tx.QueryRow(ctx, failedSQL, pgx.QueryExecModeExec, key, int64(0), DefaultProbeEvery, Channel,
			DefaultMaxTokens, &now, float64(1), float64(1), now).Scan(new(bool), new(bool), new(bool)); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, tryProbeSQL, key, DefaultProbeEvery).Scan(new(bool), new(float64)); err != nil {
			return err
		}
	}
	return nil
}

// warmLimit bounds one connection's preparing, warmRounds how many cold
// connections one tick warms, and maxWarmed how many connections warm
// remembers.
const (
	warmLimit  = 100 * time.Millisecond
	warmRounds = 4
	maxWarmed  = 256
	// warmRuns is how many times warmRun runs each statement: past the
	// five runs the server plans for their parameters, it decides whether
	// to keep one plan.
	warmRuns = 6
)

// tick re-reads the rows and deposits the counted successes, each on a
// timer whose first tick comes at a random point of its period (see
// phased).
func (c *Coordinator) tick(ctx context.Context) {
	defer c.wg.Done()
	reread := newPhased(c.cfg.reread)
	deposit := newPhased(c.cfg.depositEvery)
	defer reread.Stop()
	defer deposit.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reread.C:
			reread.next()
			c.reread(ctx)
			c.warm(ctx)
			if since := time.Since(c.start); since-c.swept >= sweepEvery {
				c.swept = since
				c.sweep(ctx, grantretry.HostIdle)
			}
		case <-c.fresh:
			c.reread(ctx)
			c.warm(ctx)
		case <-deposit.C:
			deposit.next()
			c.rebaseWall()
			c.deposit(ctx)
		}
	}
}

// phased fires every period, the first time at a random point of the
// first period. Processes started together (a deployment, a cron
// schedule, the simulator's 16 Coordinators) would otherwise deposit in
// step, 16 statements on a host's row at once every second, and an
// outage's first failure reports would queue behind them: in the
// simulator, whose outage began on a whole second of its Coordinators'
// life, those reports waited 10-34 ms at the server, 10 of the 29
// statements of the outage's first 45 ms being deposits (AMD EPYC,
// 2026-12-01, seed 3, with log_lock_waits and deadlock_timeout 3 ms).
type phased struct {
	*time.Timer
	period time.Duration
}

func newPhased(period time.Duration) phased {
	return phased{time.NewTimer(time.Duration(1 + rand.Int64N(int64(period)))), period}
}

// next arms the timer a period after the tick just received.
func (p phased) next() { p.Reset(p.period) }

func (c *Coordinator) reread(ctx context.Context) { c.rereadHosts(ctx, c.pool, c.all()) }

// querier is a pool or a connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// rereadHosts reads the rows of hs: the breaker and the quota hold; a
// host without a row is closed and not held. When the database does not
// answer, every host is unknown.
func (c *Coordinator) rereadHosts(ctx context.Context, q querier, hs []*coordHost) {
	if len(hs) == 0 {
		return
	}
	keys := make([]string, len(hs))
	olds := make([]*quotaHeard, len(hs)) // what hearQuota may replace
	for i, h := range hs {
		keys[i] = h.key
		olds[i] = h.quota.Load()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	asked := time.Since(c.start)
	rows, err := q.Query(ctx,
		`SELECT host, opened_at IS NOT NULL,
			CASE WHEN probe_until > now() THEN EXTRACT(EPOCH FROM probe_until - now())::float8 ELSE 0 END,
			`+quotaColumns+`
		FROM grantretry_hosts WHERE host = ANY($1)`, keys)
	if err != nil {
		c.unknown()
		return
	}
	type hostRow struct {
		open  bool
		lease float64 // seconds
		quota quotaRow
	}
	read := map[string]hostRow{}
	var key string
	var r hostRow
	_, err = pgx.ForEachRow(rows, append([]any{&key, &r.open, &r.lease}, r.quota.dest()...),
		func() error { read[key] = r; return nil })
	if err != nil {
		c.unknown()
		return
	}
	at := time.Now()
	for i, h := range hs {
		r := read[h.key]
		if r.open && r.lease > 0 {
			h.leaseAtLeast(asked + time.Duration(r.lease*float64(time.Second)))
		}
		h.set(r.open)
		h.hearQuota(olds[i], r.quota.heard(at))
	}
}

func (c *Coordinator) unknown() {
	for _, h := range c.all() {
		h.state.Store(int32(grantretry.FleetUnknown))
	}
}

// deposit adds each host's counted successes to its bucket, tokenRatio a
// success, and ends its run of failures. What the database does not take
// is counted again for the next deposit.
func (c *Coordinator) deposit(ctx context.Context) {
	for _, h := range c.all() {
		n := h.successes.Swap(0)
		if n == 0 {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.pool.Exec(dctx, depositSQL,
			h.key, float64(n)*h.policy.Load().TokenRatio, time.Unix(0, h.lastOK.Load()))
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			h.successes.Add(n)
		}
	}
}

// depositSQL adds up to $2 tokens to the host's bucket and ends its run
// of failures, each only as far as this process's last success ($3)
// allows. The successes of the last second are often older than what
// other processes did meanwhile; applied late, they would reorder
// history:
//   - A run of failures newer than the success (failed_at) stays. Breaking
//     it would make an outage's breaker open late whenever a deposit landed
//     among its first failures.
//   - The tokens added are at most what the bucket lacked when the
//     process last succeeded, by the row's recent levels
//     (grantretry_level_at), and the levels from then on are raised by
//     what was added (grantretry_credit), so that successes of other
//     processes from that time find that deficit filled. A single
//     process's throttle has each success at once, and a success that
//     finds the bucket full adds nothing. At an outage's start every
//     process still holds the successes of its last second, made while
//     the bucket was full: they add nothing, where added after the first
//     withdrawals they refilled the bucket once per process (7-15
//     retries in the outage where a single process makes 4). Adding a
//     deposit's tokens only when no withdrawal came after its last
//     success would drop about half of the deposits at a funder failing
//     a few calls in a hundred (the partial-failure figures in
//     docs/fleet.md).
//
// A deposit that would change neither leaves the row alone: it neither
// writes it nor, when the row's committed state already shows it stale,
// waits for the row's lock. At an outage's start every process that has
// not failed yet deposits successes made while the bucket was full, and
// each such deposit queued on the row with the failure reports.
//
// The parameters are typed: the server cannot infer them from the
// expression, and it refused the untyped statement ("operator is not
// unique: unknown * unknown") on every deposit until 2026-11-30.
const depositSQL = `WITH u AS (UPDATE grantretry_hosts
			SET tokens = LEAST(max_tokens, tokens + ` + depositCredit + `),
				levels = grantretry_credit(levels_at, levels, $3, ` + depositCredit + `, max_tokens),
				failures = CASE WHEN $3 > failed_at THEN 0 ELSE failures END
			WHERE host = $1 AND (` + depositCredit + ` > 0 OR $3 > failed_at) RETURNING 1)
			SELECT FROM u, ` + asyncCommit

// depositCredit is what a deposit of $2 tokens adds (see depositSQL).
const depositCredit = `LEAST($2::float8, GREATEST(max_tokens - grantretry_level_at(levels_at, levels, $3::timestamptz, max_tokens), 0))`

// sweepEvery is how often a Coordinator sweeps the rows, and sweepBatch
// how many rows one statement of the sweep deletes at most.
const (
	sweepEvery = time.Minute
	sweepBatch = 1000
)

// sweepSQL deletes the rows at rest: the breaker closed with no probe
// lease, no failure, no withdrawal and no quota hold for $1, and the bucket full again
// by its refill (refill_s, the refill period of the last withdrawal's
// policy; a row from before that column has DefaultRefill's, $3). Such a row
// is what no row is, a closed breaker and a full bucket, but for its run
// of failures, which is forgotten: a failure more than $1 after the last
// one starts a run of its own, as a success in between would. Rows busy
// with a report are skipped, not waited for; a report that comes after
// the delete inserts the row afresh.
const sweepSQL = `WITH d AS (DELETE FROM grantretry_hosts WHERE host IN (
		SELECT host FROM grantretry_hosts
		WHERE opened_at IS NULL AND probe_until < now()
			AND failed_at < now() - $1::interval AND refilled < now() - $1::interval
			AND (quota_until IS NULL OR quota_until < now() - $1::interval)
			AND (max_tokens = 0 OR tokens + EXTRACT(EPOCH FROM now() - refilled) * max_tokens / 2
				/ COALESCE(NULLIF(refill_s, 0), $3::float8) >= max_tokens)
		LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1)
	SELECT count(*) FROM d, ` + asyncCommit

// sweep deletes the rows at rest for idle (see sweepSQL), a batch at a
// time, so that the table holds the hosts a fleet calls, not every host
// it ever called. Every Coordinator sweeps: a delete is idempotent.
func (c *Coordinator) sweep(ctx context.Context, idle time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		var n int64
		if err := c.pool.QueryRow(ctx, sweepSQL, idle, sweepBatch, DefaultRefill.Seconds()).Scan(&n); err != nil || n < sweepBatch {
			return // the next sweep tries again
		}
	}
}
