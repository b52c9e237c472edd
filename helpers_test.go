package grantretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
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

const funderURL = "https://funder.test/v1/applications"

// fakeClock advances instantly when slept on, and records every wait, so a
// whole retry schedule runs in microseconds. With block set, Sleep instead
// waits for its context, announcing each wait on started. With frozen set,
// Sleep returns at once and time stands still, for many concurrent calls
// whose waits must not add up on one shared clock.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	sleeps  []time.Duration
	block   bool
	frozen  bool
	started chan time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	block, started := f.block, f.started
	if !block && !f.frozen {
		f.now = f.now.Add(d)
	}
	f.mu.Unlock()
	if block {
		if started != nil {
			started <- d
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return ctx.Err()
}

// advance moves the clock on by d, as time passing between calls.
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// freeze makes Sleep return at once without moving the clock, so only
// advance does.
func (f *fakeClock) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

func (f *fakeClock) waits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// maxSource is a rand.Source that always draws its largest value, so every
// full-jitter wait lands on its ceiling: deterministic worst-case schedules.
type maxSource struct{}

func (maxSource) Uint64() uint64 { return ^uint64(0) }

// harness is a Transport over an httpmock transport, a fake clock and an
// observed audit log.
type harness struct {
	tr    *Transport
	mock  *httpmock.MockTransport
	clock *fakeClock
	logs  *observer.ObservedLogs
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	h := &harness{mock: httpmock.NewMockTransport(), clock: newFakeClock()}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	all := append([]Option{WithClock(h.clock), WithLogger(zap.New(core))}, opts...)
	h.tr = New(h.mock, all...)
	return h
}

func (h *harness) client() *http.Client { return &http.Client{Transport: h.tr} }

// attemptLines returns the observed attempt lines.
func (h *harness) attemptLines() []observer.LoggedEntry {
	return h.logs.FilterMessage(MsgAttempt).AllUntimed()
}

func (h *harness) dispositionLines() []observer.LoggedEntry {
	return h.logs.FilterMessage(MsgDisposition).AllUntimed()
}

// seq answers with the given statuses in turn, repeating the last one. Each
// body names its status and the call's number.
func seq(statuses ...int) httpmock.Responder {
	return seqWithHeader(nil, statuses...)
}

// seqWithHeader is seq, with header set on the first response only.
func seqWithHeader(header http.Header, statuses ...int) httpmock.Responder {
	var n atomic.Int64
	return func(*http.Request) (*http.Response, error) {
		call := int(n.Add(1))
		s := statuses[min(call, len(statuses))-1]
		resp := httpmock.NewStringResponse(s, "body of "+strconv.Itoa(s)+" #"+strconv.Itoa(call))
		if call == 1 {
			for k, vs := range header {
				resp.Header[k] = vs
			}
		}
		return resp, nil
	}
}

// seen is one attempt as the funder saw it.
type seen struct {
	key, corr string
	body      []byte
}

// recorder wraps a responder and keeps what every attempt carried.
type recorder struct {
	mu    sync.Mutex
	calls []seen
}

func (rec *recorder) wrap(next httpmock.Responder) httpmock.Responder {
	return func(r *http.Request) (*http.Response, error) {
		var b []byte
		if r.Body != nil {
			b, _ = io.ReadAll(r.Body)
			r.Body.Close()
		}
		rec.mu.Lock()
		rec.calls = append(rec.calls, seen{
			key:  r.Header.Get(HeaderIdempotencyKey),
			corr: r.Header.Get(HeaderCorrelationID),
			body: b,
		})
		rec.mu.Unlock()
		return next(r)
	}
}

func (rec *recorder) all() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.calls...)
}

// trackedBody is a request body that records whether it was closed, and can
// fail after some bytes.
type trackedBody struct {
	r       io.Reader
	closed  atomic.Bool
	failAt  int // fail once this many bytes were read; 0 never
	read    int
	failErr error
}

func newTrackedBody(s string) *trackedBody { return &trackedBody{r: strings.NewReader(s)} }

func (b *trackedBody) Read(p []byte) (int, error) {
	if b.failAt > 0 && b.read >= b.failAt {
		return 0, b.failErr
	}
	if b.failAt > 0 && len(p) > b.failAt-b.read {
		p = p[:b.failAt-b.read]
	}
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// respBody is a response body that records how much was read and whether it
// was closed.
type respBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Bool
}

func (b *respBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *respBody) Close() error { b.closed.Store(true); return nil }

// newPost builds a POST whose body is tracked; withGetBody adds GetBody, as
// http.NewRequest does for in-memory bodies.
func newPost(t *testing.T, ctx context.Context, payload string, withGetBody bool) (*http.Request, *trackedBody) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, funderURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := newTrackedBody(payload)
	req.Body = body
	req.ContentLength = int64(len(payload))
	if withGetBody {
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(payload)), nil
		}
	}
	return req, body
}

func mustOutcome(t *testing.T, resp *http.Response) Outcome {
	t.Helper()
	o, ok := OutcomeOf(resp)
	if !ok {
		t.Fatal("OutcomeOf: no outcome on the response")
	}
	return o
}

func mustError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *grantretry.Error", err, err)
	}
	return e
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// rtFunc is an inner transport in a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func postReq(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`<submit/>`))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
