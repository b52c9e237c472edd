// Package pipeline is the piece of a grant pipeline that submits
// applications to a funder through grantretry, and the example of how a
// pipeline team tests such code with httpmock: the tests in this directory
// put an httpmock.MockTransport under grantretry, script the funder with
// responders, and run every retry schedule on a fake clock. See README.md.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/grantretry/grantretry"
)

// The pipeline's retry policy, as it would run in production.
const (
	// MaxRetries is how many times one submission is retried before it is
	// handed back as RetryLater.
	MaxRetries = 3
	// Deadline bounds one submission, waits included.
	Deadline = 2 * time.Minute
	// BreakerThreshold is how many failed submissions in a row stop the
	// pipeline from calling a funder (a submission's retries count once).
	BreakerThreshold = 5
	// BreakerCooldown is the longest the funder is then left alone between
	// two probes: the first comes after grantretry.DefaultBreakerProbe.
	BreakerCooldown = 2 * time.Minute
)

// maxResponseBytes bounds how much of a funder's answer is read.
const maxResponseBytes = 1 << 20

// NewHTTPClient returns the client the pipeline submits through: the
// pipeline's retry policy over inner. Production passes a nil inner
// (grantretry's pooled transport) and no options; tests pass an
// httpmock.MockTransport and a fake clock. Options in extra are applied
// after the policy's own, so they can override it.
func NewHTTPClient(inner http.RoundTripper, extra ...grantretry.Option) *http.Client {
	opts := append([]grantretry.Option{
		grantretry.WithBudget(MaxRetries, Deadline),
		grantretry.WithBreaker(BreakerThreshold, BreakerCooldown),
	}, extra...)
	return &http.Client{Transport: grantretry.New(inner, opts...)}
}

// Application is what the pipeline submits.
type Application struct {
	ID        string `json:"application_id"` // the pipeline's own id, also the submission id
	Applicant string `json:"applicant"`
	Amount    int64  `json:"amount_requested"`
}

// Action is what the pipeline does with an application after one
// submission.
type Action int

const (
	// Submitted: the funder accepted it; record the reference.
	Submitted Action = iota + 1
	// Rejected: the funder refused it for good (a 4xx); a person must fix
	// the application. Resending it unchanged would be refused again.
	Rejected
	// RetryLater: the funder could not be reached or kept failing; the
	// work is still owed. Resubmit the same application under the same id
	// later: the Idempotency-Key will be the same, so a funder that did
	// record it answers with the original result.
	RetryLater
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case Submitted:
		return "submitted"
	case Rejected:
		return "rejected"
	case RetryLater:
		return "retry_later"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Result is one submission as the pipeline acts on it.
type Result struct {
	Action  Action
	Outcome grantretry.Outcome // how the call ended: disposition, attempts, key
	// Reference is the funder's id of the application, when Submitted.
	Reference string
	// RetryAfter is the wait the funder asked for on its last answer, when
	// RetryLater and it sent one: the earliest time to resubmit.
	RetryAfter time.Duration
}

// Submitter submits applications to one funder endpoint. It is safe for
// concurrent use, as its *http.Client is.
type Submitter struct {
	client   *http.Client
	endpoint string
}

// NewSubmitter returns a Submitter that posts to endpoint through client,
// normally one built by NewHTTPClient.
func NewSubmitter(client *http.Client, endpoint string) *Submitter {
	return &Submitter{client: client, endpoint: endpoint}
}

// Submit posts app once, under grantretry's policy, and says what to do
// next. A failed submission is a Result, not an error: the error is for a
// request that could not be built, the caller's own cancellation, and a
// response the pipeline does not understand (the Result then still holds
// the call's Outcome, when there is one, for the log).
func (s *Submitter) Submit(ctx context.Context, app Application) (Result, error) {
	body, err := json.Marshal(app)
	if err != nil {
		return Result{}, fmt.Errorf("pipeline: encoding %s: %w", app.ID, err)
	}
	ctx = grantretry.WithSubmissionID(ctx, app.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("pipeline: %s: %w", app.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")

	resp, err := s.client.Do(req)
	if err != nil {
		var gerr *grantretry.Error
		if !errors.As(err, &gerr) {
			return Result{}, fmt.Errorf("pipeline: submitting %s: %w", app.ID, err)
		}
		return fromOutcome(gerr.Outcome, err)
	}
	defer resp.Body.Close()
	o, ok := grantretry.OutcomeOf(resp)
	if !ok {
		return Result{}, fmt.Errorf("pipeline: submitting %s: the client is not built on grantretry", app.ID)
	}
	r, err := fromOutcome(o, nil)
	if err != nil {
		return r, err
	}
	switch r.Action {
	case Submitted:
		return r, readReference(resp, &r)
	case RetryLater:
		r.RetryAfter, _ = grantretry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return r, nil
}

// fromOutcome maps how the call ended to what the pipeline does. cause is
// the call's error when it obtained no response.
func fromOutcome(o grantretry.Outcome, cause error) (Result, error) {
	r := Result{Outcome: o}
	switch o.Disposition {
	case grantretry.Succeeded:
		r.Action = Submitted
	case grantretry.FailedTerminal:
		r.Action = Rejected
	case grantretry.DeadLetter, grantretry.CircuitOpen:
		r.Action = RetryLater
	default: // Canceled: the caller gave up, which is the caller's to handle
		if cause == nil {
			cause = context.Canceled
		}
		return r, fmt.Errorf("pipeline: submitting %s: %w", o.SubmissionID, cause)
	}
	return r, nil
}

// readReference reads the funder's reference from an accepted submission.
func readReference(resp *http.Response, r *Result) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("pipeline: submitting %s: unexpected status %d", r.Outcome.SubmissionID, resp.StatusCode)
	}
	var ack struct {
		Reference string `json:"reference"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&ack); err != nil {
		return fmt.Errorf("pipeline: submitting %s: reading the funder's answer: %w", r.Outcome.SubmissionID, err)
	}
	r.Reference = ack.Reference
	return nil
}
