package grantretry

// Regression tests for defects a review of the telemetry and fleet hooks
// found: spans and fleet probes settled on every path.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// recTP records every span started and how many times each was ended.
type recTP struct {
	embedded.TracerProvider
	mu    sync.Mutex
	spans []*recSpan
}

type recTracer struct {
	embedded.Tracer
	p *recTP
}

type recSpan struct {
	tnoop.Span
	name string
	p    *recTP
	ends int
}

func (p *recTP) Tracer(string, ...trace.TracerOption) trace.Tracer { return &recTracer{p: p} }

func (t *recTracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &recSpan{name: name, p: t.p}
	t.p.mu.Lock()
	t.p.spans = append(t.p.spans, s)
	t.p.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

func (s *recSpan) End(...trace.SpanEndOption) {
	s.p.mu.Lock()
	s.ends++
	s.p.mu.Unlock()
}

func (p *recTP) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.spans {
		t.Logf("span %s ended %d time(s)", s.name, s.ends)
		if s.ends != 1 {
			t.Errorf("span %s ended %d times, want 1", s.name, s.ends)
		}
	}
}

// The inner transport panics: the attempt span is ended by send's cleanup,
// the call span never is.
func TestFleetAndSpansCallSpanEndedWhenInnerTransportPanics(t *testing.T) {
	tp := &recTP{}
	tr := New(rtFunc(func(*http.Request) (*http.Response, error) { panic("inner boom") }),
		WithTracerProvider(tp), WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	func() {
		defer func() { recover() }()
		tr.RoundTrip(req)
	}()
	tp.check(t)
}

// The fleet's State panics in allow(): nothing cleans the call up.
type panicState struct{ *memHost }

func (panicState) State() FleetState { panic("fleet boom") }

type panicFleet struct{ *memFleet }

func (f panicFleet) Host(key string, _ FleetPolicy) FleetHost {
	return panicState{f.memFleet.host(key)}
}

func TestFleetAndSpansCallSpanEndedWhenFleetHostPanics(t *testing.T) {
	tp := &recTP{}
	h := newHarness(t, WithTracerProvider(tp), WithFleet(panicFleet{newMemFleet()}))
	h.mock.RegisterResponder("GET", fleetURL, seq(200))
	req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	func() {
		defer func() { recover() }()
		h.tr.RoundTrip(req)
	}()
	tp.check(t)
}

// A call granted the fleet's probe whose inner transport panics never
// reports it with ProbeDone: the fleet's probe stays taken.
func TestFleetAndSpansProbeDoneWhenProbePanics(t *testing.T) {
	f := newMemFleet()
	mh := f.host(fleetKey)
	mh.state.Store(int32(FleetOpen))
	tr := New(rtFunc(func(*http.Request) (*http.Response, error) { panic("inner boom") }),
		WithFleet(f), WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	func() {
		defer func() { recover() }()
		tr.RoundTrip(req)
	}()
	if got := mh.count("TryProbe"); got != 1 {
		t.Fatalf("TryProbe called %d times", got)
	}
	if got := mh.count("ProbeDone"); got != 1 {
		t.Errorf("probe granted, then the attempt panicked: ProbeDone called %d times, want 1", got)
	}
}

// The caller cancels while the probe is in flight: ProbeDone is never
// called, so the fleet (here in-memory, with no lease) refuses the host
// for good; the PostgreSQL one for a lease interval.
func TestFleetAndSpansProbeDoneWhenProbeCanceled(t *testing.T) {
	f := newMemFleet()
	mh := f.host(fleetKey)
	mh.state.Store(int32(FleetOpen))
	ctx, cancel := context.WithCancel(context.Background())
	tr := New(rtFunc(func(r *http.Request) (*http.Response, error) {
		cancel()
		<-r.Context().Done()
		return nil, r.Context().Err()
	}), WithFleet(f), WithClock(newFakeClock()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fleetURL, nil)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if got := mh.count("TryProbe"); got != 1 {
		t.Fatalf("TryProbe called %d times", got)
	}
	if got := mh.count("ProbeDone"); got != 1 {
		t.Errorf("probe granted, then canceled: ProbeDone called %d times, want 1", got)
	}
	// The next call, with a healthy funder, can never probe.
	tr2 := New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}), WithFleet(f), WithClock(newFakeClock()))
	req2, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	if _, err := tr2.RoundTrip(req2); err != nil {
		t.Errorf("next call after the canceled probe: %v", err)
	}
}

// Only one provider set, and an invalid option: no panic either way.
func TestFleetAndSpansOneProviderAndInvalidOption(t *testing.T) {
	for name, o := range map[string]Option{
		"meter":  WithMeterProvider(noop.NewMeterProvider()),
		"tracer": WithTracerProvider(&recTP{}),
	} {
		t.Run(name, func(t *testing.T) {
			for _, bad := range []Option{nil, WithBudget(-1, 0)} {
				tr := New(rtFunc(func(r *http.Request) (*http.Response, error) {
					return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
				}), o, bad, WithClock(newFakeClock()))
				req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
				resp, err := tr.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
				}
				_ = err
				tr.RoundTrip(nil)
			}
		})
	}
}

// openingClock opens the fleet's breaker while the call waits to retry.
type openingClock struct {
	*fakeClock
	mh *memHost
}

func (c openingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mh.state.Store(int32(FleetOpen))
	return c.fakeClock.Sleep(ctx, d)
}

// The fleet opens during the wait; the retry is granted the fleet's probe,
// then its body cannot be built (GetBody fails): ProbeDone is never called.
func TestFleetAndSpansProbeDoneWhenRetryBodyFails(t *testing.T) {
	f := newMemFleet()
	mh := f.host(fleetKey)
	n := 0
	tr := New(rtFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
	}), WithFleet(f), WithClock(openingClock{newFakeClock(), mh}))
	req, _ := http.NewRequest(http.MethodPut, fleetURL, strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) {
		n++
		if n > 1 {
			return nil, errors.New("gone")
		}
		return io.NopCloser(strings.NewReader("x")), nil
	}
	_, err := tr.RoundTrip(req)
	t.Logf("err = %v", err)
	if got := mh.count("TryProbe"); got != 1 {
		t.Fatalf("TryProbe called %d times", got)
	}
	if got := mh.count("ProbeDone"); got != 1 {
		t.Errorf("probe granted, then the retry's body failed: ProbeDone called %d times, want 1", got)
	}
}

// The fleet opens during the wait; the retry is the fleet's probe and
// fails (503). breakerVerdict is told probe=false, so it calls the retry's
// failure excluded, and fleetVerdict then skips ProbeDone.
func TestFleetAndSpansFailedProbeOnARetryIsReported(t *testing.T) {
	f := newMemFleet()
	mh := f.host(fleetKey)
	tr := New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Body: http.NoBody, Request: r}, nil
	}), WithFleet(f), WithClock(openingClock{newFakeClock(), mh}))
	req, _ := http.NewRequest(http.MethodGet, fleetURL, nil)
	_, err := tr.RoundTrip(req)
	t.Logf("err = %v", err)
	if got := mh.count("TryProbe"); got != 1 {
		t.Fatalf("TryProbe called %d times", got)
	}
	if got := mh.count("ProbeDone"); got != 1 {
		t.Errorf("the probe was sent and failed: ProbeDone called %d times, want 1", got)
	}
}
