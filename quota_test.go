package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// funder answers every request with the status it is set to, and counts
// what it received.
type funder struct {
	status atomic.Int32
	got    atomic.Int32
}

func newFunder(status int) *funder {
	f := &funder{}
	f.status.Store(int32(status))
	return f
}

func (f *funder) respond(*http.Request) (*http.Response, error) {
	f.got.Add(1)
	return httpmock.NewStringResponse(int(f.status.Load()), "{}"), nil
}

// post sends one POST with body through tr to url.
func post(t *testing.T, tr http.RoundTripper, url, body string) (Outcome, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is no *Error", err)
		}
		return e.Outcome, err
	}
	resp.Body.Close()
	return mustOutcome(t, resp), nil
}

// wantHeld checks that a call was held: dead_letter, owed_later, until nb,
// nothing sent.
func wantHeld(t *testing.T, o Outcome, err error, nb time.Time) {
	t.Helper()
	if o.Disposition != DeadLetter || o.StopReason != StopOwedLater || o.Attempts != 0 || !o.NotBefore.Equal(nb) {
		t.Errorf("outcome %+v; want dead_letter (owed_later) after 0 attempts, NotBefore %v", o, nb)
	}
	if !errors.Is(err, ErrDeadLetter) {
		t.Errorf("error %v does not match ErrDeadLetter", err)
	}
}

func TestQuotaHoldsCallsUntilTheFundersNotBefore(t *testing.T) {
	clock := newFakeClock()
	until := clock.Now().Add(10 * time.Minute)
	f := newFunder(429)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, f.respond)
	tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(until)))

	if o, _ := post(t, tr, funderURL, "a"); o.StopReason != StopOwedLater || o.Attempts != 1 {
		t.Fatalf("first call %+v; want owed_later after its one attempt", o)
	}
	clock.advance(10*time.Minute - time.Second)
	for i := 0; i < 3; i++ {
		o, err := post(t, tr, funderURL, "b")
		wantHeld(t, o, err, until)
		if !strings.Contains(err.Error(), "is owed until "+until.UTC().Format(time.RFC3339Nano)+" (a quota); nothing was sent") {
			t.Errorf("error %q does not say why nothing was sent", err)
		}
	}
	if n := f.got.Load(); n != 1 {
		t.Fatalf("the funder received %d requests before its NotBefore, want 1", n)
	}
	clock.advance(time.Second)
	f.status.Store(200)
	for i := 0; i < 3; i++ {
		if o, err := post(t, tr, funderURL, "c"); err != nil || o.Disposition != Succeeded {
			t.Errorf("call at the NotBefore: %+v, %v; want it sent and succeeded", o, err)
		}
	}
	if n := f.got.Load(); n != 4 {
		t.Errorf("the funder received %d requests, want 4", n)
	}
}

// Two answers owed until different times, in flight together: the later
// time holds the host.
func TestQuotaLaterNotBeforeWins(t *testing.T) {
	clock := newFakeClock()
	early, late := clock.Now().Add(time.Minute), clock.Now().Add(time.Hour)
	var arrived sync.WaitGroup
	arrived.Add(2)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, func(req *http.Request) (*http.Response, error) {
		arrived.Done()
		arrived.Wait()
		return httpmock.NewStringResponse(429, req.Header.Get("X-Which")), nil
	})
	tr := New(mock, WithClock(clock), WithClassifier(func(resp *http.Response, body []byte) (Classification, bool) {
		nb := early
		if string(body) == "late" {
			nb = late
		}
		return Classification{Owed: true, NotBefore: nb, Reason: "test:quota"}, true
	}))
	var wg sync.WaitGroup
	for _, which := range []string{"early", "late"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader("x"))
			req.Header.Set("X-Which", which)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
	clock.advance(2 * time.Minute)
	o, err := post(t, tr, funderURL, "x")
	wantHeld(t, o, err, late)
}

