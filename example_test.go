package grantretry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
)

// noWait skips the backoff waits so the examples run instantly; leave the
// default clock in production.
type noWait struct{}

func (noWait) Now() time.Time                                   { return time.Now() }
func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// flakyFunder answers 503 twice, then 201.
func flakyFunder() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
}

// Wrap the client a pipeline already has; name the submission on the
// request's context so its Idempotency-Key is stable across retries.
func Example() {
	funder := flakyFunder()
	defer funder.Close()

	client := &http.Client{Transport: grantretry.New(nil, grantretry.WithClock(noWait{}))}

	ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")
	payload := []byte(`{"applicant":"Riverbend Food Bank","amount":125000}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, funder.URL+"/applications", bytes.NewReader(payload))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()

	o, _ := grantretry.OutcomeOf(resp)
	fmt.Println(resp.StatusCode, o.Disposition, o.Attempts, o.IdempotencyKey)
	// Output: 201 succeeded 3 grant-61b72aae58cb04ed29b9364648a71a1b
}

// A response is returned with a nil error whatever its status; OutcomeOf
// says how the call ended.
func ExampleOutcomeOf() {
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"budget narrative missing"}`, http.StatusUnprocessableEntity)
	}))
	defer funder.Close()

	client := &http.Client{Transport: grantretry.New(nil)}
	resp, err := client.Post(funder.URL, "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	fmt.Println(resp.StatusCode, o.Disposition, o.Attempts, o.Reason)
	// Output: 422 failed_terminal 1 terminal:422
}

// When no response was obtained the error is an *Error: its Outcome says
// how the call ended, and errors.Is matches the sentinels.
func ExampleError() {
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer funder.Close()

	tr := grantretry.New(nil, grantretry.WithClock(noWait{}), grantretry.WithBudget(1, time.Minute),
		grantretry.WithBreaker(2, time.Minute))
	client := &http.Client{Transport: tr}
	// Each call's failures count once: the first call's retry does not
	// open the breaker, the second call's first failure does.
	for i := 0; i < 3; i++ {
		resp, err := client.Get(funder.URL)
		if err == nil {
			o, _ := grantretry.OutcomeOf(resp)
			fmt.Println(resp.StatusCode, o.Disposition, o.Attempts)
			resp.Body.Close()
			continue
		}
		var e *grantretry.Error
		if errors.As(err, &e) {
			fmt.Println(e.Disposition, e.Attempts, errors.Is(err, grantretry.ErrCircuitOpen))
		}
	}
	// Output:
	// 503 dead_letter 2
	// 503 circuit_open 1
	// circuit_open 0 true
}

func ExampleIdempotencyKey() {
	fmt.Println(grantretry.IdempotencyKey("GRANT-2026-0042", []byte(`{"amount":125000}`)))
	// Output: grant-49e7fc8413d1f4f3f30521114a1784f5
}

func ExampleClassify() {
	for _, status := range []int{201, 422, 429, 503, 418} {
		c := grantretry.Classify(status, nil)
		fmt.Println(status, c.Retryable, c.Reason)
	}
	fmt.Println(grantretry.Classify(0, context.Canceled).Reason)
	// Output:
	// 201 false ok:201
	// 422 false terminal:422
	// 429 true transient:429
	// 503 true transient:503
	// 418 false unclassified:418
	// transport:canceled
}

func ExampleFullJitter() {
	// Retry 3 waits a uniform draw from [0, min(30s, 500ms*2^3)] = [0, 4s].
	d := grantretry.FullJitter(3, 500*time.Millisecond, 30*time.Second)
	fmt.Println(d >= 0 && d <= 4*time.Second)
	// Output: true
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Mon, 30 Nov 2026 09:05:00 GMT", "1.5", "-3"} {
		d, ok := grantretry.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 5m0s true
	// 0s false
	// 0s false
}
