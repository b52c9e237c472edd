package simplergrants_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

// pipeline is a client as a pipeline builds it: the credentials, under
// grantretry with ClassifyFault and the Reconciler, on a clock that never
// waits.
func pipeline(t *testing.T, a *fakesimpler.API, client *http.Client) *http.Client {
	t.Helper()
	return pipelineOver(t, a, client, credentials{a.Client().Transport})
}

func pipelineOver(t *testing.T, a *fakesimpler.API, client *http.Client, inner http.RoundTripper) *http.Client {
	t.Helper()
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	tr := grantretry.New(inner,
		grantretry.WithClassifier(simplergrants.ClassifyFault),
		grantretry.WithReconciler(rec.Reconcile),
		grantretry.WithClock(fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}),
		grantretry.WithBudget(3, time.Minute),
		grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

func send(t *testing.T, c *http.Client, req *http.Request) (*http.Response, grantretry.Outcome) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := grantretry.OutcomeOf(resp)
	return resp, o
}

// A start whose connection drops after the API created the application is
// found by its name, and not sent again.
func TestDroppedStartIsReconciledNotStartedTwice(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	a.DropNext(1)
	ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
	resp, o := send(t, pipeline(t, a, client), startRequest(t, ctx, a.URL(), "sub-1"))
	defer resp.Body.Close()
	if o.StopReason != grantretry.StopReconciled || o.Attempts != 1 || resp.StatusCode != 200 {
		t.Errorf("outcome %+v, status %d; want reconciled after one attempt", o, resp.StatusCode)
	}
	apps := a.Applications()
	if len(apps) != 1 || applicationID(t, resp) != apps[0].ID {
		t.Errorf("the API holds %v; the caller was answered for another", apps)
	}
}

// A submit whose connection drops after the API submitted, and one the
// gateway gave up on at 29 s while the API submitted all the same, are
// found submitted, and not sent again.
func TestAmbiguousSubmitIsReconciledNotSubmittedTwice(t *testing.T) {
	for _, fault := range []string{"drop", "gateway timeout"} {
		t.Run(fault, func(t *testing.T) {
			a, client := startAPI(t, fakesimpler.Config{})
			id := startDirect(t, a, client, "sub-1")
			var inner http.RoundTripper = credentials{a.Client().Transport}
			if fault == "drop" {
				a.DropNext(1)
			} else {
				// The API is slow for the submit only: the question is answered.
				a.SetWork(time.Minute)
				inner = afterFirst{inner, func() { a.SetWork(0) }}
			}
			ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
			resp, o := send(t, pipelineOver(t, a, client, inner), submitRequest(t, ctx, a.URL(), id))
			resp.Body.Close()
			if o.StopReason != grantretry.StopReconciled || o.Attempts != 1 || resp.StatusCode != 200 {
				t.Errorf("outcome %+v, status %d; want reconciled after one attempt", o, resp.StatusCode)
			}
			if n := a.Ledger().Submitted[id]; n != 1 {
				t.Errorf("%d submits applied, want 1", n)
			}
		})
	}
}

// A submit the API has not applied is sent again after the question.
func TestSubmitNotAppliedIsSentAgain(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
	// The gateway's timeout with an API that has not got to the request:
	// the 504 without the work.
	gw := &onceGatewayTimeout{next: credentials{a.Client().Transport}}
	resp, o := send(t, pipelineOver(t, a, client, gw), submitRequest(t, ctx, a.URL(), id))
	resp.Body.Close()
	if o.StopReason != grantretry.StopSuccess || o.Attempts != 2 || o.Reconciles != 1 {
		t.Errorf("outcome %+v; want success on the second attempt after one question", o)
	}
	if n := a.Ledger().Submitted[id]; n != 1 {
		t.Errorf("%d submits applied, want 1", n)
	}
}

// onceGatewayTimeout answers the first request as the gateway does at
// 29 s, without passing it on.
type onceGatewayTimeout struct {
	next http.RoundTripper
	done bool
}

func (g *onceGatewayTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.done {
		return g.next.RoundTrip(r)
	}
	g.done = true
	if r.Body != nil {
		r.Body.Close()
	}
	return gatewayTimeoutResponse(r), nil
}

// afterFirst calls then after each round trip, the first included.
type afterFirst struct {
	next http.RoundTripper
	then func()
}

func (f afterFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(r)
	f.then()
	return resp, err
}
