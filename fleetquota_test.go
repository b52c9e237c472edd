package grantretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// quotaFleet is a memFleet whose hosts share their quota (FleetQuota),
// held in memory on the test's clock, as a fleet's store holds it in the
// host's row: a hold until the funder's NotBefore, or a probe turn.
type quotaFleet struct {
	*memFleet
	clock  Clock
	mu     sync.Mutex
	quotas map[string]*memQuota
	fail   bool // every I/O method fails
}

type memQuota struct {
	f     *quotaFleet
	until time.Time // guarded by f.mu
	known bool
	calls map[string]int
}

// quotaHost is what quotaFleet.Host returns: a FleetHost that is also a
// FleetQuota.
type quotaHost struct {
	*memHost
	*memQuota
}

func newQuotaFleet(clock Clock) *quotaFleet {
	return &quotaFleet{memFleet: newMemFleet(), clock: clock, quotas: map[string]*memQuota{}}
}

func (f *quotaFleet) Host(key string, p FleetPolicy) FleetHost {
	f.mu.Lock()
	q := f.quotas[key]
	if q == nil {
		q = &memQuota{f: f, calls: map[string]int{}}
		f.quotas[key] = q
	}
	f.mu.Unlock()
	return quotaHost{f.memFleet.Host(key, p).(*memHost), q}
}

func (q *memQuota) io(name string) error {
	q.calls[name]++
	if q.f.fail {
		return errors.New("fleet store unreachable")
	}
	return nil
}

func (q *memQuota) QuotaUntil() (time.Time, bool) {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	return q.until, q.known
}

func (q *memQuota) Owed(_ context.Context, until time.Time, probe time.Duration) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if err := q.io("Owed"); err != nil {
		return err
	}
	now := q.f.clock.Now()
	switch {
	case !until.IsZero():
		if !q.known || until.After(q.until) {
			q.until, q.known = until, true
		}
	case q.known && now.Before(q.until):
	default:
		q.until, q.known = now.Add(probe), false
	}
	return nil
}

func (q *memQuota) TryQuotaProbe(_ context.Context, probe time.Duration) (bool, error) {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if err := q.io("TryQuotaProbe"); err != nil {
		return false, err
	}
	now := q.f.clock.Now()
	if q.until.IsZero() || q.known || now.Before(q.until) {
		return false, nil
	}
	q.until = now.Add(probe)
	return true, nil
}

func (q *memQuota) GiveBackQuotaProbe(context.Context) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if err := q.io("GiveBackQuotaProbe"); err != nil {
		return err
	}
	if now := q.f.clock.Now(); !q.known && now.Before(q.until) {
		q.until = now
	}
	return nil
}

func (q *memQuota) QuotaCleared(context.Context) error {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	if err := q.io("QuotaCleared"); err != nil {
		return err
	}
	q.until, q.known = time.Time{}, false
	return nil
}

func (q *memQuota) count(name string) int {
	q.f.mu.Lock()
	defer q.f.mu.Unlock()
	return q.calls[name]
}

// twoProcesses are two Transports sharing f, the funder and the clock.
func twoProcesses(clock *fakeClock, f *quotaFleet, fu *funder, opts ...Option) (a, b *Transport) {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, fleetURL, fu.respond)
	all := append([]Option{WithClock(clock), WithFleet(f), WithBudget(0, time.Minute)}, opts...)
	return New(mock, all...), New(mock, all...)
}

// One process's owed answer holds the other's calls until the funder's
// NotBefore: the whole fleet waits.
func TestFleetQuotaHoldsEveryProcessUntilNotBefore(t *testing.T) {
	clock := newFakeClock()
	until := clock.Now().Add(time.Hour)
	f, fu := newQuotaFleet(clock), newFunder(429)
	a, b := twoProcesses(clock, f, fu, WithClassifier(owedClassifier(until)))
	if o, _ := post(t, a, fleetURL, "x"); o.StopReason != StopOwedLater || o.Attempts != 1 {
		t.Fatalf("first call %+v; want owed_later", o)
	}
	for i := 0; i < 3; i++ {
		o, err := post(t, b, fleetURL, "x")
		wantHeld(t, o, err, until)
	}
	clock.advance(time.Hour)
	fu.status.Store(200)
	for _, tr := range []*Transport{a, b} {
		if o, _ := post(t, tr, fleetURL, "x"); o.Disposition != Succeeded {
			t.Errorf("call at the NotBefore: %+v; want it sent", o)
		}
	}
	if n := fu.got.Load(); n != 3 {
		t.Errorf("the funder received %d requests, want 3", n)
	}
}

// With no time known, the fleet lets one process probe per interval; the
// probe's answer that is not owed ends the quota for every process.
func TestFleetQuotaLetsOneProbeAcrossProcesses(t *testing.T) {
	clock := newFakeClock()
	f, fu := newQuotaFleet(clock), newFunder(429)
	a, b := twoProcesses(clock, f, fu, WithClassifier(owedClassifier(time.Time{})), WithBreakerProbe(time.Second))
	post(t, a, fleetURL, "x")
	clock.advance(time.Second)
	sent := 0
	for i := 0; i < 4; i++ {
		for _, tr := range []*Transport{b, a} {
			if o, _ := post(t, tr, fleetURL, "x"); o.Attempts > 0 {
				sent++
			}
		}
	}
	if sent != 1 {
		t.Errorf("%d probes sent by two processes in one interval, want 1", sent)
	}
	q := f.quotas[fleetKey]
	if n := q.count("TryQuotaProbe"); n == 0 {
		t.Error("no process asked the fleet for its probe")
	}
	clock.advance(time.Second)
	fu.status.Store(200)
	if o, _ := post(t, b, fleetURL, "x"); o.Disposition != Succeeded {
		t.Fatalf("probe %+v; want it sent", o)
	}
	if n := q.count("QuotaCleared"); n != 1 {
		t.Errorf("QuotaCleared called %d times, want once", n)
	}
	for _, tr := range []*Transport{a, b, a, b} {
		if o, _ := post(t, tr, fleetURL, "x"); o.Disposition != Succeeded {
			t.Errorf("call after the probe: %+v; want it sent", o)
		}
	}
	if n := q.count("QuotaCleared"); n != 1 {
		t.Errorf("QuotaCleared called %d times after the calls that followed, want once: never on every success", n)
	}
}

