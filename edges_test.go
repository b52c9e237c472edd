package grantretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// Errors the reference table misses: a certificate failure whose x509 cause
// is none of the three matched types, a bad host, an aborted connection.
func TestClassifyMoreErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		retryable bool
		reason    string
	}{
		{"cert: unhandled critical extension", &tls.CertificateVerificationError{Err: x509.UnhandledCriticalExtension{}}, false, "transport:tls_cert"},
		{"invalid host", &url.Error{Op: "Get", URL: "u", Err: url.InvalidHostError("fun der")}, false, "transport:malformed_url"},
		{"conn aborted", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNABORTED)}, true, "transport:reset"},
	}
	for _, c := range cases {
		if got := Classify(0, c.err); got.Retryable != c.retryable || got.Reason != c.reason {
			t.Errorf("%s: Classify = %+v, want {%v %s}", c.name, got, c.retryable, c.reason)
		}
	}
}

// Every default terminal status ends the call through the Transport, not
// only through Classify.
func TestDefaultTerminalStatusesEndTheCall(t *testing.T) {
	for _, s := range defaultTerminal {
		h := newHarness(t)
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(s, 200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o := mustOutcome(t, resp)
		if o.Disposition != FailedTerminal || o.StopReason != StopTerminal || o.Attempts != 1 || resp.StatusCode != s {
			t.Errorf("%d: outcome %+v, want failed_terminal after 1 attempt", s, o)
		}
	}
}

// stillClock never moves and never sleeps, and holds no lock, so it adds no
// happens-before edge the race detector could hide a race behind.
type stillClock struct{}

func (stillClock) Now() time.Time                                   { return time.Time{}.Add(time.Hour) }
func (stillClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// WithRandSource promises to serialise the caller's source (run with -race).
func TestRandSourceIsSerialised(t *testing.T) {
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(stillClock{}), WithRandSource(rand.NewPCG(1, 2)),
		WithoutBreaker(), WithoutRetryThrottle(), WithBudget(20, time.Hour))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	close(start)
	wg.Wait()
}

// The default clock really waits, and a cancellation cuts its wait short.
func TestSystemClockWaitsAndHonoursCancel(t *testing.T) {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
	tr := New(mock, WithBackoff(5*time.Millisecond, 5*time.Millisecond), WithRandSource(maxSource{}))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if el := time.Since(start); el < 5*time.Millisecond {
		t.Errorf("call took %v, want at least the 5ms backoff", el)
	}

	mock = httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, funderURL, seqWithHeader(http.Header{"Retry-After": {"30"}}, 503, 200))
	tr = New(mock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if e := mustError(t, err); e.Disposition != Canceled || !errors.Is(err, context.Canceled) {
			t.Errorf("outcome %+v err %v, want canceled", e.Outcome, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancellation did not interrupt a 30s Retry-After wait")
	}
}

// A wait that would end exactly at the deadline is refused ("at or after").
func TestWaitEndingExactlyAtDeadlineIsRefused(t *testing.T) {
	h := newHarness(t, WithBudget(10, 400*time.Millisecond),
		WithBackoff(400*time.Millisecond, 400*time.Millisecond), WithRandSource(maxSource{}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopDeadline || o.Attempts != 1 || len(h.clock.waits()) != 0 {
		t.Errorf("outcome %+v waits %v, want dead_letter (deadline) after 1 attempt, no wait", o, h.clock.waits())
	}
}

// The documented defaults are the ones in force.
func TestDocumentedDefaults(t *testing.T) {
	// DefaultMaxRetries retries, waits on ceilings of DefaultBackoffBase*2^n.
	h := newHarness(t, WithRandSource(maxSource{}))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != DefaultMaxRetries+1 || o.StopReason != StopRetriesSpent {
		t.Errorf("outcome %+v, want %d attempts, retries_exhausted", o, DefaultMaxRetries+1)
	}
	b := DefaultBackoffBase
	if w, want := h.clock.waits(), []time.Duration{b, 2 * b, 4 * b, 8 * b}; !reflect.DeepEqual(w, want) {
		t.Errorf("waits %v, want %v", w, want)
	}

	// The ceiling stops at DefaultBackoffCap.
	h = newHarness(t, WithRandSource(maxSource{}), WithBudget(7, time.Hour), WithoutBreaker(), WithoutRetryThrottle())
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ = http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err = h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if w := h.clock.waits(); len(w) != 7 || w[6] != DefaultBackoffCap {
		t.Errorf("waits %v, want 7 ending at the %v cap", w, DefaultBackoffCap)
	}

	// DefaultDeadline: a Retry-After just inside it is honoured, one
	// reaching it is not.
	for _, c := range []struct {
		after    time.Duration
		attempts int
	}{{DefaultDeadline - time.Second, 2}, {DefaultDeadline, 1}} {
		h := newHarness(t)
		secs := fmt.Sprint(int(c.after / time.Second))
		h.mock.RegisterResponder(http.MethodGet, funderURL, seqWithHeader(http.Header{"Retry-After": {secs}}, 503, 200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if o := mustOutcome(t, resp); o.Attempts != c.attempts {
			t.Errorf("Retry-After %s: %d attempts, want %d", secs, o.Attempts, c.attempts)
		}
	}

	// What cannot be observed quickly: the breaker cooldown and replay limit.
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, io.EOF }))
	if c := tr.cfg; c.threshold != DefaultBreakerThreshold || c.cooldown != DefaultBreakerCooldown ||
		c.replayLimit != DefaultReplayLimit {
		t.Errorf("breaker %d/%v, replay limit %d: not the documented defaults", c.threshold, c.cooldown, c.replayLimit)
	}
}

// An empty Method means GET (net/http) and is retried like one.
func TestEmptyMethodIsRetriedLikeGet(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 204))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	req.Method = ""
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 2 || o.Disposition != Succeeded {
		t.Errorf("outcome %+v, want succeeded after 2 attempts", o)
	}
}

// The request sent carries no GetBody, so net/http cannot send it again on
// its own after writing it (issue 12), and the caller's own ContentLength:
// a buffered body of unknown length stays unknown, so it is framed as the
// caller's request would be (issue 9: chunked, with its trailers). Every
// attempt still carries the whole body.
func TestSentRequestCarriesNoGetBodyAndCallersLength(t *testing.T) {
	for _, withGetBody := range []bool{true, false} {
		var bodies []string
		var lengths []int64
		var getBodies int
		inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			bodies, lengths = append(bodies, string(b)), append(lengths, r.ContentLength)
			if r.GetBody != nil {
				getBodies++
			}
			status := 503
			if len(bodies) == 2 {
				status = 200
			}
			return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
		tr := New(inner, WithClock(newFakeClock()))
		req, _ := newPost(t, context.Background(), "payload", withGetBody)
		wantLength := int64(7)
		if !withGetBody {
			req.ContentLength = 0 // unknown, as for an arbitrary io.Reader
			wantLength = 0
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if getBodies != 0 {
			t.Errorf("GetBody %v: %d attempts carried a GetBody, want none", withGetBody, getBodies)
		}
		for i := range bodies {
			if bodies[i] != "payload" || lengths[i] != wantLength {
				t.Errorf("GetBody %v, attempt %d: body %q, ContentLength %d; want the payload, %d", withGetBody, i+1, bodies[i], lengths[i], wantLength)
			}
		}
		if len(bodies) != 2 {
			t.Errorf("GetBody %v: %d attempts, want 2", withGetBody, len(bodies))
		}
	}
}

// A body too large to buffer is still closed when no attempt is made.
func TestUnsentOversizedBodyIsClosed(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(1, time.Hour), WithReplayLimit(4))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	req, _ := newPost(t, context.Background(), "x", true)
	resp, err := h.tr.RoundTrip(req) // opens the breaker
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, body := newPost(t, context.Background(), "0123456789", false)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("err = %v, want circuit open", err)
	}
	if !body.closed.Load() {
		t.Error("caller's oversized body left open on circuit_open")
	}
}

