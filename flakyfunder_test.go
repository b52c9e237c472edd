package grantretry

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// failTwiceFunder answers the first two attempts of every call 503 and the
// third 201, telling a call's attempts apart by their X-Correlation-ID: a
// funder that is up but fails most attempts. It answers the calls of a
// round in step, as concurrent callers meet it: attempt n of a call is
// answered once every call of the round still going has sent its attempt
// n, so every caller's failure of attempt n meets the retry throttle
// before any attempt n+1 is answered.
type failTwiceFunder struct {
	mu       sync.Mutex
	cond     *sync.Cond
	attempts map[string]int  // per X-Correlation-ID
	live     map[string]bool // the round's calls that have not ended
}

func newFailTwiceFunder() *failTwiceFunder {
	f := &failTwiceFunder{attempts: make(map[string]int), live: make(map[string]bool)}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// begin starts a round of the calls named by corrs.
func (f *failTwiceFunder) begin(corrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range corrs {
		f.live[c] = true
	}
}

// ended says corr's call has returned to its caller.
func (f *failTwiceFunder) ended(corr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, corr)
	f.cond.Broadcast()
}

func (f *failTwiceFunder) respond(req *http.Request) (*http.Response, error) {
	corr := req.Header.Get(HeaderCorrelationID)
	f.mu.Lock()
	f.attempts[corr]++
	n := f.attempts[corr]
	f.cond.Broadcast()
	for !f.reached(n) {
		f.cond.Wait()
	}
	f.mu.Unlock()
	if n <= 2 {
		return httpmock.NewStringResponse(http.StatusServiceUnavailable, "service unavailable"), nil
	}
	return httpmock.NewStringResponse(http.StatusCreated, "created"), nil
}

// reached reports whether every live call has sent its attempt n.
func (f *failTwiceFunder) reached(n int) bool {
	for c := range f.live {
		if f.attempts[c] < n {
			return false
		}
	}
	return true
}

// flakyRounds runs rounds of four concurrent callers, each submitting one
// application a round, 2 s apart on the clock, through a Transport built
// with opts, and returns every call's outcome, round by round.
func flakyRounds(t *testing.T, rounds int, opts ...Option) [][]Outcome {
	t.Helper()
	const callers = 4
	h := newHarness(t, opts...)
	h.clock.freeze()
	f := newFailTwiceFunder()
	h.mock.RegisterResponder(http.MethodPost, funderURL, f.respond)
	client := h.client()
	out := make([][]Outcome, rounds)
	for r := range rounds {
		out[r] = make([]Outcome, callers)
		corrs := make([]string, callers)
		for c := range corrs {
			corrs[c] = fmt.Sprintf("round-%d-caller-%d", r, c)
		}
		f.begin(corrs)
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer f.ended(corrs[c])
				ctx := WithSubmissionID(t.Context(), fmt.Sprintf("GRANT-%d-%d", r, c))
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, funderURL, bytes.NewReader([]byte(`{"amount":1}`)))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set(HeaderCorrelationID, corrs[c])
				resp, err := client.Do(req)
				if err != nil {
					e := mustError(t, err)
					out[r][c] = e.Outcome
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				out[r][c] = mustOutcome(t, resp)
			}()
		}
		wg.Wait()
		h.clock.advance(2 * time.Second)
	}
	return out
}

// TestDefaultsDeadLetterAFunderThatFailsTwiceInThree holds what the
// README's quick start and docs/choosing-budgets.md say of a funder that
// answers 503, 503, then 201 to every call, with four callers: under the
// defaults the four first calls drain the retry throttle and all end
// dead_letter, and no later call succeeds: each ends dead_letter, refused
// its retry, or circuit_open once five failed calls in a row have opened
// the breaker, whose probes are first attempts and fail.
func TestDefaultsDeadLetterAFunderThatFailsTwiceInThree(t *testing.T) {
	out := flakyRounds(t, 10)
	byDisp := map[Disposition]int{}
	for r, round := range out {
		for c, o := range round {
			byDisp[o.Disposition]++
			switch o.Disposition {
			case DeadLetter:
				if o.StopReason != StopThrottled {
					t.Errorf("round %d caller %d: dead_letter for %s, want %s", r, c, o.StopReason, StopThrottled)
				}
				if want := 1; r > 0 && o.Attempts != want {
					t.Errorf("round %d caller %d: %d attempts, want %d", r, c, o.Attempts, want)
				}
			case CircuitOpen:
			default:
				t.Errorf("round %d caller %d: %s (%s) after %d attempts, want dead_letter or circuit_open", r, c, o.Disposition, o.StopReason, o.Attempts)
			}
		}
	}
	for c, o := range out[0] {
		if o.Disposition != DeadLetter || o.Attempts != 2 {
			t.Errorf("first round, caller %d: %s after %d attempts, want dead_letter after 2", c, o.Disposition, o.Attempts)
		}
	}
	if byDisp[CircuitOpen] == 0 {
		t.Errorf("no call ended circuit_open (%v): the breaker never opened", byDisp)
	}
}

// TestThrottleSizedForAFlakyFunderLetsEveryCallSucceed holds the option the
// docs give for it: WithRetryThrottle(20, 2), a bucket whose half holds
// every caller's two failures and a ratio that pays them back, lets every
// call succeed on its third attempt. The ratio alone, WithRetryThrottle(10,
// 2), does not: the first four calls drain the bucket before any success.
func TestThrottleSizedForAFlakyFunderLetsEveryCallSucceed(t *testing.T) {
	for r, round := range flakyRounds(t, 10, WithRetryThrottle(20, 2)) {
		for c, o := range round {
			if o.Disposition != Succeeded || o.Attempts != 3 {
				t.Errorf("WithRetryThrottle(20, 2), round %d caller %d: %s (%s) after %d attempts, want succeeded after 3",
					r, c, o.Disposition, o.StopReason, o.Attempts)
			}
		}
	}
	for r, round := range flakyRounds(t, 10, WithRetryThrottle(10, 2)) {
		for c, o := range round {
			if o.Disposition == Succeeded {
				t.Errorf("WithRetryThrottle(10, 2), round %d caller %d: succeeded after %d attempts, want no call to succeed", r, c, o.Attempts)
			}
		}
	}
}