// With no time known, one call at a time probes, once per probe interval,
// however many goroutines call: the others are held, sending nothing.
func TestQuotaOfUnknownLengthLetsOneProbePerInterval(t *testing.T) {
	clock := newFakeClock()
	var got atomic.Int32
	release := make(chan struct{})
	var block atomic.Bool
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		got.Add(1)
		if block.Load() {
			<-release
		}
		return httpmock.NewStringResponse(429, "{}"), nil
	})
	tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(time.Time{})), WithBreakerProbe(time.Second))
	if o, _ := post(t, tr, funderURL, "x"); o.StopReason != StopOwedLater || !o.NotBefore.IsZero() {
		t.Fatalf("first call %+v; want owed_later with no NotBefore", o)
	}

	const callers = 64
	round := func() (sent, held int) {
		t.Helper()
		var wg sync.WaitGroup
		outs := make(chan Outcome, callers)
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, _ := post(t, tr, funderURL, "x")
				outs <- o
			}()
		}
		// The probe, if one goes, waits in the funder until every other
		// call has ended: it is the only one in flight.
		for i := 0; block.Load() && i < callers-1; i++ {
			o := <-outs
			if o.Attempts != 0 {
				t.Errorf("a call sent while the probe was in flight: %+v", o)
			}
			held++
		}
		if block.Load() {
			close(release)
		}
		wg.Wait()
		close(outs)
		for o := range outs {
			if o.Attempts == 0 {
				held++
			} else {
				sent++
			}
			if o.StopReason != StopOwedLater || !o.NotBefore.IsZero() {
				t.Errorf("outcome %+v; want owed_later with no NotBefore", o)
			}
		}
		return sent, held
	}

	if sent, held := round(); sent != 0 || held != callers {
		t.Errorf("within the interval: %d sent, %d held; want 0 and %d", sent, held, callers)
	}
	clock.advance(time.Second)
	block.Store(true)
	if sent, held := round(); sent != 1 || held != callers-1 {
		t.Errorf("once the interval passed: %d sent, %d held; want 1 and %d", sent, held, callers-1)
	}
	block.Store(false)
	// The probe was answered owed: the interval starts again from it.
	clock.advance(999 * time.Millisecond)
	if sent, _ := round(); sent != 0 {
		t.Errorf("%d sent within the interval after an owed probe, want 0", sent)
	}
	clock.advance(time.Millisecond)
	if sent, _ := round(); sent != 1 {
		t.Errorf("%d sent in the next interval, want 1", sent)
	}
	if n := got.Load(); n != 3 {
		t.Errorf("the funder received %d requests, want 3", n)
	}
}

// A probe answered anything but owed ends the quota, whatever else the
// answer says: the calls after it flow.
func TestQuotaProbeAnsweredNotOwedClearsIt(t *testing.T) {
	for _, status := range []int{200, 503, 400} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			clock := newFakeClock()
			f := newFunder(429)
			mock := httpmock.NewMockTransport()
			mock.RegisterResponder(http.MethodPost, funderURL, f.respond)
			tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(time.Time{})),
				WithBreakerProbe(time.Second), WithBudget(0, time.Minute))
			post(t, tr, funderURL, "x")
			clock.advance(time.Second)
			f.status.Store(int32(status))
			if o, _ := post(t, tr, funderURL, "probe"); o.Attempts != 1 {
				t.Fatalf("probe %+v; want it sent", o)
			}
			f.status.Store(200)
			for i := 0; i < 3; i++ {
				if o, _ := post(t, tr, funderURL, "x"); o.Disposition != Succeeded {
					t.Errorf("call after the probe: %+v; want it sent", o)
				}
			}
			if n := f.got.Load(); n != 5 {
				t.Errorf("the funder received %d requests, want 5", n)
			}
		})
	}
}