// Terminal transport errors (a bad certificate) and a local GetBody failure
// say nothing about the funder: they must not open its breaker.
func TestBreakerIgnoresLocalAndTerminalTransportFailures(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(2, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL,
		httpmock.NewErrorResponder(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}))
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		_, err := h.tr.RoundTrip(req)
		if e := mustError(t, err); e.Disposition != FailedTerminal {
			t.Fatalf("call %d: %+v, want failed_terminal, not circuit_open", i+1, e.Outcome)
		}
	}

	mock := httpmock.NewMockTransport() // no logger and PUT: GetBody is first called by the attempt
	mock.RegisterResponder(http.MethodPut, funderURL, seq(200))
	tr := New(mock, WithClock(newFakeClock()), WithBreaker(1, time.Hour))
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPut, funderURL, strings.NewReader("x"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("spool file gone") }
		_, err := tr.RoundTrip(req)
		if e := mustError(t, err); e.StopReason != StopBodyReadFailure {
			t.Fatalf("GetBody call %d: %+v, want body_read_failed", i+1, e.Outcome)
		}
	}
}

// A discarded response body is read (so the connection can be reused), not
// only closed.
func TestDiscardedShortBodyIsReadToTheEnd(t *testing.T) {
	h := newHarness(t, WithBudget(1, time.Minute))
	var bodies []*respBody
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		b := &respBody{r: strings.NewReader("short 503 body")}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: b, Request: r}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b := bodies[0]; b.read.Load() != int64(len("short 503 body")) || !b.closed.Load() {
		t.Errorf("discarded body: read %d bytes, closed %v; want drained and closed", b.read.Load(), b.closed.Load())
	}
}

