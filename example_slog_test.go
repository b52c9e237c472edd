package grantretry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
)

// stoppedClock reads one time and sleeps no time: the example's waits and
// elapsed times are zero, and its output the same at every run.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time                                   { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) }
func (stoppedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// answers is an inner transport that answers with its statuses in turn.
type answers []int

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	status := (*a)[0]
	*a = (*a)[1:]
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// The audit lines go to a log/slog logger: the same messages, levels and
// fields as the zap lines of WithLogger. ReplaceAttr takes out what
// changes from run to run: the time and the attempt's latency.
func ExampleWithSlog() {
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == grantretry.FieldLatency {
				return slog.Attr{}
			}
			return a
		},
	})
	tr := grantretry.New(&answers{503, 201},
		grantretry.WithSlog(slog.New(h)),
		grantretry.WithClock(stoppedClock{}),
		grantretry.WithRandSource(rand.NewPCG(1, 2)),
	)

	ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://funder.example/v1/status", nil)
	req.Header.Set(grantretry.HeaderCorrelationID, "0123456789abcdef")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	// Output:
	// level=INFO msg=grantretry.attempt correlation_id=0123456789abcdef idempotency_key="" submission_id=GRANT-2026-0042 method=GET host=funder.example path=/v1/status attempt=1 status=503 error="" reason=transient:503 retryable=true wait=384.686635ms wait_source=backoff elapsed=0s
	// level=INFO msg=grantretry.attempt correlation_id=0123456789abcdef idempotency_key="" submission_id=GRANT-2026-0042 method=GET host=funder.example path=/v1/status attempt=2 status=201 error="" reason=ok:201 retryable=false wait=0s wait_source="" elapsed=0s
	// level=INFO msg=grantretry.disposition correlation_id=0123456789abcdef idempotency_key="" submission_id=GRANT-2026-0042 method=GET host=funder.example path=/v1/status disposition=succeeded attempts=2 stop_reason=success status=201 reason=ok:201 error="" payload_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 payload_bytes=0 not_replayable="" elapsed=0s dead_letter_id="" record_error="" reconciles=0 ambiguous=false
}

// A status poll makes one attempt, whatever the Transport's budget: its
// options ride on the request's context.
func ExampleWithCallOptions() {
	tr := grantretry.New(&answers{503, 503, 201}, grantretry.WithClock(stoppedClock{}))

	poll := grantretry.WithCallOptions(context.Background(), grantretry.WithBudget(0, 10*time.Second))
	req, _ := http.NewRequestWithContext(poll, http.MethodGet, "https://funder.example/v1/status", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	fmt.Println("poll:", resp.StatusCode, o.Disposition, o.Attempts)

	req, _ = http.NewRequest(http.MethodGet, "https://funder.example/v1/status", nil)
	resp, err = tr.RoundTrip(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	o, _ = grantretry.OutcomeOf(resp)
	fmt.Println("call:", resp.StatusCode, o.Disposition, o.Attempts)

	bad := grantretry.WithCallOptions(context.Background(), grantretry.WithReplayLimit(1<<20))
	req, _ = http.NewRequestWithContext(bad, http.MethodGet, "https://funder.example/v1/status", nil)
	_, err = tr.RoundTrip(req)
	fmt.Println(err)
	// Output:
	// poll: 503 dead_letter 1
	// call: 201 succeeded 2
	// grantretry: dead_letter (invalid_option) after 0 attempts: grantretry: invalid option: WithCallOptions: option 1 (WithReplayLimit) is not part of the retry policy, and cannot be set for one call
}
