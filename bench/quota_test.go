package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// BenchmarkQuotaHold: a funder in quota, as AWS API Gateway answers a
// usage plan's exhausted quota (429, x-amzn-ErrorType:
// LimitExceededException, no Retry-After), for a window, then taking
// calls again; 100 callers, each starting one call every 100 ms (a new
// one once the last has ended), through one grantretry Transport (probe
// interval 1 s, real clock) and through go-retryablehttp's defaults.
//
// Reported, per side:
//   - window_req_per_interval_max and _mean: requests the funder received
//     in each probe interval (1 s) of the window; held_req_per_interval_max
//     the most in an interval after the first, in which the calls already
//     in flight when the quota began were answered;
//   - req_per_window_call: requests per call started in the window;
//   - recovery_s: from the window's end, how long until every caller
//     calls at full rate again: the first time T after which every call
//     started succeeded and every caller started a call within a cadence
//     of T.
//
// The window is GRANTRETRY_QUOTA_WINDOW (a duration, default 2s, so that
// the bench smoke run stays short); after it the callers go on for 2 s.
func BenchmarkQuotaHold(b *testing.B) {
	window := 2 * time.Second
	if s := os.Getenv("GRANTRETRY_QUOTA_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			b.Fatalf("GRANTRETRY_QUOTA_WINDOW=%q: want a duration of at least 1s", s)
		}
		window = d
	}
	sides := []struct {
		name string
		rt   func(inner http.RoundTripper) http.RoundTripper
	}{
		{"grantretry", func(inner http.RoundTripper) http.RoundTripper {
			return grantretry.New(inner, grantretry.WithBreakerProbe(quotaProbe))
		}},
		{"retryablehttp", newRetryableHTTP},
	}
	for _, side := range sides {
		b.Run(side.name, func(b *testing.B) {
			var r quotaRun
			for i := 0; i < b.N; i++ {
				r = runQuota(b, side.rt, window)
			}
			r.report(b)
		})
	}
}

const (
	quotaCallers = 100
	quotaCadence = 100 * time.Millisecond
	quotaProbe   = time.Second
	quotaAfter   = 2 * time.Second
)

// quotaCall is one call as a caller saw it.
type quotaCall struct {
	id         string
	caller     int
	start, end time.Duration // since the run's start
	ok         bool
}

type quotaRun struct {
	window      time.Duration
	perInterval []int64 // requests the funder received in each probe interval of the window
	calls       []quotaCall
	requests    map[string]int // per call id: requests the funder received
}

// quotaFunder answers 429 LimitExceededException until windowEnd, then 200.
type quotaFunder struct {
	start     time.Time
	windowEnd time.Time
	buckets   []atomic.Int64 // requests per probe interval of the window
	mu        sync.Mutex
	perCall   map[string]int
}

func (f *quotaFunder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	now := time.Now()
	f.mu.Lock()
	f.perCall[r.Header.Get("X-Bench-Call")]++
	f.mu.Unlock()
	if now.Before(f.windowEnd) {
		if i := int(now.Sub(f.start) / quotaProbe); i < len(f.buckets) {
			f.buckets[i].Add(1)
		}
		w.Header().Set("x-amzn-ErrorType", "LimitExceededException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"message":"Limit Exceeded"}`)
		return
	}
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"id":"A-1"}`)
}

func runQuota(b *testing.B, mk func(http.RoundTripper) http.RoundTripper, window time.Duration) quotaRun {
	b.Helper()
	inner := &http.Transport{MaxIdleConns: 2 * quotaCallers, MaxIdleConnsPerHost: 2 * quotaCallers, IdleConnTimeout: time.Minute}
	defer inner.CloseIdleConnections()
	f := &quotaFunder{buckets: make([]atomic.Int64, (window+quotaProbe-1)/quotaProbe), perCall: map[string]int{}}
	srv := httptest.NewServer(f) // 127.0.0.1
	defer srv.Close()
	rt := mk(inner)
	client := &http.Client{Transport: rt}

	f.start = time.Now()
	f.windowEnd = f.start.Add(window)
	stop := f.windowEnd.Add(quotaAfter)
	var (
		mu    sync.Mutex
		calls []quotaCall
		wg    sync.WaitGroup
		ids   atomic.Int64
	)
	for c := 0; c < quotaCallers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the callers over one cadence.
			next := f.start.Add(time.Duration(c) * quotaCadence / quotaCallers)
			for {
				time.Sleep(time.Until(next))
				if !time.Now().Before(stop) {
					return
				}
				id := fmt.Sprint(ids.Add(1))
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/submissions", strings.NewReader(`{"award":"A-1"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Bench-Call", id)
				started := time.Now()
				resp, err := client.Do(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				calls = append(calls, quotaCall{id: id, caller: c, start: started.Sub(f.start), end: time.Since(f.start), ok: ok})
				mu.Unlock()
				next = next.Add(quotaCadence)
				if now := time.Now(); next.Before(now) {
					next = now
				}
			}
		}()
	}
	wg.Wait()
	r := quotaRun{window: window, calls: calls, requests: f.perCall}
	for i := range f.buckets {
		r.perInterval = append(r.perInterval, f.buckets[i].Load())
	}
	return r
}

func (r quotaRun) report(b *testing.B) {
	var sum, most int64
	for _, n := range r.perInterval {
		sum += n
		most = max(most, n)
	}
	var held int64 // the intervals after the first, whose requests the onset's answers could not have held
	for _, n := range r.perInterval[1:] {
		held = max(held, n)
	}
	b.Logf("requests the funder received per probe interval of the window: %v", r.perInterval)
	b.ReportMetric(float64(most), "window_req_per_interval_max")
	b.ReportMetric(float64(held), "held_req_per_interval_max")
	b.ReportMetric(float64(sum)/float64(len(r.perInterval)), "window_req_per_interval_mean")

	var inWindow, reqs int
	for _, c := range r.calls {
		if c.start < r.window {
			inWindow++
			reqs += r.requests[c.id]
		}
	}
	b.ReportMetric(float64(reqs)/float64(inWindow), "req_per_window_call")
	b.ReportMetric(float64(inWindow), "window_calls")
	b.ReportMetric(r.recovery().Seconds(), "recovery_s")
}

// recovery is how long after the window's end every caller is back at
// full rate: the first T (in steps of 10 ms) after which every call
// started succeeded, and every caller started a call within 2 cadences of
// T. -1 s if the run never got there.
func (r quotaRun) recovery() time.Duration {
	end := r.calls[0].start
	for _, c := range r.calls {
		end = max(end, c.start)
	}
	for t := r.window; t <= end; t += 10 * time.Millisecond {
		callers := map[int]bool{}
		good := true
		for _, c := range r.calls {
			if c.start < t {
				continue
			}
			if !c.ok {
				good = false
				break
			}
			if c.start < t+2*quotaCadence {
				callers[c.caller] = true
			}
		}
		if good && len(callers) == quotaCallers {
			return t - r.window
		}
	}
	return -time.Second
}
