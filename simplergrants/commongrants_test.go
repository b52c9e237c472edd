package simplergrants_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/simplergrants"
)

// The CommonGrants protocol's submit is a PUT whose refusal is an untyped
// {status, message, errors}: ClassifyFault leaves it to the status, and a
// 400 ends the call after one attempt.
func TestClassifyFaultLeavesACommonGrantsRefusalToTheStatus(t *testing.T) {
	status, h, body := serveSample(t, "commongrants-submit-invalid")
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range h {
			w.Header()[k] = vs
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	tr := grantretry.New(srv.Client().Transport, grantretry.WithClassifier(simplergrants.ClassifyFault),
		grantretry.WithClock(fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}),
		grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(context.Background(), "sub-1"), http.MethodPut,
		srv.URL+"/common-grants/applications/0f8e2d0a-1c3b-4e5f-8a9b-0c1d2e3f4a5b/submit", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if hits.Load() != 1 || o.Disposition != grantretry.FailedTerminal || o.Reason != "terminal:400" {
		t.Errorf("server saw %d; outcome %s, reason %q; want 1, failed_terminal, terminal:400", hits.Load(), o.Disposition, o.Reason)
	}
}

// The Reconciler knows the Simpler Grants.gov API's routes only: asked
// about a CommonGrants submit, it cannot tell, and the Transport would
// not send the submit again.
func TestReconcilerCannotTellACommonGrantsSubmit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the Reconciler asked %s %s", r.Method, r.URL.Path)
	}))
	defer srv.Close()
	rec := simplergrants.NewReconciler(srv.URL, srv.Client()).ForUser(userID)
	q := grantretry.ReconcileQuery{SubmissionID: "sub-1",
		Request: httptestRequest(t, http.MethodPut, srv.URL+"/common-grants/applications/0f8e2d0a-1c3b-4e5f-8a9b-0c1d2e3f4a5b/submit")}
	if resp, err := rec.Reconcile(context.Background(), q); resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
		t.Errorf("Reconcile = %v, %v; want it to say it cannot tell", resp, err)
	}
}
