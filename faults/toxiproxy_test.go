package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/grantretry/grantretry"
	"github.com/rs/zerolog"
)

// The fault suite over real TCP: an in-process Toxiproxy on loopback in
// front of a loopback funder that deduplicates by Idempotency-Key. Each
// test injects one fault and checks the disposition the policy promises,
// that the call ends by its deadline (within hangMargin on every call, and
// within deadlineSlack of it where the deadline is what ends the call), and
// that the funder applied every submission at most once, and exactly once
// when the call succeeded.
//
// Toxiproxy's pipelines are chains of goroutines joined by unbuffered
// channels. When the side it writes to is gone and more chunks are still
// coming, a stage can block on a send for good: a downstream bandwidth
// toxic whose client gave up leaves BandwidthToxic.Pipe blocked in a chan
// send after the test (toxiproxy v2.12.0), which goleak reports.
// The faults below are shaped so each connection carries one request and
// one response chunk, which keeps every stage able to finish: keep-alives
// are off, requests and responses are small, and the trickle is upstream.

// toxiBackoffCap is the backoff cap of toxiOpts: a call whose next wait
// would end past its deadline stops before the deadline by at most this.
const toxiBackoffCap = 10 * time.Millisecond

// toxiFunder is a loopback funder that applies a submission once per
// Idempotency-Key and records every key it was sent per application. It
// applies only a request whose body arrived whole.
type toxiFunder struct {
	srv      *httptest.Server
	respBody string
	padding  string // sent as a response header, to make the head long
	mu       sync.Mutex
	applied  map[string]map[string]bool // application -> keys applied
	keysSeen map[string][]string        // application -> key of every request
	inFlight atomic.Int64
}

func newToxiFunder(t *testing.T, respBody string) *toxiFunder {
	t.Helper()
	f := &toxiFunder{respBody: respBody, applied: map[string]map[string]bool{}, keysSeen: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		key := r.Header.Get(grantretry.HeaderIdempotencyKey)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // a torn request is not applied
		}
		app := string(body)
		f.mu.Lock()
		f.keysSeen[app] = append(f.keysSeen[app], key)
		if f.applied[app] == nil {
			f.applied[app] = map[string]bool{}
		}
		if key == "" {
			key = fmt.Sprint("unkeyed-", len(f.applied[app]))
		}
		f.applied[app][key] = true
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		if f.padding != "" {
			w.Header().Set("X-Padding", f.padding)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, f.respBody)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *toxiFunder) effects(app string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied[app])
}

func (f *toxiFunder) keys(app string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keysSeen[app]...)
}

// toxiEnv is a funder behind an in-process Toxiproxy, with a client
// transport that opens one connection per attempt.
type toxiEnv struct {
	funder *toxiFunder
	proxy  *toxiproxy.Proxy
	inner  *http.Transport
	url    string
}

func newToxiEnv(t *testing.T, respBody string) *toxiEnv {
	t.Helper()
	// Toxiproxy's toxics log through zerolog's global logger; keep them
	// quiet (an atomic store, safe while other proxies run).
	zerolog.SetGlobalLevel(zerolog.Disabled)
	f := newToxiFunder(t, respBody)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	upstream := strings.TrimPrefix(f.srv.URL, "http://")
	p := toxiproxy.NewProxy(server, "funder", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	inner := &http.Transport{DisableKeepAlives: true}
	e := &toxiEnv{funder: f, proxy: p, inner: inner, url: "http://" + p.Listen + "/apply"}
	// Cleanups run last-in first-out: the proxy stops (closing its
	// connections) before the funder closes.
	t.Cleanup(func() {
		inner.CloseIdleConnections()
		p.Toxics.ResetToxics(context.Background())
		p.Stop()
	})
	return e
}

// toxic adds a toxic, given as Toxiproxy's JSON, to every connection.
func (e *toxiEnv) toxic(t *testing.T, js string) {
	t.Helper()
	if _, err := e.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("toxic %s: %v", js, err)
	}
}

// submit makes one POST with a submission id through tr, and returns its
// outcome, the response body it read (or the read error), and how long
// RoundTrip took.
func submit(t *testing.T, tr http.RoundTripper, url, id, app string) (o grantretry.Outcome, body string, took time.Duration, readErr error) {
	t.Helper()
	ctx := grantretry.WithSubmissionID(context.Background(), id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(app))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	took = time.Since(start)
	if err != nil {
		return mustError(t, err).Outcome, "", took, nil
	}
	defer resp.Body.Close()
	b, readErr := io.ReadAll(resp.Body)
	return mustOutcome(t, resp), string(b), took, readErr
}

