package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
)

// Run runs the scenario once per policy, one after another, each against a
// fresh funder and a fresh inner transport, and returns one Result per
// policy in the same order. progress, if not nil, gets one line as each
// policy starts. Run fails only if the scenario is invalid, no loopback
// port can be had, or ctx ends.
func Run(ctx context.Context, sc Scenario, ps []Policy, progress io.Writer) ([]Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, errors.New("no policy to run")
	}
	out := make([]Result, 0, len(ps))
	for _, p := range ps {
		if progress != nil {
			fmt.Fprintf(progress, "sim: running %s (%v of simulated time in about %v)\n",
				p.Name, sc.Run, sc.realTime(sc.Run).Round(time.Millisecond))
		}
		index := policyIndex(p.ID)
		r, err := runPolicy(ctx, sc, p, index)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func policyIndex(id string) int {
	ps := allPolicies()
	for i, p := range ps {
		if p.ID == id {
			return i
		}
	}
	return len(ps)
}

// callRecord is one logical call as a worker saw it, in simulated time.
type callRecord struct {
	start, took time.Duration
	callEnd
}

// callEnd is how a call ended. The hand-rolled policies report no
// attempts (-1), stop reason or correlation id.
type callEnd struct {
	disp     grantretry.Disposition
	attempts int
	stop     string // a grantretry.Stop* constant
	corr     string // X-Correlation-ID
}

// runner is one policy's run: the funder, the client and the clock the
// workers share. It never changes once built.
type runner struct {
	sc     Scenario
	clk    simClock
	url    string
	client *http.Client
	f      *funder
}

// run is one run's raw material, for newResult and newLowVolumeRun.
type run struct {
	calls          [][]callRecord // per worker
	f              *funder
	recorded, dups int
	wall           time.Duration
}

func runPolicy(ctx context.Context, sc Scenario, p Policy, index int) (Result, error) {
	raw, err := runOnce(ctx, sc, p, index, 0)
	if err != nil {
		return Result{}, err
	}
	return newResult(sc, p, raw), nil
}

// runOnce runs one policy once against a fresh funder and a fresh inner
// transport; probe, if positive, is the funder's probe delay, and the run
// then ends with the probed call.
func runOnce(ctx context.Context, sc Scenario, p Policy, index int, probe time.Duration) (run, error) {
	clk := simClock{start: time.Now(), scale: sc.Scale}
	f := newFunder(sc, clk)
	f.probeAfter = probe
	url, stop, err := serve(f)
	if err != nil {
		return run{}, err
	}
	defer stop()
	inner := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        2 * sc.Workers,
		MaxIdleConnsPerHost: 2 * sc.Workers,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer inner.CloseIdleConnections()
	r := &runner{sc: sc, clk: clk, url: url, client: &http.Client{Transport: p.wrap(sc, index, inner)}, f: f}

	// Nothing starts after the run; the guard bounds the calls in flight.
	ctx, cancel := context.WithTimeout(ctx, sc.realTime(sc.Run+sc.callGuard()))
	defer cancel()
	began := time.Now()
	calls := make([][]callRecord, sc.Workers)
	var wg sync.WaitGroup
	for w := range sc.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls[w] = r.worker(ctx, w)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return run{}, err
	}
	wall := time.Since(began)
	recorded, dups := f.ledger()
	return run{calls: calls, f: f, recorded: recorded, dups: dups, wall: wall}, nil
}

// worker submits one application after another until the run ends, or
// until the call the funder probed has ended. A call that ended as
// dead_letter, circuit_open or canceled leaves its application owed: the
// next call sends it again, with the same submission id and bytes, as a
// pipeline's requeue would. Between two calls it pauses a think time
// drawn from its own seeded source.
func (r *runner) worker(ctx context.Context, w int) []callRecord {
	rng := rand.New(rand.NewPCG(r.sc.Seed, 1<<32+uint64(w)))
	think := r.sc.Think()
	period := think + r.sc.Latency
	low := time.Duration(float64(think) * (1 - r.sc.Spread))
	spread := int64(float64(think) * 2 * r.sc.Spread)
	wait := time.Duration(rng.Int64N(int64(period) + 1)) // staggered start
	var out []callRecord
	var id string
	var body []byte
	seq, owed := 0, false
	for {
		if !sleep(ctx, r.sc.realTime(wait)) {
			return out
		}
		start := r.clk.now()
		if start >= r.sc.Run {
			return out
		}
		if !owed {
			seq++
			id = fmt.Sprintf("W%03d-%06d", w, seq)
			body = applicationBody(id, w, seq)
		}
		end := r.submit(ctx, id, body)
		out = append(out, callRecord{start: start, took: r.clk.now() - start, callEnd: end})
		if r.f.probeAfter > 0 && end.corr != "" && end.corr == r.f.probed() {
			return out
		}
		owed = end.disp != grantretry.Succeeded && end.disp != grantretry.FailedTerminal
		wait = low + time.Duration(rng.Int64N(spread+1))
	}
}

func applicationBody(id string, w, seq int) []byte {
	b, _ := json.Marshal(application{
		SubmissionID: id,
		Title:        fmt.Sprintf("Community program %d, application %d", w, seq),
		Amount:       10000 + 250*((w*7919+seq*104729)%400),
	})
	return b
}

// submit makes one logical call through the policy and says how it ended.
func (r *runner) submit(ctx context.Context, id string, body []byte) callEnd {
	ctx, cancel := context.WithTimeout(ctx, r.sc.realTime(r.sc.callGuard()))
	defer cancel()
	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, id), http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return callEnd{disp: grantretry.FailedTerminal, attempts: -1}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	end := endOf(ctx, resp, err)
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
	}
	return end
}

// endOf reads how a call ended: from grantretry's Outcome (on the response,
// or in the *grantretry.Error) when the policy is grantretry, and
// otherwise by the same rules from what the hand-rolled loop returned (a
// response below 400 succeeded, a terminal verdict failed, a transient one
// is dead_letter: out of retries).
func endOf(ctx context.Context, resp *http.Response, err error) callEnd {
	if out, ok := grantretry.OutcomeOf(resp); ok {
		return callEnd{disp: out.Disposition, attempts: out.Attempts, stop: out.StopReason, corr: out.CorrelationID}
	}
	var e *grantretry.Error
	if errors.As(err, &e) {
		return callEnd{disp: e.Disposition, attempts: e.Attempts, stop: e.StopReason, corr: e.CorrelationID}
	}
	return callEnd{disp: dispositionOf(ctx, resp, err), attempts: -1}
}

// dispositionOf is the disposition of a hand-rolled policy's call.
func dispositionOf(ctx context.Context, resp *http.Response, err error) grantretry.Disposition {
	if ctx.Err() != nil {
		return grantretry.Canceled
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	switch {
	case err == nil && status < 400:
		return grantretry.Succeeded
	case !grantretry.Classify(status, err).Retryable:
		return grantretry.FailedTerminal
	}
	return grantretry.DeadLetter
}
