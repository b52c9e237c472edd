package grantretry

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// dedupFunder answers a key's first attempt with 503 and every later one
// with 201, and counts effects per key as a funder honouring
// Idempotency-Key would: a repeat is not applied again.
type dedupFunder struct {
	mu       sync.Mutex
	attempts map[string]int
	effects  map[string]int
}

func (f *dedupFunder) responder() httpmock.Responder {
	return func(r *http.Request) (*http.Response, error) {
		key := r.Header.Get(HeaderIdempotencyKey)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.attempts[key]++
		if f.attempts[key] == 1 {
			return httpmock.NewStringResponse(503, "busy"), nil
		}
		if f.effects[key] == 0 {
			f.effects[key] = 1
		}
		return httpmock.NewStringResponse(201, "created"), nil
	}
}

// 1000 concurrent calls across several hosts through one Transport: every
// call succeeds on its second attempt, with its own key and correlation id,
// and each submission takes effect once.
func TestThousandConcurrentCallsAcrossHosts(t *testing.T) {
	const calls, hosts = 1000, 5
	h := newHarness(t, WithBreaker(10000, time.Minute), WithoutRetryThrottle())
	h.clock.frozen = true
	funder := &dedupFunder{attempts: map[string]int{}, effects: map[string]int{}}
	for i := 0; i < hosts; i++ {
		h.mock.RegisterResponder(http.MethodPost, fmt.Sprintf("https://funder%d.test/apply", i), funder.responder())
	}
	client := h.client()

	var wg sync.WaitGroup
	outcomes := make([]Outcome, calls)
	errs := make([]error, calls)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx := WithSubmissionID(context.Background(), fmt.Sprintf("SUB-%04d", i))
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
				fmt.Sprintf("https://funder%d.test/apply", i%hosts), nil)
			req.Body = http.NoBody
			resp, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			resp.Body.Close()
			outcomes[i], _ = OutcomeOf(resp)
		}(i)
	}
	wg.Wait()

	corr := make(map[string]bool)
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if o.Disposition != Succeeded || o.Attempts != 2 {
			t.Fatalf("call %d: %+v", i, o)
		}
		if corr[o.CorrelationID] {
			t.Fatalf("correlation id %s shared between calls", o.CorrelationID)
		}
		corr[o.CorrelationID] = true
		if want := IdempotencyKey(fmt.Sprintf("SUB-%04d", i), nil); o.IdempotencyKey != want {
			t.Fatalf("call %d: key %s, want %s", i, o.IdempotencyKey, want)
		}
	}
	if len(funder.effects) != calls {
		t.Errorf("%d submissions took effect, want %d", len(funder.effects), calls)
	}
	if got := len(h.dispositionLines()); got != calls {
		t.Errorf("%d disposition lines, want %d", got, calls)
	}
}
