package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jarcoal/httpmock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const endpoint = "https://funder.example/v1/applications"

var app = Application{ID: "GRANT-2026-0042", Applicant: "Riverbend Food Bank", Amount: 125000}

// fakeClock is a grantretry.Clock that never sleeps: Sleep advances Now by
// the wait and records it, so a test runs a whole retry schedule, Retry-After
// included, in microseconds and can assert each wait.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// harness is the pipeline's own client over a mock funder and a fake clock.
//
// The mock is grantretry's INNER transport, not httpmock.Activate: Activate
// swaps http.DefaultTransport, which grantretry does not send through (its
// default is a pooled transport of its own), so the calls would go to the
// network; and ActivateNonDefault(client) would replace the client's
// Transport, grantretry included, so the tests would run no retry policy at
// all. The middleware must sit above the mock, as it sits above the real
// transport in production. A mock per test also keeps tests parallel: no
// global to share.
type harness struct {
	mock  *httpmock.MockTransport
	clock *fakeClock
	sub   *Submitter
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		mock:  httpmock.NewMockTransport(),
		clock: &fakeClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)},
	}
	h.sub = NewSubmitter(NewHTTPClient(h.mock, grantretry.WithClock(h.clock)), endpoint)
	return h
}

func (h *harness) submit(t *testing.T) Result {
	t.Helper()
	r, err := h.sub.Submit(context.Background(), app)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return r
}

// keyRecorder wraps a responder to capture the Idempotency-Key of every
// request it answers. httpmock runs responders on a goroutine of its own,
// hence mu.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) wrap(next httpmock.Responder) httpmock.Responder {
	return func(req *http.Request) (*http.Response, error) {
		k.mu.Lock()
		k.keys = append(k.keys, req.Header.Get(grantretry.HeaderIdempotencyKey))
		k.mu.Unlock()
		return next(req)
	}
}

func (k *keyRecorder) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.keys)
}

func TestTransientThenSuccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var keys keyRecorder
	h.mock.RegisterResponder(http.MethodPost, endpoint, keys.wrap(
		httpmock.NewStringResponder(503, "busy").
			Then(httpmock.NewStringResponder(503, "busy")).
			Then(httpmock.NewStringResponder(201, `{"reference":"FND-7781"}`))))

	r := h.submit(t)
	if r.Action != Submitted || r.Reference != "FND-7781" {
		t.Errorf("got %s with reference %q, want submitted FND-7781", r.Action, r.Reference)
	}
	if r.Outcome.Attempts != 3 || r.Outcome.Disposition != grantretry.Succeeded {
		t.Errorf("outcome %s after %d attempts, want succeeded after 3", r.Outcome.Disposition, r.Outcome.Attempts)
	}
	if n := h.mock.GetTotalCallCount(); n != 3 {
		t.Errorf("the funder was called %d times, want 3", n)
	}
	body, _ := json.Marshal(app)
	want := grantretry.IdempotencyKey(app.ID, body)
	if got := keys.seen(); !slices.Equal(got, []string{want, want, want}) {
		t.Errorf("keys sent %q, want %q on each of 3 attempts", got, want)
	}
	if r.Outcome.IdempotencyKey != want {
		t.Errorf("outcome key %q, want %q", r.Outcome.IdempotencyKey, want)
	}
}

func TestTerminalIsNotRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, endpoint,
		httpmock.NewStringResponder(422, `{"error":"budget narrative missing"}`))

	r := h.submit(t)
	if r.Action != Rejected || r.Outcome.Disposition != grantretry.FailedTerminal || r.Outcome.Status != 422 {
		t.Errorf("got %s (%s, status %d), want rejected (failed_terminal, 422)", r.Action, r.Outcome.Disposition, r.Outcome.Status)
	}
	if r.Outcome.Attempts != 1 || h.mock.GetTotalCallCount() != 1 {
		t.Errorf("%d attempts, %d calls to the funder; want 1 and 1", r.Outcome.Attempts, h.mock.GetTotalCallCount())
	}
	if w := h.clock.slept(); len(w) != 0 {
		t.Errorf("waited %v before giving up, want no wait", w)
	}
}

