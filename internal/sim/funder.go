package sim

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
)

// simClock maps real time onto simulated time: the run starts at 0, and
// each real nanosecond is Scale simulated ones. Safe for concurrent use; it
// never changes.
type simClock struct {
	start time.Time
	scale float64
}

// now is the simulated time since the start of the run.
func (c simClock) now() time.Duration {
	return time.Duration(float64(time.Since(c.start)) * c.scale)
}

// application is the body a worker submits.
type application struct {
	SubmissionID string `json:"submission_id"`
	Title        string `json:"title"`
	Amount       int    `json:"amount_requested"`
}

// funder is the simulated funder API: one endpoint, POST /applications.
// In turn, for each request:
//
//   - it counts the arrival, in the simulated second it falls in;
//   - during the outage it answers 503 at once, with no Retry-After and
//     nothing recorded, as a portal whose backend is down does behind its
//     load balancer;
//   - past Capacity requests in the current simulated second it answers
//     429, again with no Retry-After (it could only say whole real seconds,
//     hundreds of simulated ones) and nothing recorded;
//   - a request the scenario's other failures pick (the blip, the random
//     share, a probe: see fault) gets 503 at once, nothing recorded;
//   - otherwise it records the application, unless the request's
//     Idempotency-Key was seen before (then it replays 200 instead of
//     answering 201), works on it for Latency, and answers. If the outage
//     began meanwhile, the connection is dropped instead: the application
//     is recorded and the answer lost, the case that duplicates a
//     submission sent again without a key.
//
// It counts effects per submission id, read from the body, so duplicates
// are counted whether or not the client sent a key. Safe for concurrent
// use: counters are atomic and mu guards the maps and the probe.
type funder struct {
	sc  Scenario
	clk simClock
	// probeAfter, if positive, is the delay after the blip's end of the
	// probe (see Scenario.Probes). It is set before the funder serves.
	probeAfter time.Duration

	arrivals  []atomic.Int64 // per simulated second; the last one also takes later arrivals
	admitted  []atomic.Int64 // arrivals outside the outage, per simulated second
	succeeded []atomic.Int64 // arrivals answered 200 or 201, per simulated second
	fresh     []atomic.Int64 // applications recorded for the first time, per simulated second
	inOutage  atomic.Int64   // arrivals during the outage
	blipLeft  atomic.Int64   // blip failures still to answer
	blipEnd   atomic.Int64   // simulated time of the blip's last failure; -1 until then

	mu        sync.Mutex
	keys      map[string]bool // Idempotency-Keys recorded
	effects   map[string]int  // applications recorded, per submission id
	tries     map[string]int  // requests per submission id, for the random share
	attempts  map[string]int  // requests per X-Correlation-ID, for FailFirst
	calls     map[string]bool // X-Correlation-IDs seen, while a probe waits
	probeID   string          // the X-Correlation-ID of the call probed, "" until then
	probeDone bool
}

func newFunder(sc Scenario, clk simClock) *funder {
	// Calls may run past the end of the run by at most the call guard.
	n := int((sc.Run+sc.callGuard())/time.Second) + 2
	f := &funder{
		sc:        sc,
		clk:       clk,
		arrivals:  make([]atomic.Int64, n),
		admitted:  make([]atomic.Int64, n),
		succeeded: make([]atomic.Int64, n),
		fresh:     make([]atomic.Int64, n),
		keys:      make(map[string]bool),
		effects:   make(map[string]int),
		tries:     make(map[string]int),
		attempts:  make(map[string]int),
		calls:     make(map[string]bool),
	}
	f.blipLeft.Store(int64(sc.BlipFailures))
	f.blipEnd.Store(-1)
	return f
}

func (f *funder) second(t time.Duration) int {
	return min(max(int(t/time.Second), 0), len(f.arrivals)-1)
}

func (f *funder) down(t time.Duration) bool {
	return t >= f.sc.OutageStart && t < f.sc.OutageEnd()
}