// checkEffects asserts the funder's side of the promise for one call.
func (e *toxiEnv) checkEffects(t *testing.T, app string, o grantretry.Outcome) {
	t.Helper()
	n := e.funder.effects(app)
	if n > 1 || (o.Disposition == grantretry.Succeeded && n != 1) {
		t.Errorf("call ended %+v and took effect %d times", o, n)
	}
}

func toxiOpts(maxRetries int, deadline, attemptTimeout time.Duration) []grantretry.Option {
	return []grantretry.Option{
		grantretry.WithBackoff(time.Millisecond, toxiBackoffCap),
		grantretry.WithBudget(maxRetries, deadline),
		grantretry.WithAttemptTimeout(attemptTimeout),
		grantretry.WithoutBreaker(),
		grantretry.WithRetryThrottle(1000, 1),
	}
}

// Nothing listens: every attempt is refused, retried within budget, and
// the call is dead-lettered with nothing applied.
func TestToxiConnectionRefused(t *testing.T) {
	e := newToxiEnv(t, "ok")
	e.proxy.Stop()
	const deadline = time.Second
	tr := grantretry.New(e.inner, toxiOpts(3, deadline, 100*time.Millisecond)...)
	app := `{"application":"refused"}`
	o, _, took, _ := submit(t, tr, e.url, "TOXI-REFUSED", app)
	if o.Disposition != grantretry.DeadLetter || o.Attempts != 4 || o.Reason != "transport:refused" {
		t.Errorf("outcome %+v, want dead_letter after 4 refused attempts", o)
	}
	checkTook(t, took, deadline)
	if n := e.funder.effects(app); n != 0 {
		t.Errorf("funder applied a refused submission %d times", n)
	}
}

// The connection is reset as soon as the request arrives, before the
// funder reads it: transient, retried, and dead-lettered with nothing
// applied.
func TestToxiResetBeforeRequestIsRead(t *testing.T) {
	e := newToxiEnv(t, "ok")
	e.toxic(t, `{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
	const deadline = time.Second
	tr := grantretry.New(e.inner, toxiOpts(3, deadline, 200*time.Millisecond)...)
	app := `{"application":"reset-before"}`
	o, _, took, _ := submit(t, tr, e.url, "TOXI-RESET-BEFORE", app)
	if o.Disposition != grantretry.DeadLetter || o.Attempts != 4 || !strings.HasPrefix(o.Reason, "transport:") {
		t.Errorf("outcome %+v, want dead_letter after 4 transport failures", o)
	}
	checkTook(t, took, deadline)
	e.checkEffects(t, app, o)
	if n := e.funder.effects(app); n != 0 {
		t.Errorf("funder applied a request it never read %d times", n)
	}
}

// The duplicate-submission case: the funder applies the first attempt and
// its answer is cut off before any byte reaches the caller. The retry
// carries the same key, the funder recognises it, and the call succeeds
// with one effect.
func TestToxiResetAfterApplyIsNotAppliedTwice(t *testing.T) {
	e := newToxiEnv(t, "ok")
	e.toxic(t, `{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":0}}`)
	var attempts atomic.Int64
	var firstErr atomic.Value
	// Between the first and second attempts the answer path heals.
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := e.inner.RoundTrip(r)
		if attempts.Add(1) == 1 {
			if err != nil {
				firstErr.Store(err.Error())
			}
			if rerr := e.proxy.Toxics.RemoveToxic(context.Background(), "cut"); rerr != nil {
				t.Errorf("remove toxic: %v", rerr)
			}
		}
		return resp, err
	})
	const deadline = 2 * time.Second
	tr := grantretry.New(inner, toxiOpts(3, deadline, 500*time.Millisecond)...)
	app := `{"application":"reset-after"}`
	o, body, took, readErr := submit(t, tr, e.url, "TOXI-RESET-AFTER", app)
	if o.Disposition != grantretry.Succeeded || o.Attempts != 2 || body != "ok" || readErr != nil {
		t.Errorf("outcome %+v body %q (%v), want succeeded on the second attempt; first attempt: %v",
			o, body, readErr, firstErr.Load())
	}
	checkTook(t, took, deadline)
	e.checkEffects(t, app, o)
	keys := e.funder.keys(app)
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("funder saw keys %q, want the same key on both attempts", keys)
	}
}

