package grantretry

import (
	"net/http"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// Through a Transport, a quota's TimeSpan counts from the Transport's
// Clock when the answer arrived, whatever the answer's Date says: none, one
// that does not parse, one hours stale, one from a clock ahead.
func TestQuotaTimeSpanCountsFromTheTransportsClock(t *testing.T) {
	const body = `{"statusCode": 403, "message": "Out of call volume quota. Quota will be replenished in 00:10:00."}`
	for name, date := range map[string]string{
		"no Date":      "",
		"garbage Date": "yesterday",
		"stale Date":   "Mon, 30 Nov 2026 03:00:00 GMT",
		"Date ahead":   "Mon, 30 Nov 2026 11:00:00 GMT",
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			header := http.Header{}
			if date != "" {
				header.Set("Date", date)
			}
			h.mock.RegisterResponder(http.MethodPost, funderURL, httpmock.NewStringResponder(403, body).HeaderSet(header))
			o := callOnce(t, h)
			if want := h.clock.Now().Add(10 * time.Minute); o.StopReason != StopOwedLater || !o.NotBefore.Equal(want) {
				t.Errorf("outcome %+v; want owed_later until %v (the Clock's now and 10m)", o, want)
			}
		})
	}
}

// A Retry-After on the same answer that ends later than the TimeSpan wins:
// the funder said not before then.
func TestQuotaTakesTheLaterOfTimeSpanAndRetryAfter(t *testing.T) {
	const body = `Out of call volume quota. Quota will be replenished in 00:01:00.`
	for _, tc := range []struct {
		retryAfter string
		want       time.Duration
	}{
		{"600", 10 * time.Minute},
		{"30", time.Minute},
	} {
		h := newHarness(t)
		h.mock.RegisterResponder(http.MethodPost, funderURL,
			httpmock.NewStringResponder(403, body).HeaderSet(http.Header{"Retry-After": {tc.retryAfter}}))
		o := callOnce(t, h)
		if want := h.clock.Now().Add(tc.want); !o.NotBefore.Equal(want) {
			t.Errorf("Retry-After %s: NotBefore %v, want %v", tc.retryAfter, o.NotBefore, want)
		}
	}
}

// An owed verdict whose NotBefore has already passed is owed from now: a
// time in the past would tell a scheduler nothing it can use.
func TestOwedNotBeforeInThePastIsNow(t *testing.T) {
	past := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	h := newHarness(t, WithClassifier(func(*http.Response, []byte) (Classification, bool) {
		return Classification{Owed: true, NotBefore: past, Reason: "test:quota"}, true
	}))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(403))
	if o := callOnce(t, h); !o.NotBefore.Equal(h.clock.Now()) {
		t.Errorf("NotBefore %v, want the Clock's now %v", o.NotBefore, h.clock.Now())
	}
}