// The call's deadline ends a wait in progress as dead_letter (deadline), not
// as the caller's cancellation.
func TestCallDeadlineInterruptsWait(t *testing.T) {
	h := newHarness(t, WithBudget(3, 30*time.Millisecond), WithBackoff(time.Millisecond, time.Millisecond))
	h.clock.block = true
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := h.tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		e := mustError(t, err)
		if e.Disposition != DeadLetter || e.StopReason != StopDeadline || e.Attempts != 1 || !errors.Is(err, ErrDeadLetter) {
			t.Errorf("outcome %+v, want dead_letter (deadline) after 1 attempt", e.Outcome)
		}
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Fatal("the call's deadline did not end the wait")
	}
}

// Outcome.Status is the last attempt's: 0 when it got no response.
func TestStatusIsZeroWhenLastAttemptGotNoResponse(t *testing.T) {
	h := newHarness(t, WithBudget(1, time.Minute))
	var n atomic.Int32
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return httpmock.NewStringResponse(503, "busy"), nil
		}
		return nil, io.ErrUnexpectedEOF
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Status != 0 || e.Reason != "transport:eof" || e.Attempts != 2 {
		t.Errorf("outcome %+v, want status 0, transport:eof, 2 attempts", e.Outcome)
	}
	if d := h.dispositionLines(); len(d) != 1 || d[0].ContextMap()[FieldStatus] != int64(0) {
		t.Errorf("disposition lines %+v, want status 0", d)
	}
}

type rwcBody struct{ io.Reader }

func (rwcBody) Write(p []byte) (int, error) { return len(p), nil }
func (rwcBody) Close() error                { return nil }

// A 101's body is the upgraded connection: it must stay an io.ReadWriteCloser.
func TestSwitchingProtocolsBodyStaysWritable(t *testing.T) {
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 101, Header: http.Header{}, Body: rwcBody{strings.NewReader("")}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
		t.Errorf("101 body is %T, want the io.ReadWriteCloser the inner transport returned", resp.Body)
	}
}

func TestInvalidMethodsAreRefused(t *testing.T) {
	for _, m := range []string{"GET /admin", "PO\nST", "BAD(METHOD)"} {
		h := newHarness(t)
		h.mock.RegisterNoResponder(seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		req.Method = m
		resp, err := h.tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, ErrInvalidRequest) || h.mock.GetTotalCallCount() != 0 {
			t.Errorf("method %q: resp %v err %v sent %d, want ErrInvalidRequest and nothing sent",
				m, resp, err, h.mock.GetTotalCallCount())
		}
	}
}

// Outcome.Elapsed on a returned response covers the waits.
func TestOutcomeElapsedOnResponse(t *testing.T) {
	h := newHarness(t, WithRandSource(maxSource{}), WithBackoff(100*time.Millisecond, time.Second))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Elapsed != 100*time.Millisecond {
		t.Errorf("Elapsed %v, want the 100ms waited", o.Elapsed)
	}
}

// A query value is scrubbed even when an error quotes it without the rest of
// the query.
func TestQueryValueQuotedAloneIsRedacted(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute))
	h.mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("funder refused credential %s", r.URL.Query().Get("token"))
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL+"?token=qs-token-abcdef&x=1", nil)
	_, err := h.tr.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	texts := []string{err.Error()}
	for _, l := range h.logs.AllUntimed() {
		for _, v := range l.ContextMap() {
			texts = append(texts, fmt.Sprint(v))
		}
	}
	if all := strings.Join(texts, "\n"); strings.Contains(all, "qs-token-abcdef") {
		t.Errorf("query value leaked:\n%s", all)
	}
}

// The disposition line of a call ended by a transport error names the error.
func TestDispositionLineNamesTheError(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute))
	h.mock.RegisterResponder(http.MethodGet, funderURL, httpmock.NewErrorResponder(io.ErrUnexpectedEOF))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	if _, err := h.tr.RoundTrip(req); err == nil {
		t.Fatal("want an error")
	}
	d := h.dispositionLines()
	if len(d) != 1 || !strings.Contains(fmt.Sprint(d[0].ContextMap()[FieldError]), "unexpected EOF") {
		t.Errorf("disposition lines %+v, want error = unexpected EOF", d)
	}
}

