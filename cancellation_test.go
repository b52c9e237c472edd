package grantretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Tests of cancellation and cut-short calls: whose cancellation it was, what
// it charges, and what a returned body outlives.

// stallingFunder is a loopback funder whose /slow path never answers: it
// announces each request on arrived, if anyone listens, and holds it until
// the client gives up.
// Every other path answers 200 at once.
func stallingFunder(t *testing.T) (srv *httptest.Server, arrived chan struct{}, slow *atomic.Int64) {
	t.Helper()
	arrived = make(chan struct{}, 64)
	slow = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			io.WriteString(w, "ok")
			return
		}
		slow.Add(1)
		select {
		case arrived <- struct{}{}:
		default: // nobody is listening
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, arrived, slow
}

// http.Client enforces Timeout on a RoundTripper it does not know by a
// context deadline and by closing Request.Cancel at the same instant. When
// the channel wins, the inner transport fails with "request canceled"
// before the context says why: that is still the caller's cancellation,
// never a funder failure that feeds the breaker, the throttle or the
// dead letters.
func TestClientTimeoutIsTheCallersCancellation(t *testing.T) {
	srv, _, slow := stallingFunder(t)
	for run := 0; run < 20; run++ {
		core, logs := observer.New(zapcore.DebugLevel)
		letters := &memLetters{}
		tr := New(nil, WithBreaker(1, time.Hour), WithDeadLetter(letters), WithLogger(zap.New(core)))
		client := &http.Client{Transport: tr, Timeout: 15 * time.Millisecond}
		before := slow.Load()
		unsent := 0
		for i := 0; i < 10; i++ {
			resp, err := client.Get(srv.URL + "/slow")
			if err != nil && strings.Contains(err.Error(), "while waiting for connection") {
				// The timeout came before net/http had a connection
				// (a loaded machine): nothing was sent.
				unsent++
			}
			if err == nil {
				resp.Body.Close()
				t.Fatalf("run %d call %d: no error, want the client's timeout", run, i)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run %d call %d: %v does not match context.DeadlineExceeded", run, i, err)
			}
			if errors.Is(err, ErrCircuitOpen) || errors.Is(err, ErrDeadLetter) {
				t.Fatalf("run %d call %d: %v, want a cancellation", run, i, err)
			}
		}
		tr.CloseIdleConnections()
		for i, l := range logs.FilterMessage(MsgDisposition).AllUntimed() {
			f := l.ContextMap()
			if d := f[FieldDisposition].(string); d != string(Canceled) {
				t.Errorf("run %d call %d: disposition %s, want canceled", run, i, d)
			}
			if n := f[FieldAttempts].(int64); n > 1 {
				t.Errorf("run %d call %d: %d attempts, want at most 1: the caller's timeout is not retried", run, i, n)
			}
		}
		if n := len(letters.all()); n != 0 {
			t.Errorf("run %d: %d dead letters kept, want none", run, n)
		}
		// The funder sees at most one request per call sent. A request
		// net/http wrote just before the timeout may reach its handler
		// after the call returned (the server reads it from the closed
		// connection's buffer), so the count is awaited; one cut before it
		// was written never arrives (the error says "awaiting headers"
		// either way), and is only logged.
		want := int64(10 - unsent)
		for deadline := time.Now().Add(2 * time.Second); slow.Load()-before < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		switch got := slow.Load() - before; {
		case got > want:
			t.Errorf("run %d: the funder saw %d requests, want at most %d (one per call sent; %d timed out waiting for a connection)", run, got, want, unsent)
		case got < want:
			t.Logf("run %d: %d of %d calls' requests never reached the funder (cut before they were written)", run, want-got, want)
		}
		if t.Failed() {
			return
		}
	}
}

// A closed Request.Cancel ends the call as cancelled after the attempt it
// cut short, and the host stays open for the next call .
func TestRequestCancelIsTheCallersCancellation(t *testing.T) {
	srv, arrived, _ := stallingFunder(t)
	for run := 0; run < 20; run++ {
		core, logs := observer.New(zapcore.DebugLevel)
		tr := New(nil, WithClock(newFakeClock()), WithLogger(zap.New(core)))
		cancel := make(chan struct{})
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/slow", nil)
		//lint:ignore SA1019 the deprecated channel http.Client still closes
		req.Cancel = cancel
		go func() {
			<-arrived
			close(cancel)
		}()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("run %d: no error, want a cancellation", run)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("run %d: %v is not an *Error", run, err)
		}
		if e.Disposition != Canceled || e.StopReason != StopCanceled || e.Attempts != 1 {
			t.Errorf("run %d: %s (%s) after %d attempts, want canceled after 1", run, e.Disposition, e.StopReason, e.Attempts)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run %d: %v does not match context.Canceled", run, err)
		}
		if got := len(logs.FilterMessage(MsgAttempt).AllUntimed()); got != 1 {
			t.Errorf("run %d: %d attempt lines, want 1", run, got)
		}
		for i := 0; i < int(DefaultBreakerThreshold)+1; i++ {
			next, _ := http.NewRequest(http.MethodGet, srv.URL+"/ok", nil)
			resp, err = tr.RoundTrip(next)
			if err != nil {
				t.Fatalf("run %d: next call to the healthy host: %v", run, err)
			}
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
		if t.Failed() {
			return
		}
	}
}