// A probe that sends nothing gives its turn back: the next call probes at
// once, without another interval.
func TestQuotaProbeThatSendsNothingGivesItsTurnBack(t *testing.T) {
	clock := newFakeClock()
	var got, notSent atomic.Int32
	notSent.Store(1)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		got.Add(1)
		return httpmock.NewStringResponse(429, "{}"), nil
	})
	inner := rtFunc(func(req *http.Request) (*http.Response, error) {
		if req.Header.Get("X-Fail") != "" {
			return nil, fmt.Errorf("signer: no key: %w", ErrNotSent)
		}
		return mock.RoundTrip(req)
	})
	tr := New(inner, WithClock(clock), WithClassifier(owedClassifier(time.Time{})),
		WithBreakerProbe(time.Second), WithBudget(0, time.Minute))
	post(t, tr, funderURL, "x")
	clock.advance(time.Second)

	req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader("x"))
	req.Header.Set("X-Fail", "1")
	_, err := tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) || e.Outcome.Attempts != 1 || e.Outcome.Reason != reasonNotSent {
		t.Fatalf("probe that sent nothing: %v; want one attempt, %s", err, reasonNotSent)
	}
	if o, _ := post(t, tr, funderURL, "x"); o.Attempts != 1 {
		t.Errorf("call after a probe that sent nothing: %+v; want it to probe at once", o)
	}
	if n := got.Load(); n != 2 {
		t.Errorf("the funder received %d requests, want 2", n)
	}
}

// A probe that may have reached the funder and got no answer spent its
// turn: the next waits an interval.
func TestQuotaProbeWithNoAnswerSpendsItsTurn(t *testing.T) {
	clock := newFakeClock()
	f := newFunder(429)
	var reset atomic.Bool
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, func(req *http.Request) (*http.Response, error) {
		if reset.Load() {
			f.got.Add(1)
			return nil, errors.New("read: connection reset by peer")
		}
		return f.respond(req)
	})
	tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(time.Time{})),
		WithBreakerProbe(time.Second), WithBudget(0, time.Minute))
	post(t, tr, funderURL, "x")
	clock.advance(time.Second)
	reset.Store(true)
	if o, _ := post(t, tr, funderURL, "x"); o.Attempts != 1 {
		t.Fatalf("probe %+v; want it sent", o)
	}
	reset.Store(false)
	o, err := post(t, tr, funderURL, "x")
	wantHeld(t, o, err, time.Time{})
	clock.advance(time.Second)
	if o, _ := post(t, tr, funderURL, "x"); o.Attempts != 1 {
		t.Errorf("call an interval after the probe: %+v; want it to probe", o)
	}
}

// A call allowed as the probe that the breaker then refuses gives the turn
// back.
func TestQuotaProbeRefusedByTheBreakerGivesItsTurnBack(t *testing.T) {
	clock := newFakeClock()
	f := newFunder(503)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, f.respond)
	tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(time.Time{})),
		WithBreaker(1, time.Hour), WithBreakerProbe(time.Hour), WithBudget(0, time.Minute),
		ForHost("funder.test", WithBreakerProbe(time.Second)))
	post(t, tr, funderURL, "x") // 503: the breaker opens
	f.status.Store(429)
	hs := tr.hosts.get("https://funder.test:443")
	// The host is in quota as a 429 left it, the breaker still open.
	hs.quota.mu.Lock()
	hs.quota.setOn(true)
	hs.quota.next = clock.Now()
	hs.quota.mu.Unlock()
	if o, _ := post(t, tr, funderURL, "x"); o.Disposition != CircuitOpen {
		t.Fatalf("call %+v; want the breaker to refuse it", o)
	}
	hs.quota.mu.Lock()
	probing := hs.quota.probing
	hs.quota.mu.Unlock()
	if probing {
		t.Error("the probe's turn is still taken after the breaker refused its call")
	}
}

// One host's quota holds no other host.
func TestQuotaHoldsOnlyItsHost(t *testing.T) {
	clock := newFakeClock()
	const otherURL = "https://other.test/v1/applications"
	until := clock.Now().Add(time.Hour)
	quota, other := newFunder(429), newFunder(200)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, quota.respond)
	mock.RegisterResponder(http.MethodPost, otherURL, other.respond)
	tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(until)))
	post(t, tr, funderURL, "x")
	o, err := post(t, tr, funderURL, "x")
	wantHeld(t, o, err, until)
	for i := 0; i < 3; i++ {
		if o, err := post(t, tr, otherURL, "x"); err != nil || o.Disposition != Succeeded {
			t.Errorf("call to another host: %+v, %v; want it sent", o, err)
		}
	}
	if n := other.got.Load(); n != 3 {
		t.Errorf("the other host received %d requests, want 3", n)
	}
}

