package main

import (
	"context"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// frozenClock never moves, so the throttle gets no refill with time and
// the figures are gRFC A6's alone; a wait returns at once.
type frozenClock struct{}

func (frozenClock) Now() time.Time                                   { return time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC) }
func (frozenClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// flakyFunder answers /down with 503, /up with 200, and /blip with 503
// then 200: the call that shows whether a retry is allowed.
type flakyFunder struct{ blips int }

func (f *flakyFunder) RoundTrip(r *http.Request) (*http.Response, error) {
	status := http.StatusOK
	switch r.URL.Path {
	case "/down":
		status = http.StatusServiceUnavailable
	case "/blip":
		if f.blips++; f.blips == 1 {
			status = http.StatusServiceUnavailable
		}
	}
	return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// call makes one GET to path and returns its attempts.
func (f *flakyFunder) call(t *testing.T, tr http.RoundTripper, path string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://funder.example"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	o, ok := grantretry.OutcomeOf(resp)
	if !ok {
		t.Fatal("no outcome")
	}
	return o.Attempts
}

// retryAfterSuccesses empties a host's throttle, gives it n successes,
// and reports whether the next call that fails gets its retry.
func retryAfterSuccesses(t *testing.T, maxTokens, tokenRatio float64, n int) bool {
	t.Helper()
	f := &flakyFunder{}
	tr := grantretry.New(f, grantretry.WithClock(frozenClock{}), grantretry.WithoutBreaker(),
		grantretry.WithRetryThrottle(maxTokens, tokenRatio), grantretry.WithBudget(1, time.Hour))
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	for range int(maxTokens) + 1 { // each failed call takes at least one token
		f.call(t, tr, "/down")
	}
	for range n {
		f.call(t, tr, "/up")
	}
	return f.call(t, tr, "/blip") == 2
}

// successesToReopen is the fewest successes that bring an empty throttle
// back to allowing a retry, found by trying.
func successesToReopen(t *testing.T, maxTokens, tokenRatio float64) int {
	t.Helper()
	for n := 0; n <= 10_000; n++ {
		if retryAfterSuccesses(t, maxTokens, tokenRatio, n) {
			return n
		}
	}
	t.Fatalf("(%v, %v): no retry after 10,000 successes", maxTokens, tokenRatio)
	return 0
}

// reopenFormula is the figure docs/choosing-budgets.md gives:
// ⌊(maxTokens/2 + 1) / tokenRatio⌋ + 1. A failing call's own token is
// taken before the check, so n successes must leave more than
// maxTokens/2 + 1. It is worked in thousandths, as the throttle counts.
func reopenFormula(maxTokens, tokenRatio float64) int {
	m, r := int64(math.Round(maxTokens*1000)), int64(math.Round(tokenRatio*1000))
	return int((m/2+1000)/r + 1)
}

func TestThrottleReopenFigureIsWhatTheThrottleDoes(t *testing.T) {
	for _, c := range []struct {
		maxTokens, tokenRatio float64
		want                  int
	}{
		{10, 0.1, 61}, // the defaults
		{4, 0.2, 16},
		{20, 0.5, 23},
		{10, 0.35, 18},
		{7, 0.3, 16},
	} {
		got := successesToReopen(t, c.maxTokens, c.tokenRatio)
		if got != c.want || reopenFormula(c.maxTokens, c.tokenRatio) != got {
			t.Errorf("(%v, %v): %d successes reopen an empty throttle; the formula gives %d, the table %d",
				c.maxTokens, c.tokenRatio, got, reopenFormula(c.maxTokens, c.tokenRatio), c.want)
		}
	}
	root := repoRoot(t)
	for _, c := range []struct{ page, text string }{
		{"docs/choosing-budgets.md", "⌊(maxTokens/2 + 1) / tokenRatio⌋ + 1 successes (61 with the defaults"},
		{"docs/choosing-budgets.md", "16 for `WithRetryThrottle(4, 0.2)`, 23 for `(20, 0.5)`"},
		{"docs/choosing-budgets.md", "wait more than an hour for 61 successes"},
		{"docs/choosing-budgets.md", "(61 from empty)"},
		{"docs/policy.md", "61 successes in a row"},
		{"docs/policy.md", "⌊(maxTokens/2 + 1) / tokenRatio⌋ + 1 for other settings"},
	} {
		data, err := os.ReadFile(filepath.Join(root, c.page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(oneLine(string(data)), c.text) {
			t.Errorf("%s does not say %q", c.page, c.text)
		}
	}
}

// oneLine joins a page's wrapped lines, so a phrase may be looked for
// whatever its line breaks.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
