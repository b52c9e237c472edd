package grantretry

import (
	"net/http"
	"testing"
	"time"
)

// Outcome.NotBefore belongs to an owed call alone: a verdict that is not
// Owed but carries a NotBefore ends terminal or with its retries spent,
// and its NotBefore is not the outcome's.
func TestNotBeforeIsZeroUnlessTheCallIsOwed(t *testing.T) {
	until := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		retryable bool
		stop      string
	}{
		{false, StopTerminal},
		{true, StopRetriesSpent},
	} {
		h := newHarness(t, WithClassifier(func(*http.Response, []byte) (Classification, bool) {
			return Classification{Retryable: tc.retryable, NotBefore: until, Reason: "test:notbefore"}, true
		}))
		h.mock.RegisterResponder(http.MethodPost, funderURL, seq(500))
		o := callOnce(t, h)
		if o.StopReason != tc.stop || !o.NotBefore.IsZero() {
			t.Errorf("Retryable %v: stop %s, NotBefore %v; want %s and zero", tc.retryable, o.StopReason, o.NotBefore, tc.stop)
		}
	}
}