// The letter of a held call keeps its body, byte for byte, and the host's
// NotBefore; its disposition line says owed_later and when.
func TestQuotaHeldCallsLetterKeepsBodyAndNotBefore(t *testing.T) {
	sink := &memLetters{}
	until := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	h := newHarness(t, WithClassifier(owedClassifier(until)), WithDeadLetter(sink))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(429))
	callOnce(t, h)
	o, err := post(t, h.tr, funderURL, `{"award":"A-17"}`)
	wantHeld(t, o, err, until)
	letters := sink.all()
	if len(letters) != 2 {
		t.Fatalf("%d letters, want 2", len(letters))
	}
	l := letters[1]
	if string(l.Body) != `{"award":"A-17"}` || !l.NotBefore.Equal(until) || l.StopReason != StopOwedLater || l.Attempts != 0 || l.ID != o.DeadLetterID {
		t.Errorf("letter %+v (body %q); want the body, NotBefore %v, owed_later, 0 attempts, ID %s", l, l.Body, until, o.DeadLetterID)
	}
	lines := h.dispositionLines()
	last := lines[len(lines)-1].ContextMap()
	if last[FieldStopReason] != StopOwedLater || last[FieldNotBefore] != "2026-12-05T00:00:00Z" || last[FieldAttempts] != int64(0) {
		t.Errorf("disposition line %v; want owed_later, not_before 2026-12-05T00:00:00Z, 0 attempts", last)
	}
	if _, ok := lines[0].ContextMap()[FieldNotBefore]; !ok {
		t.Errorf("the owed call's own disposition line %v has no %s", lines[0].ContextMap(), FieldNotBefore)
	}
}

// Only owed_later disposition lines have not_before.
func TestQuotaNotBeforeFieldOnlyOnOwedLines(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(200))
	callOnce(t, h)
	if m := h.dispositionLines()[0].ContextMap(); m[FieldNotBefore] != nil {
		t.Errorf("a succeeded call's disposition line has %s: %v", FieldNotBefore, m)
	}
}

// A redelivery through the Transport is held as any call: its letter is
// still owed, and nothing is sent.
func TestQuotaHoldsRedeliveries(t *testing.T) {
	until := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	h := newHarness(t, WithClassifier(owedClassifier(until)), WithDeadLetter(&memLetters{}))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(429))
	callOnce(t, h)
	req, _ := http.NewRequestWithContext(WithRedeliveryOf(context.Background(), "letter-1"), http.MethodPost, funderURL, strings.NewReader("x"))
	_, err := h.tr.RoundTrip(req)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("redelivery: %v; want it held", err)
	}
	wantHeld(t, e.Outcome, err, until)
	if e.Outcome.DeadLetterID != "letter-1" {
		t.Errorf("DeadLetterID %q, want the letter redelivered", e.Outcome.DeadLetterID)
	}
	if n := h.mock.GetTotalCallCount(); n != 1 {
		t.Errorf("the funder received %d requests, want 1", n)
	}
}

// The probe interval is the host's probe wait, as ForHost sets it.
func TestQuotaProbeIntervalIsTheHostsProbeWait(t *testing.T) {
	clock := newFakeClock()
	f := newFunder(429)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, f.respond)
	tr := New(mock, WithClock(clock), WithClassifier(owedClassifier(time.Time{})),
		WithBreakerProbe(time.Second), ForHost("funder.test", WithBreakerProbe(5*time.Second)))
	post(t, tr, funderURL, "x")
	clock.advance(4 * time.Second)
	o, err := post(t, tr, funderURL, "x")
	wantHeld(t, o, err, time.Time{})
	if !strings.Contains(err.Error(), "one call probes every 5s") {
		t.Errorf("error %q does not say the host's probe wait", err)
	}
	clock.advance(time.Second)
	if o, _ := post(t, tr, funderURL, "x"); o.Attempts != 1 {
		t.Errorf("call at the host's probe wait: %+v; want it to probe", o)
	}
}

