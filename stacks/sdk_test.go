package stacks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/go-resty/resty/v2"
	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/stacks/internal/funderapi"
)

// newFunderAPI builds the oapi-codegen client over grantretry: its
// WithHTTPClient takes any HttpRequestDoer, and an *http.Client is one.
func newFunderAPI(server string, tr *grantretry.Transport) (*funderapi.ClientWithResponses, error) {
	return funderapi.NewClientWithResponses(server, funderapi.WithHTTPClient(&http.Client{Transport: tr}))
}

// submitThroughAPI names the submission in the context the generated
// method takes, and reads the call's outcome from r.HTTPResponse.
func submitThroughAPI(ctx context.Context, api *funderapi.ClientWithResponses, app funderapi.Application) (string, grantretry.Outcome, error) {
	r, err := api.SubmitApplicationWithResponse(grantretry.WithSubmissionID(ctx, app.ApplicationId), app)
	if err != nil {
		return "", grantretry.Outcome{}, err // no response: a *grantretry.Error says why
	}
	out, _ := grantretry.OutcomeOf(r.HTTPResponse)
	if r.JSON201 == nil {
		return "", out, fmt.Errorf("%s: %s (%s) after %d attempts, status %d",
			app.ApplicationId, out.Disposition, out.StopReason, out.Attempts, out.Status)
	}
	return r.JSON201.Reference, out, nil
}

// submitThroughResty does the same with resty, whose Response keeps the
// net/http response in RawResponse.
func submitThroughResty(ctx context.Context, client *resty.Client, url string, app funderapi.Application) (string, grantretry.Outcome, error) {
	var receipt funderapi.Receipt
	resp, err := client.R().SetContext(grantretry.WithSubmissionID(ctx, app.ApplicationId)).
		SetBody(app).SetResult(&receipt).Post(url)
	if err != nil {
		return "", grantretry.Outcome{}, err
	}
	out, _ := grantretry.OutcomeOf(resp.RawResponse)
	if out.Disposition != grantretry.Succeeded {
		return "", out, fmt.Errorf("%s: %s (%s) after %d attempts, status %d",
			app.ApplicationId, out.Disposition, out.StopReason, out.Attempts, out.Status)
	}
	return receipt.Reference, out, nil
}

// Through the generated client and through resty, grantretry retries a
// 503, stops at a 422, and gives up on a funder that stays down with the
// outcome still readable, under the same Idempotency-Key on every attempt.
func TestSDKClientsReadTheOutcome(t *testing.T) {
	sdks := []struct {
		name   string
		submit func(t *testing.T, tr *grantretry.Transport, f *funder, app funderapi.Application) (string, grantretry.Outcome, error)
	}{
		{"oapi-codegen", func(t *testing.T, tr *grantretry.Transport, f *funder, app funderapi.Application) (string, grantretry.Outcome, error) {
			api, err := newFunderAPI(f.srv.URL, tr)
			if err != nil {
				t.Fatal(err)
			}
			return submitThroughAPI(context.Background(), api, app)
		}},
		{"resty", func(t *testing.T, tr *grantretry.Transport, f *funder, app funderapi.Application) (string, grantretry.Outcome, error) {
			return submitThroughResty(context.Background(), newRestyFunderClient(tr), f.url(), app)
		}},
	}
	cases := []struct {
		name        string
		script      []int
		disposition grantretry.Disposition
		attempts    int
	}{
		{"503 then 201", []int{http.StatusServiceUnavailable, http.StatusCreated}, grantretry.Succeeded, 2},
		{"422", []int{http.StatusUnprocessableEntity}, grantretry.FailedTerminal, 1},
		{"always 503", []int{http.StatusServiceUnavailable}, grantretry.DeadLetter, grantretry.DefaultMaxRetries + 1},
	}
	for _, sdk := range sdks {
		for _, c := range cases {
			t.Run(sdk.name+"/"+c.name, func(t *testing.T) {
				f := newFunder(t, c.script...)
				tr := grantretry.New(nil, grantretry.WithClock(&stepClock{now: testClock}))
				defer tr.CloseIdleConnections()
				app := funderapi.Application{ApplicationId: "GRANT-42", Applicant: "Example Foundation", AmountRequested: 50000}
				ref, out, err := sdk.submit(t, tr, f, app)
				if out.Disposition != c.disposition || out.Attempts != c.attempts || out.SubmissionID != app.ApplicationId {
					t.Fatalf("outcome %+v, want %s after %d attempts, submission %s", out, c.disposition, c.attempts, app.ApplicationId)
				}
				var ge *grantretry.Error
				if (err == nil) != (c.disposition == grantretry.Succeeded) || errors.As(err, &ge) {
					t.Fatalf("error %v: want one exactly when the call did not succeed, and a response with it", err)
				}
				if c.disposition == grantretry.Succeeded && ref != "R-2026-0042" {
					t.Fatalf("reference %q, want R-2026-0042", ref)
				}
				reqs := f.requests()
				if n, all := distinct(reqs, grantretry.HeaderIdempotencyKey); len(reqs) != c.attempts || n != 1 || !all ||
					reqs[0].Get(grantretry.HeaderIdempotencyKey) != out.IdempotencyKey {
					t.Fatalf("%d requests with %d distinct keys (all set: %v), want %d with the outcome's key", len(reqs), n, all, c.attempts)
				}
			})
		}
	}
}