func (f *funder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := f.clk.now()
	sec := f.second(now)
	f.arrivals[sec].Add(1)
	firstAttempt := f.newCall(r.Header.Get(grantretry.HeaderCorrelationID))
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if f.down(now) {
		f.inOutage.Add(1)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if f.admitted[sec].Add(1) > int64(f.sc.Capacity) {
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return
	}
	var app application
	if err != nil || r.Method != http.MethodPost || json.Unmarshal(body, &app) != nil || app.SubmissionID == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if f.fault(now, r.Header.Get(grantretry.HeaderCorrelationID), firstAttempt, app.SubmissionID) {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	replay, fresh := f.record(r.Header.Get(grantretry.HeaderIdempotencyKey), app.SubmissionID)
	if fresh {
		f.fresh[sec].Add(1)
	}
	if !sleep(r.Context(), f.sc.realTime(f.sc.Latency)) {
		return
	}
	if f.down(f.clk.now()) {
		f.dropConnection(w)
		return
	}
	f.succeeded[sec].Add(1)
	if replay {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// newCall reports whether a request is the first the funder sees with its
// X-Correlation-ID, the first attempt of a call. It keeps track only while
// a probe waits, and never for requests without the header.
func (f *funder) newCall(corr string) bool {
	if f.probeAfter <= 0 || corr == "" {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probeDone || f.calls[corr] {
		return false
	}
	f.calls[corr] = true
	return true
}

// fault reports whether the scenario's other failures pick this request,
// at simulated time now, for a 503:
//
//   - the blip: the first BlipFailures requests from BlipAt on;
//   - the probe: after the blip, the first attempt of the first call that
//     arrives probeAfter or more after the blip's last failure;
//   - the flaky funder's: the first FailFirst attempts of each call, told
//     apart by their X-Correlation-ID;
//   - the random share: any other request, with probability FailShare. The
//     draw is a function of the seed, the submission id and how many
//     requests for it came before, so runs of one seed draw alike as long
//     as their calls do.
func (f *funder) fault(now time.Duration, corr string, firstAttempt bool, id string) bool {
	if f.sc.BlipFailures > 0 && now >= f.sc.BlipAt {
		if left := f.blipLeft.Add(-1); left >= 0 {
			if left == 0 {
				f.blipEnd.Store(int64(now))
			}
			return true
		}
	}
	if f.sc.FailFirst > 0 && f.attempt(corr) <= f.sc.FailFirst {
		return true
	}
	if end := f.blipEnd.Load(); firstAttempt && end >= 0 && now >= time.Duration(end)+f.probeAfter && f.takeProbe(corr) {
		return true
	}
	return f.sc.FailShare > 0 && f.draw(id) < f.sc.FailShare
}

// attempt counts a request of corr's call and returns which attempt of it
// this is, from 1.
func (f *funder) attempt(corr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[corr]++
	return f.attempts[corr]
}

// takeProbe makes corr's call the probed one, unless one already is.
func (f *funder) takeProbe(corr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.probeDone {
		return false
	}
	f.probeDone, f.probeID = true, corr
	return true
}

// probed returns the X-Correlation-ID of the call the probe failed, or ""
// if none was yet.
func (f *funder) probed() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probeID
}

// draw is the random share's uniform draw in [0, 1) for the next request
// of submission id.
func (f *funder) draw(id string) float64 {
	f.mu.Lock()
	f.tries[id]++
	n := f.tries[id]
	f.mu.Unlock()
	h := fnv.New64a()
	io.WriteString(h, id)
	return rand.New(rand.NewPCG(f.sc.Seed, h.Sum64()^uint64(n))).Float64()
}

// blipEndedAt returns the simulated time of the blip's last failure, and
// whether the blip is over.
func (f *funder) blipEndedAt() (time.Duration, bool) {
	end := f.blipEnd.Load()
	return time.Duration(end), end >= 0
}

// record applies one application, unless its key was recorded before, and
// reports whether it was a replay and whether it was the submission's
// first recording.
func (f *funder) record(key, id string) (replay, fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if key != "" {
		if f.keys[key] {
			return true, false
		}
		f.keys[key] = true
	}
	f.effects[id]++
	return false, f.effects[id] == 1
}

// dropConnection closes the connection without an answer.
func (f *funder) dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (never on HTTP/1.1): aborting the handler drops
		// the connection too.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// ledger returns how many applications were recorded, and how many of
// those were the same submission recorded again.
func (f *funder) ledger() (recorded, duplicates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.effects {
		recorded += n
		duplicates += n - 1
	}
	return recorded, duplicates
}

// perSecond returns counts of each simulated second of the run.
func perSecond(counts []atomic.Int64, run time.Duration) []int64 {
	n := min(int((run+time.Second-1)/time.Second), len(counts))
	out := make([]int64, n)
	for i := range out {
		out[i] = counts[i].Load()
	}
	return out
}

func (f *funder) total() int64 {
	var n int64
	for i := range f.arrivals {
		n += f.arrivals[i].Load()
	}
	return n
}

// serve starts the funder on an ephemeral port of 127.0.0.1, and returns
// its URL and a function that stops it.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln) // returns ErrServerClosed once stop is called
	}()
	stop = func() {
		srv.Close()
		<-done
	}
	return "http://" + ln.Addr().String() + "/applications", stop, nil
}

// sleep waits d, or until ctx is done; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
