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
	disp        grantretry.Disposition
}

// runner is one policy's run: the funder, the client and the clock the
// workers share. It never changes once built.
type runner struct {
	sc     Scenario
	clk    simClock
	url    string
	client *http.Client
}

func runPolicy(ctx context.Context, sc Scenario, p Policy, index int) (Result, error) {
	clk := simClock{start: time.Now(), scale: sc.Scale}
	f := newFunder(sc, clk)
	url, stop, err := serve(f)
	if err != nil {
		return Result{}, err
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
	r := &runner{sc: sc, clk: clk, url: url, client: &http.Client{Transport: p.wrap(sc, index, inner)}}

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
		return Result{}, err
	}
	wall := time.Since(began)
	recorded, dups := f.ledger()
	return newResult(sc, p, calls, f, recorded, dups, wall), nil
}

// worker submits one application after another until the run ends. A call
// that ended as dead_letter, circuit_open or canceled leaves its
// application owed: the next call sends it again, with the same submission
// id and bytes, as a pipeline's requeue would. Between two calls it pauses
// a think time drawn from its own seeded source.
func (r *runner) worker(ctx context.Context, w int) []callRecord {
	rng := rand.New(rand.NewPCG(r.sc.Seed, 1<<32+uint64(w)))
	think := r.sc.Think()
	period := think + r.sc.Latency
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
		disp := r.submit(ctx, id, body)
		out = append(out, callRecord{start: start, took: r.clk.now() - start, disp: disp})
		owed = disp != grantretry.Succeeded && disp != grantretry.FailedTerminal
		wait = think/2 + time.Duration(rng.Int64N(int64(think)+1))
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
func (r *runner) submit(ctx context.Context, id string, body []byte) grantretry.Disposition {
	ctx, cancel := context.WithTimeout(ctx, r.sc.realTime(r.sc.callGuard()))
	defer cancel()
	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, id), http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return grantretry.FailedTerminal
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	disp := dispositionOf(ctx, resp, err)
	if resp != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
	}
	return disp
}

// dispositionOf reads how a call ended: from grantretry's Outcome when the
// policy is grantretry, and otherwise by the same rules from what the
// hand-rolled loop returned (a response below 400 succeeded, a terminal
// verdict failed, a transient one is dead_letter: out of retries).
func dispositionOf(ctx context.Context, resp *http.Response, err error) grantretry.Disposition {
	if out, ok := grantretry.OutcomeOf(resp); ok {
		return out.Disposition
	}
	var e *grantretry.Error
	if errors.As(err, &e) {
		return e.Disposition
	}
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
