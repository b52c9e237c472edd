package grantretry

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// tickingClock moves on by step at every reading, as a real clock moves
// between two reads: a judgement that reads it twice sees two times.
type tickingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *tickingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *tickingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return ctx.Err()
}

// Whether a Retry-After ends past the call's deadline is judged at one
// time: a call it makes owed says so in its reason (owed:503;retry_after),
// whatever the Retry-After, on a clock that moves between reads.
func TestRetryAfterPastDeadlineIsJudgedAtOneTime(t *testing.T) {
	for after := 1; after <= 70; after++ {
		clock := &tickingClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), step: time.Second}
		mock := httpmock.NewMockTransport()
		mock.RegisterResponder(http.MethodGet, funderURL,
			httpmock.NewStringResponder(503, "down").HeaderSet(http.Header{"Retry-After": {strconv.Itoa(after)}}))
		tr := New(mock, WithClock(clock), WithBudget(1, time.Minute))
		resp, err := tr.RoundTrip(newGet(t))
		if err != nil {
			t.Fatalf("Retry-After %d: %v", after, err)
		}
		resp.Body.Close()
		o := mustOutcome(t, resp)
		if o.StopReason == StopOwedLater && o.Reason != "owed:503;retry_after" {
			t.Errorf("Retry-After %d: owed_later with reason %q, want owed:503;retry_after", after, o.Reason)
		}
	}
}