// A process that held the host with the fleet lets its calls go once the
// fleet no longer holds it (another process's probe ended the quota),
// before its own probe turn.
func TestFleetQuotaClearedElsewhereReleasesTheProcess(t *testing.T) {
	clock := newFakeClock()
	f, fu := newQuotaFleet(clock), newFunder(429)
	a, _ := twoProcesses(clock, f, fu, WithClassifier(owedClassifier(time.Time{})), WithBreakerProbe(time.Minute))
	post(t, a, fleetURL, "x")
	o, err := post(t, a, fleetURL, "x")
	wantHeld(t, o, err, time.Time{})
	f.quotas[fleetKey].QuotaCleared(context.Background()) // another process's probe
	fu.status.Store(200)
	if o, _ := post(t, a, fleetURL, "x"); o.Disposition != Succeeded {
		t.Errorf("call once the fleet's quota ended: %+v; want it sent", o)
	}
}

// When the fleet's store fails, each process's own state decides: the one
// that heard the owed answer holds, the other, which heard nothing, sends.
func TestFleetQuotaUnreachableLeavesTheLocalStateToDecide(t *testing.T) {
	clock := newFakeClock()
	f, fu := newQuotaFleet(clock), newFunder(429)
	f.fail = true
	a, b := twoProcesses(clock, f, fu, WithClassifier(owedClassifier(time.Time{})), WithBreakerProbe(time.Second))
	post(t, a, fleetURL, "x")
	o, err := post(t, a, fleetURL, "x")
	wantHeld(t, o, err, time.Time{})
	if o, _ := post(t, b, fleetURL, "x"); o.Attempts != 1 {
		t.Errorf("call of a process that heard nothing, with the fleet away: %+v; want it sent", o)
	}
	if n := f.quotas[fleetKey].count("Owed"); n != 2 {
		t.Errorf("Owed called %d times, want 2 (once per owed answer)", n)
	}
}

// A fleet probe that sent nothing gives the fleet's turn back: the next
// call probes at once.
func TestFleetQuotaProbeThatSendsNothingGivesTheTurnBack(t *testing.T) {
	clock := newFakeClock()
	f, fu := newQuotaFleet(clock), newFunder(429)
	var notSent atomic.Bool
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, fleetURL, fu.respond)
	inner := rtFunc(func(req *http.Request) (*http.Response, error) {
		if notSent.Load() {
			return nil, fmt.Errorf("signer: %w", ErrNotSent)
		}
		return mock.RoundTrip(req)
	})
	tr := New(inner, WithClock(clock), WithFleet(f), WithBudget(0, time.Minute),
		WithClassifier(owedClassifier(time.Time{})), WithBreakerProbe(time.Second))
	post(t, tr, fleetURL, "x")
	clock.advance(time.Second)
	notSent.Store(true)
	if o, _ := post(t, tr, fleetURL, "x"); o.Attempts != 1 || o.Reason != reasonNotSent {
		t.Fatalf("probe that sent nothing: %+v", o)
	}
	notSent.Store(false)
	if o, _ := post(t, tr, fleetURL, "x"); o.Attempts != 1 {
		t.Errorf("call after a fleet probe that sent nothing: %+v; want it to probe at once", o)
	}
	if n := f.quotas[fleetKey].count("GiveBackQuotaProbe"); n != 1 {
		t.Errorf("GiveBackQuotaProbe called %d times, want once", n)
	}
}

// The fleet's probe turn does not send a call to a funder whose NotBefore
// this process knows (its report of it to the fleet failed).
func TestFleetQuotaProbeTurnKeepsTheLocalNotBefore(t *testing.T) {
	clock := newFakeClock()
	f, fu := newQuotaFleet(clock), newFunder(429)
	until := clock.Now().Add(time.Hour)
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, fleetURL, fu.respond)
	tr := New(mock, WithClock(clock), WithFleet(f), WithBudget(0, time.Minute),
		WithClassifier(owedClassifier(until)), WithBreakerProbe(time.Second))
	q := f.Host(fleetKey, FleetPolicy{}).(quotaHost).memQuota
	f.mu.Lock()
	q.until, q.known = clock.Now().Add(time.Second), false // another process's probe turn
	f.fail = true
	f.mu.Unlock()
	clock.advance(time.Second)
	post(t, tr, fleetURL, "x") // owed until the hour; the report fails
	f.mu.Lock()
	f.fail = false
	f.mu.Unlock()
	before := fu.got.Load()
	o, err := post(t, tr, fleetURL, "x")
	wantHeld(t, o, err, until)
	if fu.got.Load() != before {
		t.Error("the fleet's probe turn sent a call before the NotBefore this process knows")
	}
}
