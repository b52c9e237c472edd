package grantretry

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Reference check 2: full jitter stays in [0, min(cap, base*2^3)] and its
// samples are not all equal.
func TestFullJitterStaysUnderCeilingAndVaries(t *testing.T) {
	base, cap := 500*time.Millisecond, 30*time.Second
	ceiling := min(cap, base*8)
	seen := make(map[time.Duration]bool)
	for i := 0; i < 10000; i++ {
		d := FullJitter(3, base, cap)
		if d < 0 || d > ceiling {
			t.Fatalf("FullJitter(3) = %v, outside [0, %v]", d, ceiling)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct samples in 10000: the fleet would not de-correlate", len(seen))
	}
}

// The draw is uniform: its mean is near half the ceiling, and both halves of
// the window are used.
func TestFullJitterIsUniform(t *testing.T) {
	r := &lockedRand{r: rand.New(rand.NewPCG(1, 2))}
	const n = 20000
	ceiling := 4 * time.Second
	var sum float64
	low := 0
	for i := 0; i < n; i++ {
		d := fullJitter(r, 3, 500*time.Millisecond, 30*time.Second)
		sum += float64(d)
		if d < ceiling/2 {
			low++
		}
	}
	mean := sum / n / float64(ceiling)
	if mean < 0.48 || mean > 0.52 || low < n*48/100 || low > n*52/100 {
		t.Errorf("mean %.3f of the ceiling, %d of %d in the lower half: not uniform", mean, low, n)
	}
}

func TestBackoffCeilingNeverOverflows(t *testing.T) {
	cases := []struct {
		attempt   int
		base, cap time.Duration
		want      time.Duration
	}{
		{0, time.Second, time.Minute, time.Second},
		{3, 500 * time.Millisecond, 30 * time.Second, 4 * time.Second},
		{6, 500 * time.Millisecond, 30 * time.Second, 30 * time.Second},
		{62, time.Second, time.Minute, time.Minute},
		{63, time.Second, time.Minute, time.Minute},
		{1 << 30, time.Second, time.Minute, time.Minute},
		{math.MaxInt, time.Nanosecond, math.MaxInt64, math.MaxInt64},
		{-5, time.Second, time.Minute, time.Second},
		{2, 0, time.Minute, 0},
		{2, time.Second, 0, 0},
		{40, math.MaxInt64 / 2, math.MaxInt64, math.MaxInt64},
	}
	for _, c := range cases {
		if got := backoffCeiling(c.attempt, c.base, c.cap); got != c.want {
			t.Errorf("backoffCeiling(%d, %v, %v) = %v, want %v", c.attempt, c.base, c.cap, got, c.want)
		}
		for i := 0; i < 100; i++ {
			if d := FullJitter(c.attempt, c.base, c.cap); d < 0 || d > c.want {
				t.Fatalf("FullJitter(%d, %v, %v) = %v, outside [0, %v]", c.attempt, c.base, c.cap, d, c.want)
			}
		}
	}
}

func TestWithRandSourceIsReproducible(t *testing.T) {
	draw := func() []time.Duration {
		h := newHarness(t, WithRandSource(rand.NewPCG(7, 7)), WithoutBreaker(), WithoutRetryThrottle(), WithBudget(6, time.Hour))
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return h.clock.waits()
	}
	a, b := draw(), draw()
	if len(a) != 6 {
		t.Fatalf("%d waits, want 6", len(a))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different schedules: %v vs %v", a, b)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{" 120 ", 120 * time.Second, true},
		{"315360000", 315360000 * time.Second, true},                                // ten years
		{"99999999999999999999999", time.Duration(math.MaxInt64), true},             // saturates
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true}, // IMF-fixdate
		{"Monday, 30-Nov-26 09:02:00 GMT", 2 * time.Minute, true},                   // RFC 850
		{"Mon Nov 30 09:00:30 2026", 30 * time.Second, true},                        // asctime
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},                      // in the past
		{"", 0, false},
		{"   ", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"soon", 0, false},
		{"0x10", 0, false},
		{"Mon, 32 Nov 2026 09:00:00 GMT", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.wantOK)
		}
	}
}

// A repeated Retry-After is honoured by its longest valid value, and
// garbage among them is ignored.
func TestRepeatedRetryAfterTakesLongest(t *testing.T) {
	h := http.Header{"Retry-After": {"3", "garbage", "9", "-1"}}
	d, ok := retryAfter(h, time.Now())
	if !ok || d != 9*time.Second {
		t.Errorf("retryAfter = %v, %v; want 9s", d, ok)
	}
	if _, ok := retryAfter(http.Header{"Retry-After": {"nope"}}, time.Now()); ok {
		t.Error("garbage Retry-After accepted")
	}
}

// The wait is never shorter than the Retry-After, and never shorter than the
// jitter either.
func TestChooseWaitIsMaxOfJitterAndRetryAfter(t *testing.T) {
	if d, src := chooseWait(2*time.Second, 5*time.Second, true); d != 5*time.Second || src != waitSourceRetryAfter {
		t.Errorf("got %v %s", d, src)
	}
	if d, src := chooseWait(8*time.Second, 5*time.Second, true); d != 8*time.Second || src != waitSourceBackoff {
		t.Errorf("got %v %s", d, src)
	}
	if d, src := chooseWait(8*time.Second, 0, false); d != 8*time.Second || src != waitSourceBackoff {
		t.Errorf("got %v %s", d, src)
	}
}

// stillClock never moves and never sleeps, and holds no lock, so it adds no
// happens-before edge the race detector could hide a race behind.
type stillClock struct{}

func (stillClock) Now() time.Time { return time.Time{}.Add(time.Hour) }

func (stillClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// WithRandSource promises to serialise the caller's source (run with -race).
func TestRandSourceIsSerialised(t *testing.T) {
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(stillClock{}), WithRandSource(rand.NewPCG(1, 2)),
		WithoutBreaker(), WithoutRetryThrottle(), WithBudget(20, time.Hour))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	close(start)
	wg.Wait()
}
