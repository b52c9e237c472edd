package grantretry

import (
	"net/http"
	"testing"

	"github.com/jarcoal/httpmock"
)

// Only a Retry-After that says when makes a 403 a quota: one that does not
// parse leaves the 403 the refusal it is.
func TestRefusalWhoseRetryAfterDoesNotParseIsTerminal(t *testing.T) {
	for _, v := range []string{"", "soon", "-5", "1.5", "tomorrow at noon"} {
		resp := &http.Response{StatusCode: 403, Header: http.Header{"Retry-After": {v}}}
		if c, ok := ClassifyLimits(resp, []byte(`{"message":"Forbidden"}`)); ok {
			t.Errorf("Retry-After %q: ClassifyLimits = %+v, want no verdict", v, c)
		}
		h := newHarness(t)
		h.mock.RegisterResponder(http.MethodPost, funderURL,
			httpmock.NewStringResponder(403, `{"message":"Forbidden"}`).HeaderSet(http.Header{"Retry-After": {v}}))
		if o := callOnce(t, h); o.StopReason != StopTerminal || o.Reason != "terminal:403" {
			t.Errorf("Retry-After %q: stop %s, reason %s; want terminal, terminal:403", v, o.StopReason, o.Reason)
		}
	}
	for _, v := range []string{"600", "Fri, 04 Dec 2026 23:00:00 GMT"} {
		resp := &http.Response{StatusCode: 403, Header: http.Header{"Retry-After": {v}}}
		if c, ok := ClassifyLimits(resp, nil); !ok || c.Reason != "quota:retry_after" {
			t.Errorf("Retry-After %q: ClassifyLimits = %+v, %v; want quota:retry_after", v, c, ok)
		}
	}
}
