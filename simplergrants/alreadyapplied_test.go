package simplergrants_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/simplergrants"
)

// A submit whose first attempt the gateway timed out (504: the API may
// have finished it) and whose resend the API answers already submitted
// ends succeeded, already_applied: the caller gets the 403 with a nil
// error. The same answer to a first submit is a refusal.
func TestResentSubmitAnsweredAlreadySubmittedIsASuccess(t *testing.T) {
	for _, c := range []struct {
		name  string
		first string // the sample the first attempt gets
		disp  grantretry.Disposition
		stop  string
	}{
		{"after the gateway's timeout", "gateway-timeout", grantretry.Succeeded, grantretry.StopAlreadyApplied},
		{"on the first attempt", "submit-not-in-progress", grantretry.FailedTerminal, grantretry.StopTerminal},
	} {
		t.Run(c.name, func(t *testing.T) {
			firstStatus, firstHeader, firstBody := serveSample(t, c.first)
			status, header, body := serveSample(t, "submit-not-in-progress")
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				s, h, b := status, header, body
				if n.Add(1) == 1 {
					s, h, b = firstStatus, firstHeader, firstBody
				}
				for k, vs := range h {
					w.Header()[k] = vs
				}
				w.WriteHeader(s)
				w.Write(b)
			}))
			defer srv.Close()
			tr := grantretry.New(srv.Client().Transport, grantretry.WithClassifier(simplergrants.ClassifyFault),
				grantretry.WithClock(fixedClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}))
			req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(context.Background(), "GRANT-42"),
				http.MethodPost, srv.URL+"/alpha/applications/3f1b9a52-7c4e-4d2a-9b8e-6a0d5c2e1f47/submit", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			o, _ := grantretry.OutcomeOf(resp)
			if o.Disposition != c.disp || o.StopReason != c.stop || resp.StatusCode != http.StatusForbidden || string(got) != string(body) {
				t.Errorf("outcome %+v, status %d; want %s (%s) with the API's 403", o, resp.StatusCode, c.disp, c.stop)
			}
			if o.Reason != "terminal:403;simplergrants:already_submitted" {
				t.Errorf("Reason = %q", o.Reason)
			}
		})
	}
}