// A funder that keeps failing opens the breaker: from then on submissions
// end at once as circuit_open, and the funder hears nothing more.
func TestBreakerStopsCallingAFailingFunder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, endpoint, httpmock.NewStringResponder(503, "down"))

	var opened, submissions int // calls to the funder, and submissions, when the breaker opened
	for i := 0; i < 10 && opened == 0; i++ {
		r := h.submit(t)
		if r.Action != RetryLater {
			t.Fatalf("submission %d: %s, want retry_later", i+1, r.Action)
		}
		if r.Outcome.Disposition == grantretry.CircuitOpen {
			opened, submissions = h.mock.GetTotalCallCount(), i+1
		}
	}
	if submissions != BreakerThreshold {
		t.Fatalf("the breaker opened on submission %d, want %d: each failed submission counts once", submissions, BreakerThreshold)
	}
	for i := 0; i < 3; i++ {
		r := h.submit(t)
		if r.Action != RetryLater || r.Outcome.Disposition != grantretry.CircuitOpen || r.Outcome.Attempts != 0 {
			t.Errorf("while open: %s (%s after %d attempts), want retry_later (circuit_open after 0)",
				r.Action, r.Outcome.Disposition, r.Outcome.Attempts)
		}
	}
	if n := h.mock.GetTotalCallCount(); n != opened {
		t.Errorf("the funder was called %d times, %d after the breaker opened; want none", n, n-opened)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, endpoint,
		httpmock.NewStringResponder(429, "slow down").HeaderSet(http.Header{"Retry-After": {"30"}}).
			Then(httpmock.NewStringResponder(201, `{"reference":"FND-7782"}`)))

	r := h.submit(t)
	if r.Action != Submitted || r.Outcome.Attempts != 2 {
		t.Errorf("got %s after %d attempts, want submitted after 2", r.Action, r.Outcome.Attempts)
	}
	// The backoff alone would wait at most 500ms: the 30s is the funder's.
	if w := h.clock.slept(); !slices.Equal(w, []time.Duration{30 * time.Second}) {
		t.Errorf("waits %v, want exactly the funder's Retry-After [30s]", w)
	}
}

// A Retry-After past the submission's deadline is not slept: the
// submission comes back at once, with the funder's wait for the scheduler.
func TestRetryAfterPastDeadlineIsRetryLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, endpoint,
		httpmock.NewStringResponder(429, "come back tomorrow").HeaderSet(http.Header{"Retry-After": {"3600"}}))

	r := h.submit(t)
	if r.Action != RetryLater || r.Outcome.StopReason != grantretry.StopOwedLater || r.RetryAfter != time.Hour {
		t.Errorf("got %s (%s), retry after %v; want retry_later (%s), retry after 1h",
			r.Action, r.Outcome.StopReason, r.RetryAfter, grantretry.StopOwedLater)
	}
	if w := h.clock.slept(); len(w) != 0 || h.mock.GetTotalCallCount() != 1 {
		t.Errorf("waits %v, %d calls; want no wait and 1 call", w, h.mock.GetTotalCallCount())
	}
}

// A funder that cannot be reached at all gives no response: the outcome
// comes from the *grantretry.Error, and the work is still owed.
func TestUnreachableFunderIsRetryLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, endpoint, httpmock.ConnectionFailure)

	r := h.submit(t)
	if r.Action != RetryLater || r.Outcome.Disposition != grantretry.DeadLetter ||
		r.Outcome.StopReason != grantretry.StopRetriesSpent {
		t.Errorf("got %s (%s/%s), want retry_later (dead_letter/%s)",
			r.Action, r.Outcome.Disposition, r.Outcome.StopReason, grantretry.StopRetriesSpent)
	}
	if want := MaxRetries + 1; r.Outcome.Attempts != want || h.mock.GetTotalCallCount() != want {
		t.Errorf("%d attempts, %d calls; want %d of each", r.Outcome.Attempts, h.mock.GetTotalCallCount(), want)
	}
}

func TestCallerCancellationIsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, endpoint, httpmock.NewStringResponder(201, `{}`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := h.sub.Submit(ctx, app)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := h.mock.GetTotalCallCount(); n != 0 {
		t.Errorf("the funder was called %d times, want 0", n)
	}
}