func TestAttemptLatencyIsMeasured(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		time.Sleep(10 * time.Millisecond)
		return httpmock.NewStringResponse(200, "ok"), nil
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if lat, _ := h.attemptLines()[0].ContextMap()[FieldLatency].(time.Duration); lat < 10*time.Millisecond {
		t.Errorf("latency %v, want at least the 10ms the attempt took", lat)
	}
}

func TestOptionEdges(t *testing.T) {
	h := newHarness(t, WithStatusSets([]int{600}, nil))
	h.mock.RegisterNoResponder(seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("WithStatusSets(600): err %v, want ErrInvalidOption", err)
	}
	// Zero is WithAttemptTimeout's documented default; a nil Option is skipped.
	for name, o := range map[string]Option{"WithAttemptTimeout(0)": WithAttemptTimeout(0), "nil Option": nil} {
		h := newHarness(t, o)
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		resp.Body.Close()
	}
}

// Once the response is handed over, neither the attempt timeout nor the
// call's deadline may end its context before the caller closes the body.
func TestResponseContextOutlivesTimers(t *testing.T) {
	for name, o := range map[string]Option{
		"attempt timeout": WithAttemptTimeout(20 * time.Millisecond),
		"call deadline":   WithBudget(0, 20*time.Millisecond),
	} {
		h := newHarness(t, o)
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond) // a slow reader
		if err := resp.Request.Context().Err(); err != nil {
			t.Errorf("%s: response context ended before the body was closed: %v", name, context.Cause(resp.Request.Context()))
		}
		resp.Body.Close()
	}
}

// Cancellations leave the retry throttle as it is (documented).
func TestThrottleIgnoresCancellations(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(2, 0.1))
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		h.mock.RegisterResponder(http.MethodGet, funderURL, func(*http.Request) (*http.Response, error) {
			cancel()
			return nil, context.Canceled
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, funderURL, nil)
		_, err := h.tr.RoundTrip(req)
		if e := mustError(t, err); e.Disposition != Canceled {
			t.Fatalf("call %d: %+v, want canceled", i+1, e.Outcome)
		}
	}
	if got := h.tr.hosts.get(hostKey(mustURL(t, funderURL))).throttle.level(); got != 2 {
		t.Errorf("level %v after cancelled calls, want the full 2", got)
	}
}

// When one failure both opens the breaker and drains the throttle, the
// breaker is reported: "the funder is down" says more than "retries are
// throttled".
func TestThrottleAndBreakerTrippingTogether(t *testing.T) {
	h := newHarness(t, WithBreaker(1, time.Hour), WithRetryThrottle(2, 0.5), WithBudget(10, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 1 || o.StopReason != StopCircuitOpen || o.Disposition != CircuitOpen {
		t.Errorf("outcome %+v, want circuit_open after 1 attempt", o)
	}
}

func TestRetryThrottleOptionEdges(t *testing.T) {
	for _, c := range [][2]float64{{0, 0.1}, {1001, 1}, {10, 0.0005}, {1, 2}} {
		h := newHarness(t, WithRetryThrottle(c[0], c[1]))
		h.mock.RegisterNoResponder(seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("WithRetryThrottle(%v, %v): err %v, want ErrInvalidOption", c[0], c[1], err)
		}
	}
	// tokenRatio is kept to the thousandth: 1.001*1000 is 1000.999... in
	// floating point, and must not be truncated to 1.
	rt := newRetryThrottle(10, 1.001, DefaultThrottleRefill, newFakeClock())
	rt.onFailure()
	rt.onFailure()
	rt.onSuccess()
	if rt.level() != 9.001 {
		t.Errorf("level %v, want 9.001", rt.level())
	}
}

// Options apply in order: a later WithBreaker/WithRetryThrottle turns back
// on what an earlier Without... turned off.
func TestLaterOptionReenablesBreakerAndThrottle(t *testing.T) {
	h := newHarness(t, WithoutBreaker(), WithRetryThrottle(4, 0.5), WithoutRetryThrottle(),
		WithRetryThrottle(4, 0.5), WithBudget(10, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.StopReason != StopThrottled {
		t.Errorf("throttle: outcome %+v, want retry_throttled", o)
	}

	h = newHarness(t, WithoutRetryThrottle(), WithoutBreaker(), WithBreaker(1, time.Hour))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	req, _ = http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err = h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Disposition != CircuitOpen || o.Attempts != 1 {
		t.Errorf("breaker: outcome %+v, want circuit_open after 1 attempt", o)
	}
}
