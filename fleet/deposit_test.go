package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// failuresOf reads the host's run of failures.
func failuresOf(t *testing.T, co *Coordinator) int {
	t.Helper()
	var n int
	if err := co.pool.QueryRow(context.Background(), `SELECT failures FROM grantretry_hosts WHERE host = $1`,
		coordKey).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Successes are deposited about once a second, so a deposit often carries
// successes older than the failures already counted: it must not break
// the newer run of failures (an outage's first failures would otherwise
// be forgotten whenever a process's deposit lands in them, and the
// fleet's breaker would open later than its threshold says).
func TestCoordinatorDepositOfOlderSuccessesKeepsANewerRunOfFailures(t *testing.T) {
	pool := newPool(t)
	co, h := oneHost(t, pool, grantretry.FleetPolicy{Threshold: 5, Probe: time.Second})
	ctx := context.Background()
	h.Succeeded()
	time.Sleep(10 * time.Millisecond) // the failures come after the success
	for range 3 {
		if _, err := h.Failed(ctx, grantretry.FleetFailure{CallFailed: true}); err != nil {
			t.Fatal(err)
		}
	}
	co.deposit(ctx) // the success, older than the three failures
	if n := failuresOf(t, co); n != 3 {
		t.Fatalf("after a deposit of an older success: %d failures in the run, want 3", n)
	}
	for range 2 {
		if _, err := h.Failed(ctx, grantretry.FleetFailure{CallFailed: true}); err != nil {
			t.Fatal(err)
		}
	}
	if h.State() != grantretry.FleetOpen {
		t.Fatalf("after 5 failures with threshold 5: %v", h.State())
	}
	// A success newer than the run still breaks it when deposited.
	h.Succeeded()
	co.deposit(ctx)
	if n := failuresOf(t, co); n != 0 {
		t.Fatalf("after a deposit of a newer success: %d failures, want 0", n)
	}
}

// A failure report that takes a token first deposits the successes this
// process counted since its last deposit, as a single process's throttle
// has them at once: the withdrawal, and the answer whether to retry, see
// the bucket those successes refilled. They are not deposited again.
func TestCoordinatorFailureReportDepositsPendingSuccessesFirst(t *testing.T) {
	pool := newPool(t)
	co, h := oneHost(t, pool, grantretry.FleetPolicy{Threshold: 100, Probe: time.Second,
		MaxTokens: 10, TokenRatio: 1, Refill: time.Hour})
	ctx := context.Background()
	withdraw(t, h, 4)
	if tokens, _ := bucket(t, pool); tokens < 5.99 || tokens > 6.01 {
		t.Fatalf("after 4 withdrawals: %v tokens, want 6", tokens)
	}
	for range 3 {
		h.Succeeded()
	}
	retry := withdraw(t, h, 1)
	if tokens, _ := bucket(t, pool); tokens < 7.99 || tokens > 8.01 || !retry {
		t.Fatalf("3 successes then a withdrawal from 6: %v tokens (retry %v), want 8 (true)", tokens, retry)
	}
	co.deposit(ctx)
	if tokens, _ := bucket(t, pool); tokens < 7.99 || tokens > 8.01 {
		t.Fatalf("the next deposit: %v tokens, want 8 still", tokens)
	}
}

// The once-a-second deposit refills the bucket by the successes counted
// since the last one, times the ratio.
func TestCoordinatorDepositRefillsTheBucket(t *testing.T) {
	pool := newPool(t)
	co, h := oneHost(t, pool, grantretry.FleetPolicy{Threshold: 100, Probe: time.Second,
		MaxTokens: 10, TokenRatio: 0.5, Refill: time.Hour})
	withdraw(t, h, 4)
	for range 3 {
		h.Succeeded()
	}
	co.deposit(context.Background())
	if tokens, _ := bucket(t, pool); tokens < 7.49 || tokens > 7.51 {
		t.Fatalf("6 tokens and 3 successes at 0.5: %v tokens, want 7.5", tokens)
	}
	if n := h.(*coordHost).successes.Load(); n != 0 {
		t.Fatalf("%d successes still counted after the deposit, want 0", n)
	}
}

// tokensNear fails unless the host's bucket holds want tokens (the time
// refill, an hour's, adds a few millionths).
func tokensNear(t *testing.T, pool *pgxpool.Pool, want float64, what string) {
	t.Helper()
	if tokens, _ := bucket(t, pool); tokens < want-0.001 || tokens > want+0.01 {
		t.Fatalf("%s: %v tokens, want %v", what, tokens, want)
	}
}

// threeProcesses is three Coordinators on one host, a bucket of 10, a
// token a success, no deposits but the test's own.
func threeProcesses(t *testing.T, pool *pgxpool.Pool) ([3]*Coordinator, [3]grantretry.FleetHost) {
	policy := grantretry.FleetPolicy{Threshold: 100, Probe: time.Second, MaxTokens: 10, TokenRatio: 1, Refill: time.Hour}
	var cos [3]*Coordinator
	var hs [3]grantretry.FleetHost
	for i := range hs {
		cos[i] = NewCoordinator(pool, WithDepositEvery(time.Hour))
		t.Cleanup(cos[i].Close)
		hs[i] = cos[i].Host(coordKey, policy)
	}
	return cos, hs
}

// Successes made while the bucket was full add nothing, whether deposited
// on the tick or with the process's own first failure, and successes
// deposited late add no more than the bucket lacked when they were made,
// once: the bucket ends where one process's throttle, which has every
// success at once, would have it. At an outage's start every process
// still holds its last second's successes, made while the bucket was
// full; applied after the first withdrawals, they refilled the bucket
// once per process.
func TestCoordinatorStaleSuccessesDoNotRefillTheBucket(t *testing.T) {
	pool := newPool(t)
	cos, hs := threeProcesses(t, pool)
	ctx := context.Background()
	// One process's throttle, event by event: 10.
	hs[1].Succeeded() // made while the bucket is full: nothing
	time.Sleep(10 * time.Millisecond)
	withdraw(t, hs[0], 1) // 9
	time.Sleep(10 * time.Millisecond)
	for range 3 {
		hs[1].Succeeded() // 10, then nothing: full
	}
	hs[2].Succeeded() // nothing: full
	time.Sleep(10 * time.Millisecond)
	withdraw(t, hs[0], 4) // 5
	cos[1].deposit(ctx)
	tokensNear(t, pool, 6, "three successes made when the bucket lacked one, deposited after four withdrawals")
	withdraw(t, hs[2], 1) // carries its success, made when the bucket was full again
	tokensNear(t, pool, 5, "a withdrawal carrying a success made once the bucket was full")
}

// At a funder failing a few calls in a hundred, a process's last success
// usually comes before some other process's latest withdrawal: its
// deposit still adds what the bucket lacked when the successes came. A
// deposit dropped whole would let the shared bucket through a third as
// many retries as one process's, at 5% of calls failing.
func TestCoordinatorDepositAfterALaterWithdrawalStillCounts(t *testing.T) {
	pool := newPool(t)
	cos, hs := threeProcesses(t, pool)
	ctx := context.Background()
	withdraw(t, hs[0], 3) // 7
	time.Sleep(10 * time.Millisecond)
	hs[1].Succeeded() // 8
	hs[1].Succeeded() // 9
	time.Sleep(10 * time.Millisecond)
	withdraw(t, hs[0], 1) // 8
	cos[1].deposit(ctx)
	tokensNear(t, pool, 8, "two successes made when the bucket lacked three, deposited after a later withdrawal")
}

// The outage's shape: every process holds successes made before the first
// withdrawal, while the bucket was full (here before the host had a row);
// deposited on the tick or carried by a withdrawal, they add nothing.
func TestCoordinatorSuccessesMadeWhileTheBucketWasFullAddNothing(t *testing.T) {
	pool := newPool(t)
	cos, hs := threeProcesses(t, pool)
	ctx := context.Background()
	for range 3 {
		hs[1].Succeeded()
		hs[2].Succeeded()
	}
	time.Sleep(10 * time.Millisecond)
	withdraw(t, hs[0], 5) // 5
	cos[1].deposit(ctx)
	tokensNear(t, pool, 5, "successes made while the bucket was full, deposited after five withdrawals")
	withdraw(t, hs[2], 1) // 4
	tokensNear(t, pool, 4, "a withdrawal carrying successes made while the bucket was full")
}

// A deposit whose successes are older than the row's last withdrawal and
// last failure changes nothing, and does not wait for the row's lock: at
// an outage's start the processes that have not failed yet deposit such
// successes, and each queued on the row with the failure reports. Here
// another transaction holds the row's lock for the whole deposit; one
// that waited would be cut by its second's limit and keep its successes
// for the next try.
func TestCoordinatorStaleDepositDoesNotWaitForTheRow(t *testing.T) {
	pool := newPool(t)
	policy := grantretry.FleetPolicy{Threshold: 100, Probe: time.Second, MaxTokens: 10, TokenRatio: 1, Refill: time.Hour}
	_, failing := oneHost(t, pool, policy)
	stale, h := oneHost(t, pool, policy)
	ctx := context.Background()
	h.Succeeded()
	time.Sleep(10 * time.Millisecond) // the failure comes after the success
	withdraw(t, failing, 1)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT FROM grantretry_hosts WHERE host = $1 FOR UPDATE`, coordKey); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stale.deposit(ctx)
	took := time.Since(start)
	if n := h.(*coordHost).successes.Load(); n != 0 {
		t.Fatalf("the stale deposit waited for the locked row (%v) and kept its %d successes", took, n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if tokens, _ := bucket(t, pool); tokens < 8.99 || tokens > 9.01 {
		t.Fatalf("%v tokens, want 9: the stale success refilled the bucket", tokens)
	}
}

// A report cut at the limit is answered no while the database is heard
// (the host's state known): it is slow, not away, and a cut report left to
// the local throttle was a retry the shared budget never granted. While
// the database is away (FleetUnknown) the local throttle decides (the
// error), unless the fleet's budget last answered this process that it
// allows no retry.
func TestCoordinatorCutReportOfASpentBudgetAnswersNo(t *testing.T) {
	pool := newPool(t)
	policy := grantretry.FleetPolicy{Threshold: 100, Probe: time.Second, MaxTokens: 10, TokenRatio: 1, Refill: time.Hour}
	retryable := grantretry.FleetFailure{CallFailed: true, Retryable: true}
	cut, cancel := context.WithCancel(context.Background())
	cancel() // the caller has stopped waiting before the statement ran
	co, fh := oneHost(t, pool, policy)
	h := fh.(*coordHost)
	waitFor(t, "the host's state", func() bool { return h.State() == grantretry.FleetClosed })
	// Each cut report's statement runs on; wait until it has landed and
	// said what it learned (the state, the budget's answer).
	settled := func() { waitFor(t, "the cut report to settle", func() bool { return len(co.slots) == 0 }) }

	// Heard: no, whatever the budget last said.
	if retry, err := h.Failed(cut, retryable); retry || err != nil {
		t.Fatalf("a cut report while the database is heard: %v, %v; want false, nil", retry, err)
	}
	settled()
	if !withdraw(t, h, 1) { // 10 to 8: allowed
		t.Fatal("a withdrawal from 9 of 10: retry false")
	}
	if retry, err := h.Failed(cut, retryable); retry || err != nil {
		t.Fatalf("a cut report while the database is heard, after an answer that allowed a retry: %v, %v; want false, nil", retry, err)
	}
	settled()

	// Away: the local throttle decides (Failed returns the error), unless
	// the budget's last answer was no. Each case as Failed decides it,
	// with nothing in flight that could change the state meanwhile.
	h.state.Store(int32(grantretry.FleetUnknown))
	h.learn(true, time.Since(co.start))
	if h.refusesCut(retryable) {
		t.Fatal("away, after an answer that allowed a retry: refused, want the local throttle")
	}
	h.learn(false, time.Since(co.start))
	if !h.refusesCut(retryable) {
		t.Fatal("away, after an answer that allowed no retry: left to the local throttle, want refused")
	}
	if h.refusesCut(grantretry.FleetFailure{CallFailed: true}) {
		t.Fatal("a failure that takes no token refused: it asks nothing of the budget")
	}
	h.set(false)
	h.learn(true, time.Since(co.start))
	if !h.refusesCut(retryable) {
		t.Fatal("heard, after an answer that allowed a retry: left to the local throttle, want refused")
	}
}

// oneHost is a Coordinator on pool that deposits only when the test
// says, and its host under p.
func oneHost(t *testing.T, pool *pgxpool.Pool, p grantretry.FleetPolicy) (*Coordinator, grantretry.FleetHost) {
	co := NewCoordinator(pool, WithDepositEvery(time.Hour))
	t.Cleanup(co.Close)
	return co, co.Host(coordKey, p)
}

// withdraw reports n transient failures of h, each taking a token, and
// returns the last answer.
func withdraw(t *testing.T, h grantretry.FleetHost, n int) (retry bool) {
	t.Helper()
	for range n {
		var err error
		if retry, err = h.Failed(context.Background(), grantretry.FleetFailure{CallFailed: true, Retryable: true}); err != nil {
			t.Fatal(err)
		}
	}
	return retry
}

// wallNow, the monotonic clock read as the wall clock, agrees with
// time.Now: a success's time is compared with the database's.
func TestWallNowIsTheWallClock(t *testing.T) {
	for _, age := range []time.Duration{0, time.Hour} {
		c := &Coordinator{start: time.Now().Add(-age)}
		c.rebaseWall()
		for range 100 {
			before := time.Now().UnixNano()
			got := c.wallNow()
			after := time.Now().UnixNano()
			if got < before-int64(time.Microsecond) || got > after+int64(time.Microsecond) {
				t.Fatalf("started %v ago: wallNow %d outside [%d, %d]", age, got, before, after)
			}
		}
	}
}

// A failure is dated when it happened, not when its report lands: a
// report that lands late, after a success that followed its failure, does
// not make the next failure continue the run through that success (the
// first reports after the database comes back are late). Without a success
// between them, two failures are a run of two.
func TestCoordinatorLateReportDoesNotRunThroughALaterSuccess(t *testing.T) {
	pool := newPool(t)
	co, fh := oneHost(t, pool, grantretry.FleetPolicy{Threshold: 5, Probe: time.Second})
	h := fh.(*coordHost)
	ctx := context.Background()
	f := grantretry.FleetFailure{CallFailed: true}
	t0 := time.Now().Add(-50 * time.Millisecond)
	// An earlier failure, and a success after it.
	if _, err := h.failed(ctx, f, nil, t0.Add(-20*time.Millisecond), time.Since(co.start)); err != nil {
		t.Fatal(err)
	}
	before := t0.Add(-10 * time.Millisecond)

	// The next failure's report lands 50 ms late; a success came 10 ms
	// after that failure, and the next failure 20 ms after it.
	if _, err := h.failed(ctx, f, &before, t0, time.Since(co.start)); err != nil {
		t.Fatal(err)
	}
	if n := failuresOf(t, co); n != 1 {
		t.Fatalf("run of %d after a success between the failures, want 1", n)
	}
	success := t0.Add(10 * time.Millisecond)
	if _, err := h.failed(ctx, f, &success, t0.Add(20*time.Millisecond), time.Since(co.start)); err != nil {
		t.Fatal(err)
	}
	if n := failuresOf(t, co); n != 1 {
		t.Fatalf("run of %d after a success between the failures, want 1", n)
	}
	// No success since: the run goes on.
	if _, err := h.failed(ctx, f, &success, t0.Add(30*time.Millisecond), time.Since(co.start)); err != nil {
		t.Fatal(err)
	}
	if n := failuresOf(t, co); n != 2 {
		t.Fatalf("run of %d after two failures with no success between, want 2", n)
	}
}

// An answer is dated by when its report was made: a report cut at the
// limit whose "no" comes back after a newer report's "yes" does not make
// the budget known spent, and a newer "no" does.
func TestCoordinatorLateAnswerIsNotTheNewest(t *testing.T) {
	_, fh := oneHost(t, newPool(t), grantretry.FleetPolicy{Threshold: 100, Probe: time.Second, MaxTokens: 10, TokenRatio: 1, Refill: time.Hour})
	h := fh.(*coordHost)
	h.learn(true, 2*time.Millisecond)
	h.learn(false, time.Millisecond) // made before the yes, learned after it
	if h.knownSpent() {
		t.Fatal("an older report's no, learned last, made the budget known spent")
	}
	h.learn(false, 3*time.Millisecond)
	if !h.knownSpent() {
		t.Fatal("a newer report's no did not make the budget known spent")
	}
}

// Coordinators started together tick at random points of the period,
// not in step: 16 deposits on a host's row at once, every second, held
// up the failure reports of an outage that began then.
func TestPhasedTimersStartedTogetherAreSpread(t *testing.T) {
	const period = 100 * time.Millisecond
	start := time.Now()
	fired := make(chan time.Duration, 16)
	for range 16 {
		p := newPhased(period)
		go func() {
			defer p.Stop()
			<-p.C
			fired <- time.Since(start)
		}()
	}
	first, last := time.Duration(1<<62), time.Duration(0)
	for range 16 {
		d := <-fired
		first, last = min(first, d), max(last, d)
	}
	if first > period {
		t.Errorf("first tick after %v, want within the period %v", first, period)
	}
	if last-first < period/5 {
		t.Errorf("16 first ticks within %v of each other (%v to %v): in step", last-first, first, last)
	}
}
