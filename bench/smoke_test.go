package bench

import (
	"net/http"
	"sync"
	"testing"

	"github.com/grantretry/grantretry"
)

// keyRecorder is an inner transport that remembers the Idempotency-Key of
// the last request it passed on.
type keyRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	key  string
}

func (k *keyRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	k.mu.Lock()
	k.key = r.Header.Get(grantretry.HeaderIdempotencyKey)
	k.mu.Unlock()
	return k.next.RoundTrip(r)
}

func (k *keyRecorder) lastKey() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.key
}

// TestEveryVariantSucceeds makes one call through http.Client with every
// RoundTripper the benchmarks compare, on every network and method, and
// checks it came back 200: a benchmark of a call that fails measures the
// wrong path. Through grantretry, a POST must also carry its derived key.
func TestEveryVariantSucceeds(t *testing.T) {
	wantKey := grantretry.IdempotencyKey(submissionID, postBody)
	for _, nw := range networks {
		for _, method := range methods {
			for _, v := range variants {
				t.Run(nw.name+"/"+method+"/"+v.name, func(t *testing.T) {
					inner, url := nw.setup(t)
					rec := &keyRecorder{next: inner}
					client := &http.Client{Transport: v.wrap(rec)}
					code, err := do(client, contextFor(method), method, url)
					if err != nil || code != http.StatusOK {
						t.Fatalf("status %d, err %v; want 200", code, err)
					}
					isGrantretry := v.name == "grantretry" || v.name == "grantretry-audit"
					if isGrantretry && method == http.MethodPost && rec.lastKey() != wantKey {
						t.Errorf("Idempotency-Key %q, want %q", rec.lastKey(), wantKey)
					}
				})
			}
		}
	}
}

// TestThrottledCallsAnswerAsPlanned checks the calls BenchmarkThrottle
// makes: one in failEvery gets a 503, the rest a 200, with the throttle on
// and off.
func TestThrottledCallsAnswerAsPlanned(t *testing.T) {
	for _, opts := range [][]grantretry.Option{
		{grantretry.WithoutBreaker()},
		{grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle()},
	} {
		tr := grantretry.New(cannedTransport{}, append(opts, grantretry.WithBudget(0, 60e9))...)
		for n := 1; n <= 3*failEvery; n++ {
			if err := throttledCall(tr, n); err != nil {
				t.Fatalf("call %d: %v", n, err)
			}
		}
	}
}
