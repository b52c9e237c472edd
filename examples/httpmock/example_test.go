package pipeline_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/grantretry/grantretry"
	pipeline "github.com/grantretry/grantretry/examples/httpmock"
	"github.com/jarcoal/httpmock"
)

// noWait is a grantretry.Clock that skips every wait.
type noWait struct{}

func (noWait) Now() time.Time                                   { return time.Now() }
func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// The pattern: a MockTransport as grantretry's inner transport, a
// responder script for the funder, a clock that does not sleep.
func Example() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodPost, "https://funder.example/v1/applications",
		httpmock.NewStringResponder(503, "busy").
			Then(httpmock.NewStringResponder(201, `{"reference":"FND-0001"}`)))

	client := pipeline.NewHTTPClient(mock, grantretry.WithClock(noWait{}))
	sub := pipeline.NewSubmitter(client, "https://funder.example/v1/applications")
	r, err := sub.Submit(context.Background(), pipeline.Application{ID: "GRANT-2026-0042", Amount: 125000})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(r.Action, r.Reference, r.Outcome.Attempts, mock.GetTotalCallCount())
	// Output: submitted FND-0001 2 2
}
