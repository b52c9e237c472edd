package grantsgov_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantsgov"
)

// instantClock lets a retry schedule run without waiting.
type instantClock struct{}

func (instantClock) Now() time.Time                                   { return time.Now() }
func (instantClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// TestClassifyFaultThroughTransport serves real Grants.gov answers from a
// loopback server: a refusal is tried once, the generic server error is
// retried, and the caller reads each body byte for byte.
func TestClassifyFaultThroughTransport(t *testing.T) {
	cases := []struct {
		sample, contentType string
		attempts            int
		reason              string
	}{
		{"validation-tracking-number-pattern", `multipart/related; type="application/xop+xml"; boundary="uuid:00000000-aaaa-0000-bbbb-000000000000"; start="<root.message@cxf.apache.org>"; start-info="text/xml"`, 1, "terminal:500;grantsgov:validation"},
		{"missing-certificate", `multipart/related; type="application/xop+xml"`, 1, "terminal:500;grantsgov:certificate"},
		{"update-application-info-success-false", `multipart/related; type="application/xop+xml"; boundary="uuid:00000000-aaaa-0000-bbbb-000000000000"`, 1, "terminal:500;grantsgov:authorization"},
		{"server-error", `multipart/related; type="application/xop+xml"`, 3, "transient:500;grantsgov:server"},
	}
	for _, tc := range cases {
		t.Run(tc.sample, func(t *testing.T) {
			body, err := os.ReadFile("testdata/corpus/" + tc.sample + ".body")
			if err != nil {
				t.Fatal(err)
			}
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			tr := grantretry.New(srv.Client().Transport,
				grantretry.WithClassifier(grantsgov.ClassifyFault),
				grantretry.WithClock(instantClock{}),
				grantretry.WithBudget(2, time.Minute),
				grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
			ctx := grantretry.WithSubmissionID(context.Background(), "sub-"+tc.sample)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte("<soap:Envelope/>")))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, body) {
				t.Error("the caller did not get the body byte for byte")
			}
			o, _ := grantretry.OutcomeOf(resp)
			if int(hits.Load()) != tc.attempts || o.Attempts != tc.attempts || o.Reason != tc.reason {
				t.Errorf("server saw %d, outcome %d attempts, reason %q; want %d, %q", hits.Load(), o.Attempts, o.Reason, tc.attempts, tc.reason)
			}
		})
	}
}