// A retry the quota catches in its wait is not sent: the call ends owed,
// after the attempts it made.
func TestQuotaHoldsARetry(t *testing.T) {
	clock := newFakeClock()
	until := clock.Now().Add(time.Hour)
	var calls atomic.Int32
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			return httpmock.NewStringResponse(503, "{}"), nil
		}
		return httpmock.NewStringResponse(429, "{}"), nil
	})
	var tr *Transport
	// The 503's retry waits; meanwhile another call finds the quota.
	hooked := &sleepHook{fakeClock: clock, hook: func() { post(t, tr, funderURL, "other") }}
	tr = New(mock, WithClock(hooked), WithClassifier(owedClassifier(until)))
	o, err := post(t, tr, funderURL, "x")
	if o.Disposition != DeadLetter || o.StopReason != StopOwedLater || o.Attempts != 1 || !o.NotBefore.Equal(until) || err == nil {
		t.Errorf("outcome %+v, %v; want owed_later after its one attempt, its retry held", o, err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the funder received %d requests, want 2", n)
	}
}

// sleepHook runs hook at the first wait, before waiting on its fakeClock.
type sleepHook struct {
	*fakeClock
	once sync.Once
	hook func()
}

func (s *sleepHook) Sleep(ctx context.Context, d time.Duration) error {
	s.once.Do(s.hook)
	return s.fakeClock.Sleep(ctx, d)
}

// quotaOf is the host's quota state as the Transport holds it.
func quotaOf(tr *Transport) (on, probing bool, until, next time.Time) {
	q := &tr.hosts.get("https://funder.test:443").quota
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.on(), q.probing, q.until, q.next
}

// An owed answer to a request sent before the hold, whose Retry-After is
// 0, says nothing of the hold: the hold of unknown length runs its
// interval.
func TestQuotaOwedAnswerSentBeforeTheHoldDoesNotShortenIt(t *testing.T) {
	clock := newFakeClock()
	slowIn, slowGo := make(chan struct{}), make(chan struct{})
	var got atomic.Int32
	inner := rtFunc(func(req *http.Request) (*http.Response, error) {
		got.Add(1)
		r := httpmock.NewStringResponse(429, "{}")
		if req.Header.Get("X-Slow") != "" {
			close(slowIn)
			<-slowGo
			r.Header.Set("Retry-After", "0")
		}
		return r, nil
	})
	tr := New(inner, WithClock(clock), WithClassifier(owedClassifier(time.Time{})), WithBreakerProbe(time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader("s"))
		req.Header.Set("X-Slow", "1")
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-slowIn
	post(t, tr, funderURL, "x") // owed with no time: the hold begins
	close(slowGo)
	<-done
	before := got.Load()
	for i := 0; i < 3; i++ {
		o, err := post(t, tr, funderURL, "x")
		wantHeld(t, o, err, time.Time{})
	}
	if n := got.Load() - before; n != 0 {
		t.Errorf("%d calls sent within the hold's probe interval", n)
	}
}

// A known NotBefore only extends a hold: an earlier one, from an answer to
// a request sent before, does not shorten it.
func TestQuotaEarlierNotBeforeDoesNotShortenAKnownHold(t *testing.T) {
	clock := newFakeClock()
	until := clock.Now().Add(time.Hour)
	tr := New(newFunderTransport(429), WithClock(clock), WithClassifier(owedClassifier(until)))
	post(t, tr, funderURL, "x")
	c := &call{t: tr, host: tr.hosts.get("https://funder.test:443")}
	c.host.quota.owed(c, 0, clock.Now(), clock.Now())
	c.host.quota.owed(c, 0, clock.Now().Add(time.Minute), clock.Now())
	if _, _, u, _ := quotaOf(tr); !u.Equal(until) {
		t.Errorf("hold until %v after earlier answers, want %v", u, until)
	}
}

// newFunderTransport answers every request with status.
func newFunderTransport(status int) http.RoundTripper {
	return rtFunc(func(*http.Request) (*http.Response, error) {
		return httpmock.NewStringResponse(status, "{}"), nil
	})
}

// A probe whose inner transport panics may have reached the funder: it
// spends its turn, and the next call probes an interval later.
func TestQuotaProbeThatPanicsWhileSendingSpendsItsTurn(t *testing.T) {
	clock := newFakeClock()
	var panicking atomic.Bool
	var got atomic.Int32
	inner := rtFunc(func(*http.Request) (*http.Response, error) {
		got.Add(1)
		if panicking.Load() {
			panic("inner transport")
		}
		return httpmock.NewStringResponse(429, "{}"), nil
	})
	tr := New(inner, WithClock(clock), WithClassifier(owedClassifier(time.Time{})),
		WithBreakerProbe(time.Second), WithBudget(0, time.Minute))
	post(t, tr, funderURL, "x")
	clock.advance(time.Second)
	panicking.Store(true)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the inner transport's panic did not go up")
			}
		}()
		post(t, tr, funderURL, "x")
	}()
	panicking.Store(false)
	if _, probing, _, _ := quotaOf(tr); probing {
		t.Fatal("the probe's turn is still taken after its panic")
	}
	o, err := post(t, tr, funderURL, "x")
	wantHeld(t, o, err, time.Time{})
	clock.advance(time.Second)
	if o, _ := post(t, tr, funderURL, "x"); o.Attempts != 1 {
		t.Errorf("call an interval after the panicking probe: %+v; want it to probe", o)
	}
	if n := got.Load(); n != 3 {
		t.Errorf("the funder received %d requests, want 3", n)
	}
}

