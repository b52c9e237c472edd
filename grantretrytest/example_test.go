package grantretrytest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantretrytest"
	"github.com/grantretry/grantretry/grantsgov"
)

// submit is a pipeline's own code: it posts an application through client
// and returns the reference the funder gave it, with how the call went.
func submit(ctx context.Context, client *http.Client, url, application string) (string, grantretry.Outcome, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(application))
	if err != nil {
		return "", grantretry.Outcome{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ge *grantretry.Error
		if errors.As(err, &ge) {
			return "", ge.Outcome, err
		}
		return "", grantretry.Outcome{}, err
	}
	defer resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	if resp.StatusCode != http.StatusCreated {
		return "", out, fmt.Errorf("the funder answered %s", resp.Status)
	}
	var r struct {
		Reference string `json:"reference"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
		return "", out, err
	}
	return r.Reference, out, nil
}

// fiveAttemptCall runs submit over a Funder that answers 503 four times
// and then 201: a call of five attempts, under grantretry's default policy
// but for opts.
func fiveAttemptCall(opts ...grantretry.Option) (*grantretrytest.Funder, string, grantretry.Outcome, error) {
	f := grantretrytest.NewFunder(slices.Concat(
		slices.Repeat([]grantretrytest.Answer{grantretrytest.Reply(503, "busy")}, 4),
		[]grantretrytest.Answer{grantretrytest.Reply(201, `{"reference":"FND-0001"}`)},
	)...)
	client := &http.Client{Transport: grantretry.New(f, opts...)}
	ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")
	ref, out, err := submit(ctx, client, "https://funder.example/v1/applications", `{"amount_requested":125000}`)
	return f, ref, out, err
}

// noWait is a grantretry.Clock that skips every wait: outside a
// testing/synctest bubble, it keeps an Example from sleeping the backoff.
type noWait struct{}

func (noWait) Now() time.Time                                   { return time.Now() }
func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// A funder that is busy, then takes the application and drops the
// connection before answering, then answers the resend with a 201.
// grantretry sends the same Idempotency-Key each time; the Funder's record
// shows which attempts it processed.
func ExampleNewFunder() {
	f := grantretrytest.NewFunder(
		grantretrytest.Reply(503, "busy"),
		grantretrytest.DropAfterRead(),
		grantretrytest.Reply(201, `{"reference":"FND-0001"}`),
	)
	client := &http.Client{Transport: grantretry.New(f, grantretry.WithClock(noWait{}))}
	ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")

	ref, out, err := submit(ctx, client, "https://funder.example/v1/applications", `{"amount_requested":125000}`)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(ref, out.Disposition, "after", out.Attempts, "attempts")
	reqs := f.Requests()
	fmt.Println("one key:", reqs[0].Key == reqs[2].Key, "processed:", f.Processed(reqs[0].Key), "of", f.Count(reqs[0].Key))
	fmt.Println("script used up:", f.Remaining() == 0, "error:", f.Err())
	// Output:
	// FND-0001 succeeded after 3 attempts
	// one key: true processed: 3 of 3
	// script used up: true error: <nil>
}

// The call of TestFiveAttemptCallInASynctestBubbleTakesNoWallTime: four
// 503s and a 201, five attempts. That test runs it under grantretry's
// default policy inside synctest.Test, where the seconds of backoff pass
// in no wall time. An Example cannot: synctest.Test needs the test's
// *testing.T. So here, outside a bubble, a Clock skips the waits; in a
// test, wrap the call in synctest.Test as the package documentation
// shows, and leave the policy as production runs it.
func Example_synctest() {
	f, ref, out, err := fiveAttemptCall(grantretry.WithClock(noWait{}))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(ref, out.Disposition, "after", out.Attempts, "attempts;", "the funder got", len(f.Requests()))
	// Output: FND-0001 succeeded after 5 attempts; the funder got 5
}

// A Grants.gov S2S client under grantsgov.ClassifyFault: the service's
// generic server error is an outage, retried; a schema-validation failure
// is a refusal, which no resend can change. Both are 500s with the fault
// code soap:Server, as the service sends every fault.
func ExampleSOAPFault() {
	f := grantretrytest.NewFunder(
		grantretrytest.SOAPFault("Server error has occurred"),
		grantretrytest.SOAPFault("Failed to validate request. cvc-complex-type.2.4.a: Invalid content was found."),
	)
	client := &http.Client{Transport: grantretry.New(f,
		grantretry.WithClassifier(grantsgov.ClassifyFault), grantretry.WithClock(noWait{}))}
	req, _ := http.NewRequest(http.MethodPost, "https://ws07.grants.gov/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort",
		strings.NewReader("<soap:Envelope/>"))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	fmt.Println(out.Disposition, "after", out.Attempts, "attempts:", out.Reason)
	// Output: failed_terminal after 2 attempts: terminal:500;grantsgov:validation
}