// Every answer comes later than the attempt timeout: each attempt times
// out, and the call is dead-lettered at its deadline (or up to one backoff
// cap before it, when the next wait would not fit). The funder got the
// submission on every attempt under one key and applied it at most once.
func TestToxiLatencyBeyondAttemptTimeout(t *testing.T) {
	e := newToxiEnv(t, "ok")
	e.toxic(t, `{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":400}}`)
	const deadline = 700 * time.Millisecond
	checkEndsOnTime(t, deadline, toxiBackoffCap, func(i int) time.Duration {
		tr := grantretry.New(e.inner, toxiOpts(10, deadline, 80*time.Millisecond)...)
		app := fmt.Sprintf(`{"application":"latency-%d"}`, i)
		o, _, took, _ := submit(t, tr, e.url, fmt.Sprint("TOXI-LATENCY-", i), app)
		if o.Disposition != grantretry.DeadLetter || o.Attempts < 2 || o.Reason != "transport:timeout" || o.StopReason != grantretry.StopDeadline {
			t.Errorf("outcome %+v, want dead_letter by its deadline after several timed-out attempts", o)
		}
		checkTook(t, took, deadline)
		e.checkEffects(t, app, o)
		keys := e.funder.keys(app)
		for _, k := range keys {
			if k == "" || k != keys[0] {
				t.Errorf("funder saw keys %q, want one key on every attempt", keys)
				break
			}
		}
		return took
	})
}

// The response head arrives and the body is cut off mid-stream. The call
// obtained a 201, so it ended succeeded (the funder did apply it, once);
// the cut surfaces to the caller as an error reading the body.
func TestToxiBodyCutMidStream(t *testing.T) {
	e := newToxiEnv(t, strings.Repeat("r", 2000))
	e.toxic(t, `{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":600}}`)
	const deadline = time.Second
	tr := grantretry.New(e.inner, toxiOpts(3, deadline, 200*time.Millisecond)...)
	app := `{"application":"cut-body"}`
	o, body, took, readErr := submit(t, tr, e.url, "TOXI-CUT", app)
	if o.Disposition != grantretry.Succeeded || o.Attempts != 1 {
		t.Errorf("outcome %+v, want succeeded after 1 attempt", o)
	}
	if !errors.Is(readErr, io.ErrUnexpectedEOF) || len(body) >= 2000 {
		t.Errorf("read %d bytes, error %v; want a short body and io.ErrUnexpectedEOF", len(body), readErr)
	}
	checkTook(t, took, deadline)
	e.checkEffects(t, app, o)
}

// Bytes trickle at 1 KB/s from the caller to the funder, so no attempt
// delivers its submission within the attempt timeout: each attempt times
// out and the call is dead-lettered once its retries are spent, before its
// deadline. The trickle of an abandoned attempt still reaches the funder
// later (Toxiproxy delivers what it already read); it is applied at most
// once, under the call's key.
func TestToxiSlowTrickle(t *testing.T) {
	e := newToxiEnv(t, "ok")
	e.toxic(t, `{"name":"trickle","type":"bandwidth","stream":"upstream","attributes":{"rate":1}}`)
	const deadline = 600 * time.Millisecond
	tr := grantretry.New(e.inner, toxiOpts(2, deadline, 150*time.Millisecond)...)
	app := `{"application":"trickle","pad":"` + strings.Repeat("p", 300) + `"}`
	o, _, took, _ := submit(t, tr, e.url, "TOXI-TRICKLE", app)
	if o.Disposition != grantretry.DeadLetter || o.Attempts < 2 || o.Reason != "transport:timeout" {
		t.Errorf("outcome %+v, want dead_letter after timed-out attempts", o)
	}
	checkTook(t, took, deadline)
	t.Logf("outcome %+v in %v", o, took)
	// Let the abandoned trickles land (about 0.7 s each at 1 KB/s), so the
	// effect count is final and no proxy goroutine outlives the test.
	e.proxy.Toxics.ResetToxics(context.Background())
	waitUntil := time.Now().Add(5 * time.Second)
	for time.Now().Before(waitUntil) && (len(e.funder.keys(app)) < o.Attempts || e.funder.inFlight.Load() > 0) {
		time.Sleep(10 * time.Millisecond)
	}
	e.checkEffects(t, app, o)
	keys := e.funder.keys(app)
	for _, k := range keys {
		if k == "" || k != keys[0] {
			t.Errorf("funder saw keys %q, want one key on every attempt", keys)
			break
		}
	}
}