// Cancellation by Request.Cancel during a wait ends the wait at once, as
// the context would.
func TestRequestCancelEndsAWait(t *testing.T) {
	clock := newFakeClock()
	clock.block = true
	clock.started = make(chan time.Duration, 1)
	h := newHarness(t, WithClock(clock))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
	cancel := make(chan struct{})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	//lint:ignore SA1019 the deprecated channel http.Client still closes
	req.Cancel = cancel
	go func() {
		<-clock.started
		close(cancel)
	}()
	_, err := h.tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) || e.Disposition != Canceled || e.Attempts != 1 {
		t.Fatalf("RoundTrip = %v, want canceled after 1 attempt, during the wait", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v does not match context.Canceled", err)
	}
}

// slowCore is a zap core whose writes of one message take a while, as a
// disk under load or the trail's lock during a rotation would; after the
// first such write it closes wrote.
type slowCore struct {
	zapcore.Core
	msg   string
	delay time.Duration
	once  sync.Once
	wrote chan struct{}
}

func (c *slowCore) Enabled(zapcore.Level) bool { return true }

func (c *slowCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c *slowCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	if e.Message == c.msg {
		time.Sleep(c.delay)
		c.once.Do(func() { close(c.wrote) })
	}
	return nil
}

// Once a response is judged to be returned, no timer of the Transport can
// end its body: not the attempt timeout and not the call's deadline, even
// when both expire while the attempt line is being written.
func TestReturnedBodyOutlivesTimersThatExpireWhileLogging(t *testing.T) {
	const limit = 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"attempt timeout", WithAttemptTimeout(limit)},
		{"call deadline", WithBudget(2, limit)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core := &slowCore{Core: zapcore.NewNopCore(), msg: MsgAttempt, delay: 3 * limit, wrote: make(chan struct{})}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				<-core.wrote // the body follows once the timers are long past
				io.WriteString(w, "receipt GRANT-42")
			}))
			defer srv.Close()
			tr := New(nil, tc.opt, WithLogger(zap.New(core)))
			defer tr.CloseIdleConnections()
			resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, srv.URL, nil).WithContext(context.Background()))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != "receipt GRANT-42" {
				t.Fatalf("body %q, %v; want the whole receipt", body, err)
			}
			if o, _ := OutcomeOf(resp); o.Disposition != Succeeded {
				t.Errorf("disposition %s, want succeeded", o.Disposition)
			}
		})
	}
}

// lateResponder answers only once the attempt's context has ended, and then
// with a 200 whose body that context governs: a response that arrives as a
// timer fires. Later calls are answered at once.
type lateResponder struct{ n atomic.Int64 }

func (l *lateResponder) RoundTrip(r *http.Request) (*http.Response, error) {
	if l.n.Add(1) == 1 {
		<-r.Context().Done()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{}, Request: r,
		Body: io.NopCloser(strings.NewReader("ok")),
	}, nil
}

// A timer that fired before the response could be held is what it is: the
// attempt timed out (and is retried), or the call's deadline ended it.
func TestTimerThatFiredBeforeTheResponseWasHeld(t *testing.T) {
	t.Run("attempt timeout", func(t *testing.T) {
		inner := &lateResponder{}
		tr := New(inner, WithAttemptTimeout(time.Millisecond), WithClock(newFakeClock()))
		resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, funderURL, nil).WithContext(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o, _ := OutcomeOf(resp)
		if o.Disposition != Succeeded || o.Attempts != 2 {
			t.Errorf("%s after %d attempts, want succeeded after 2 (the first timed out)", o.Disposition, o.Attempts)
		}
	})
	t.Run("call deadline", func(t *testing.T) {
		inner := &lateResponder{}
		letters := &memLetters{}
		tr := New(inner, WithBudget(3, time.Millisecond), WithDeadLetter(letters))
		_, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, funderURL, nil).WithContext(context.Background()))
		var e *Error
		if !errors.As(err, &e) || e.Disposition != DeadLetter || e.StopReason != StopDeadline || e.Attempts != 1 {
			t.Fatalf("RoundTrip = %v, want dead_letter (deadline) after 1 attempt", err)
		}
		if !e.Timeout() {
			t.Errorf("(*Error).Timeout() = false for a call its deadline ended")
		}
		letters.only(t)
	})
}

// panicOnceCore panics the first time it is asked to write a breaker line
// that moves to the given state.
type panicOnceCore struct {
	zapcore.Core
	to     string
	panics atomic.Int64
}