// A host whose funder's NotBefore has passed is at rest, though no call
// came since: the sweep may drop it.
func TestQuotaPassedNotBeforeLeavesTheHostAtRest(t *testing.T) {
	clock := newFakeClock()
	until := clock.Now().Add(time.Minute)
	tr := New(newFunderTransport(429), WithClock(clock), WithClassifier(owedClassifier(until)),
		WithoutBreaker(), WithoutRetryThrottle())
	post(t, tr, funderURL, "x")
	hs := tr.hosts.get("https://funder.test:443")
	if hs.atRest(clock.Now()) {
		t.Fatal("a host held until its funder's NotBefore is at rest")
	}
	clock.advance(time.Minute)
	if !hs.atRest(clock.Now()) {
		t.Error("a host whose funder's NotBefore has passed is not at rest")
	}
}

// A 429 whose Retry-After ends past the deadline, to a request that
// cannot be sent again, ends body_not_replayable and holds the host until
// then, as an owed answer does; the call's own Outcome.NotBefore stays
// zero, as for every stop reason but owed_later.
func TestQuotaRetryAfterPastDeadlineOnAStreamedBodyHoldsTheHost(t *testing.T) {
	clock := newFakeClock()
	clock.freeze()
	var got atomic.Int32
	inner := rtFunc(func(req *http.Request) (*http.Response, error) {
		got.Add(1)
		if req.Body != nil {
			io.Copy(io.Discard, req.Body)
		}
		r := httpmock.NewStringResponse(429, "{}")
		r.Header.Set("Retry-After", "3600")
		return r, nil
	})
	tr := New(inner, WithClock(clock), WithReplayLimit(4), WithBudget(4, time.Minute))
	req, _ := http.NewRequest(http.MethodPost, funderURL, io.NopCloser(strings.NewReader(strings.Repeat("B", 100))))
	req.ContentLength = -1
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("streamed call: %v; want the funder's answer", err)
	}
	resp.Body.Close()
	until := clock.Now().Add(time.Hour)
	o := mustOutcome(t, resp)
	if o.StopReason != StopNotReplayable || !o.NotBefore.IsZero() {
		t.Errorf("streamed call: %s, NotBefore %v; want %s and no NotBefore (its stop reason is not owed_later)",
			o.StopReason, o.NotBefore, StopNotReplayable)
	}
	o, err = post(t, tr, funderURL, "x")
	wantHeld(t, o, err, until)
	if n := got.Load(); n != 1 {
		t.Errorf("the funder received %d requests, want 1", n)
	}
}