// The funder's side accepts the connection and never answers (nothing gets
// through). With no attempt timeout, the call's deadline ends the hung
// attempt: dead_letter at the deadline, not before it, nothing applied.
func TestToxiAcceptsAndNeverAnswers(t *testing.T) {
	e := newToxiEnv(t, "ok")
	e.toxic(t, `{"name":"blackhole","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
	const deadline = 400 * time.Millisecond
	// Only the deadline's timer ends the call, and it starts after
	// RoundTrip does: no run may end before the deadline at all.
	checkEndsOnTime(t, deadline, 0, func(i int) time.Duration {
		tr := grantretry.New(e.inner, toxiOpts(3, deadline, 0)...)
		app := fmt.Sprintf(`{"application":"silent-%d"}`, i)
		o, _, took, _ := submit(t, tr, e.url, fmt.Sprint("TOXI-SILENT-", i), app)
		if o.Disposition != grantretry.DeadLetter || o.Attempts != 1 || o.StopReason != grantretry.StopDeadline {
			t.Errorf("outcome %+v, want dead_letter by its deadline after the one hung attempt", o)
		}
		checkTook(t, took, deadline)
		if n := e.funder.effects(app); n != 0 {
			t.Errorf("funder applied a request it never got %d times", n)
		}
		return took
	})
}

// Limited bandwidth both ways that still fits the budget: one attempt,
// succeeded, the body whole, one effect.
func TestToxiBandwidthLimitStillSucceeds(t *testing.T) {
	want := strings.Repeat("b", 3000)
	e := newToxiEnv(t, want)
	e.toxic(t, `{"name":"down","type":"bandwidth","stream":"downstream","attributes":{"rate":100}}`)
	e.toxic(t, `{"name":"up","type":"bandwidth","stream":"upstream","attributes":{"rate":100}}`)
	const deadline = 2 * time.Second
	tr := grantretry.New(e.inner, toxiOpts(3, deadline, time.Second)...)
	app := `{"application":"bandwidth","pad":"` + strings.Repeat("q", 2000) + `"}`
	o, body, took, readErr := submit(t, tr, e.url, "TOXI-BANDWIDTH", app)
	if o.Disposition != grantretry.Succeeded || o.Attempts != 1 || body != want || readErr != nil {
		t.Errorf("outcome %+v, %d bytes (%v), want succeeded after 1 attempt with the whole body", o, len(body), readErr)
	}
	checkTook(t, took, deadline)
	e.checkEffects(t, app, o)
}

// The funder flaps: its proxy goes down and up in cycles while several
// submissions are made. Down cycles refuse new connections and cut the
// ones in flight, including answers to requests already applied. Every
// call ends by its deadline with a disposition, and no submission takes
// effect twice. No attempt hangs here (a down cycle cuts it), so calls end
// on an answer or spent retries, not at their deadline: the coarse bound
// is the one that applies.
func TestToxiFlappingFunder(t *testing.T) {
	e := newToxiEnv(t, "ok")
	const (
		deadline = 2 * time.Second
		calls    = 12
	)
	stop := make(chan struct{})
	var flapper sync.WaitGroup
	flapper.Add(1)
	go func() {
		defer flapper.Done()
		end := time.Now().Add(800 * time.Millisecond)
		for i := 0; i < 40 && time.Now().Before(end); i++ {
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
			if i%2 == 0 {
				e.proxy.Stop()
			} else if err := e.proxy.Start(); err != nil {
				t.Errorf("restart proxy: %v", err)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		flapper.Wait()
		e.proxy.Start() // up again, if the last cycle left it down (an error says it is up)
	}()

	tr := grantretry.New(e.inner, toxiOpts(30, deadline, 200*time.Millisecond)...)
	type result struct {
		o    grantretry.Outcome
		took time.Duration
	}
	results := make([]result, calls)
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 40 * time.Millisecond) // spread across cycles
			o, _, took, _ := submit(t, tr, e.url, fmt.Sprintf("TOXI-FLAP-%02d", i), fmt.Sprintf(`{"application":"flap-%d"}`, i))
			results[i] = result{o, took}
		}()
	}
	wg.Wait()
	dispositions := map[grantretry.Disposition]int{}
	attempts := 0
	for i, r := range results {
		dispositions[r.o.Disposition]++
		attempts += r.o.Attempts
		if r.o.Disposition != grantretry.Succeeded && r.o.Disposition != grantretry.DeadLetter {
			t.Errorf("call %d: outcome %+v, want succeeded or dead_letter", i, r.o)
		}
		checkTook(t, r.took, deadline)
		e.checkEffects(t, fmt.Sprintf(`{"application":"flap-%d"}`, i), r.o)
	}
	if dispositions[grantretry.Succeeded] == 0 {
		t.Errorf("dispositions %v: no call succeeded against a funder up half the time", dispositions)
	}
	t.Logf("%d calls, %d attempts: %v", calls, attempts, dispositions)
}