func (c *panicOnceCore) Enabled(zapcore.Level) bool { return true }

func (c *panicOnceCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, c)
}

func (c *panicOnceCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	if e.Message != MsgBreaker {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	if enc.Fields[FieldBreakerTo] == c.to && c.panics.Add(1) == 1 {
		panic("audit sink exploded")
	}
	return nil
}

// A panic anywhere between the breaker's allow and its done (the caller's
// GetBody, the logger writing the half-open line) gives the probe slot back:
// a half-open breaker has no expiry, and a lost slot would refuse the host
// for good.
func TestPanicAfterAllowGivesTheProbeSlotBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		core  zapcore.Core
		build func() *http.Request
	}{
		{
			name: "caller's GetBody",
			core: zapcore.NewNopCore(),
			build: func() *http.Request {
				req, _ := http.NewRequest(http.MethodPut, funderURL, strings.NewReader("x"))
				req.GetBody = func() (io.ReadCloser, error) { panic("GetBody exploded") }
				return req
			},
		},
		{
			name: "logger on the half-open line",
			core: &panicOnceCore{Core: zapcore.NewNopCore(), to: "half_open"},
			build: func() *http.Request {
				req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
				return req
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := httpmock.NewMockTransport()
			mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 200))
			mock.RegisterResponder(http.MethodPut, funderURL, seq(200))
			tr := New(mock, WithBreaker(1, time.Nanosecond), WithBudget(0, time.Minute),
				WithClock(newFakeClock()), WithLogger(zap.New(tc.core)))
			get := func() (*http.Response, error) {
				req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
				return tr.RoundTrip(req)
			}
			resp, err := get() // the 503 opens the breaker
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()

			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("no panic reached the caller")
					}
				}()
				tr.RoundTrip(tc.build())
			}()

			resp, err = get()
			if err != nil {
				t.Fatalf("the call after the panic: %v, want it sent as the probe", err)
			}
			resp.Body.Close()
			if o, _ := OutcomeOf(resp); o.Disposition != Succeeded {
				t.Errorf("the call after the panic: %s, want succeeded", o.Disposition)
			}
		})
	}
}

// What goes on the wire is what the caller built: a buffered body of
// unknown length goes out chunked with its trailers, on every attempt.
func TestBufferedBodyKeepsFramingAndTrailers(t *testing.T) {
	type seen struct {
		te      []string
		length  int64
		body    string
		trailer string
	}
	var (
		mu    sync.Mutex
		calls []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, seen{r.TransferEncoding, r.ContentLength, string(b), r.Trailer.Get("X-Content-Sha256")})
		n := len(calls)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	tr := New(nil, WithClock(newFakeClock()))
	defer tr.CloseIdleConnections()

	const payload = `{"application":"GRANT-42"}`
	req, _ := http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(strings.NewReader(payload)))
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Content-Sha256": {"abc123"}}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(calls) != 2 {
		t.Fatalf("%d attempts reached the funder, want 2", len(calls))
	}
	for i, c := range calls {
		want := seen{[]string{"chunked"}, -1, payload, "abc123"}
		if strings.Join(c.te, ",") != "chunked" || c.length != want.length || c.body != want.body || c.trailer != want.trailer {
			t.Errorf("attempt %d: %+v, want %+v", i+1, c, want)
		}
	}
	if req.ContentLength != -1 {
		t.Errorf("the caller's ContentLength became %d", req.ContentLength)
	}
}

// One submission id used for two operations with equal bodies gives both
// the same key (the reference guide's derivation); the audit lines tell
// them apart by method and path.
func TestOneSubmissionIDForTwoOperationsSharesTheKey(t *testing.T) {
	h := newHarness(t)
	const base = "https://funder.test/v1/applications/GRANT-42"
	h.mock.RegisterResponder(http.MethodPost, base+"/attach", seq(200))
	h.mock.RegisterResponder(http.MethodPost, base+"/submit", seq(200))
	ctx := WithSubmissionID(context.Background(), "GRANT-42")
	for _, op := range []string{"/attach", "/submit"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+op, strings.NewReader(`{}`))
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	lines := h.dispositionLines()
	if len(lines) != 2 {
		t.Fatalf("%d disposition lines, want 2", len(lines))
	}
	a, b := lines[0].ContextMap(), lines[1].ContextMap()
	if a[FieldIdempotencyKey] != b[FieldIdempotencyKey] {
		t.Errorf("keys differ: %v and %v; the guide's derivation gives one key", a[FieldIdempotencyKey], b[FieldIdempotencyKey])
	}
	if a[FieldMethod] != "POST" || a[FieldPath] != "/v1/applications/GRANT-42/attach" || b[FieldPath] != "/v1/applications/GRANT-42/submit" {
		t.Errorf("lines show %v %v and %v %v, want the method and each operation's path beside the key",
			a[FieldMethod], a[FieldPath], b[FieldMethod], b[FieldPath])
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
