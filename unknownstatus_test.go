package grantretry

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A status of 600 to 999 belongs to no HTTP class: the library cannot read
// it, so the call fails loud, once, as for any unknown status, and nothing
// in it says the funder did not apply the request, so the attempt is
// ambiguous, as a 500 is. A status the library reads as a refusal (4xx),
// or as not carried out (501, 503), is not.
func TestStatusAbove599FailsLoudAndIsAmbiguous(t *testing.T) {
	for _, c := range []struct {
		status          int
		disposition     Disposition
		attempts        int
		ambiguous       bool
		reason, stopped string
	}{
		{600, FailedTerminal, 1, true, "unclassified:600", StopTerminal},
		{799, FailedTerminal, 1, true, "unclassified:799", StopTerminal},
		{999, FailedTerminal, 1, true, "unclassified:999", StopTerminal},
		{599, FailedTerminal, 1, true, "unclassified:599", StopTerminal},
		{505, FailedTerminal, 1, true, "unclassified:505", StopTerminal},
		{501, FailedTerminal, 1, false, "unclassified:501", StopTerminal},
		{418, FailedTerminal, 1, false, "unclassified:418", StopTerminal},
		{422, FailedTerminal, 1, false, "terminal:422", StopTerminal},
	} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			if v := Classify(c.status, nil); v.Retryable || v.Reason != c.reason {
				t.Fatalf("Classify(%d) = %+v, want terminal %s", c.status, v, c.reason)
			}
			asked := 0
			h := newHarness(t, WithReconciler(func(context.Context, ReconcileQuery) (*http.Response, error) {
				asked++
				return nil, nil
			}))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(c.status))
			req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader(`{"application":1}`))
			resp, err := h.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o := mustOutcome(t, resp)
			if o.Disposition != c.disposition || o.StopReason != c.stopped || o.Attempts != c.attempts || o.Reason != c.reason {
				t.Errorf("outcome %+v, want %s (%s) after %d attempt, %s", o, c.disposition, c.stopped, c.attempts, c.reason)
			}
			if o.Ambiguous != c.ambiguous {
				t.Errorf("Outcome.Ambiguous = %v, want %v", o.Ambiguous, c.ambiguous)
			}
			if asked != 0 || o.Reconciles != 0 {
				t.Errorf("the reconciler was asked %d times about a call that is not sent again", asked)
			}
			lines := h.dispositionLines()
			if len(lines) != 1 || lines[0].ContextMap()[FieldAmbiguous] != c.ambiguous {
				t.Errorf("disposition lines %v, want one with %s %v", lines, FieldAmbiguous, c.ambiguous)
			}
		})
	}
}
