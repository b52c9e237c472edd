package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// soakFunder is a loopback funder that deduplicates by Idempotency-Key and
// misbehaves at random: 503s, 429s with Retry-After 0, a connection
// dropped after the submission was applied (the duplicate-submission
// case), and slow answers. It records, per application, the keys under
// which it applied it: a deduplicating funder applies a key once, so two
// keys for one application are a duplicate submission. It also counts open
// connections.
type soakFunder struct {
	srv     *httptest.Server
	mu      sync.Mutex
	applied map[string]map[string]bool // application -> keys applied
	open    atomic.Int64
	seq     atomic.Uint64
}

func newSoakFunder(t *testing.T, seed uint64) *soakFunder {
	f := &soakFunder{applied: map[string]map[string]bool{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(HeaderIdempotencyKey)
		body, _ := io.ReadAll(r.Body)
		app := string(body)
		rnd := rand.New(rand.NewPCG(seed, f.seq.Add(1)))
		switch roll := rnd.IntN(100); {
		case roll < 15:
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		case roll < 20:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		case roll < 25:
			f.apply(app, key)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close() // applied, but the answer is lost
					return
				}
			}
		case roll < 30:
			time.Sleep(time.Duration(rnd.IntN(5)) * time.Millisecond)
		}
		f.apply(app, key)
		w.WriteHeader(http.StatusCreated)
	}))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			f.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			f.open.Add(-1)
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *soakFunder) apply(app, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applied[app] == nil {
		f.applied[app] = map[string]bool{}
	}
	if key == "" { // no key: nothing to deduplicate by, every request is an effect
		key = fmt.Sprint("unkeyed-", len(f.applied[app]))
	}
	f.applied[app][key] = true
}

// effects is how many times the funder applied an application.
func (f *soakFunder) effects(app string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied[app])
}

// soakSize is the number of calls: a short default for go test ./..., more
// with GRANTRETRY_SOAK_CALLS for release checks.
func soakSize(t *testing.T) int {
	if v := os.Getenv("GRANTRETRY_SOAK_CALLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("GRANTRETRY_SOAK_CALLS=%q: want a positive count", v)
		}
		return n
	}
	return 2000
}

// Thousands of concurrent submissions across several hosts, each host
// misbehaving at random: every call ends with a disposition by its
// deadline, a succeeded call took effect exactly once, no key took effect
// twice, and every connection is returned and then closed.
func TestSoakConcurrentSubmissionsAcrossFaultyHosts(t *testing.T) {
	const hosts, workers = 3, 64
	calls := soakSize(t)
	funders := make([]*soakFunder, hosts)
	for i := range funders {
		funders[i] = newSoakFunder(t, uint64(i+1))
	}
	inner := &http.Transport{MaxIdleConnsPerHost: 8}
	tr := New(inner, WithBackoff(time.Millisecond, 20*time.Millisecond), WithBudget(6, 5*time.Second),
		WithAttemptTimeout(2*time.Second), WithoutBreaker(), WithRetryThrottle(1000, 1))
	client := &http.Client{Transport: tr}

	type result struct {
		app  string
		host int
		o    Outcome
		took time.Duration
	}
	results := make([]result, calls)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				host := i % hosts
				ctx := WithSubmissionID(context.Background(), fmt.Sprintf("SOAK-%06d", i))
				app := fmt.Sprintf(`{"application":%d}`, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, funders[host].srv.URL+"/apply",
					strings.NewReader(app))
				start := time.Now()
				resp, err := client.Do(req)
				r := result{app: app, host: host, took: time.Since(start)}
				if err != nil {
					var e *Error
					if !errors.As(err, &e) {
						t.Errorf("call %d: %v is no *Error", i, err)
						continue
					}
					r.o = e.Outcome
				} else {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.o = mustOutcome(t, resp)
				}
				results[i] = r
			}
		}()
	}
	for i := 0; i < calls; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	dispositions := map[Disposition]int{}
	for i, r := range results {
		dispositions[r.o.Disposition]++
		if r.o.Disposition == "" {
			t.Fatalf("call %d ended with no disposition", i)
		}
		if r.took > 5*time.Second+time.Second {
			t.Errorf("call %d took %v, past its 5s deadline", i, r.took)
		}
		if r.o.Attempts > 7 {
			t.Errorf("call %d made %d attempts, budget 6 retries", i, r.o.Attempts)
		}
		n := funders[r.host].effects(r.app)
		if n > 1 || (r.o.Disposition == Succeeded && n != 1) {
			t.Errorf("call %d ended %s and took effect %d times", i, r.o.Disposition, n)
		}
	}
	if dispositions[Succeeded] < calls*9/10 {
		t.Errorf("dispositions %v: under 90%% succeeded against funders that fail ~25%% of attempts", dispositions)
	}

	inner.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for _, f := range funders {
		for f.open.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := f.open.Load(); n > 0 {
			t.Errorf("%d connections still open at a funder after CloseIdleConnections", n)
		}
	}
	t.Logf("%d calls: %v", calls, dispositions)
}
