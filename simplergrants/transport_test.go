package simplergrants_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/simplergrants"
)

// fixedClock never moves: a retry schedule runs without waiting, and an
// owed call's NotBefore is counted from a known now.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                                 { return c.now }
func (fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func serveSample(t *testing.T, name string) (status int, h http.Header, body []byte) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name+".body"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", name+".source"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(src), "\n")
	if status, err = strconv.Atoi(strings.TrimPrefix(first, "status: ")); err != nil {
		t.Fatal(err)
	}
	h = http.Header{}
	raw, _ := os.ReadFile(filepath.Join("testdata", name+".headers"))
	s := bufio.NewScanner(bytes.NewReader(raw))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return status, h, body
}

// TestClassifyFaultThroughTransport serves the samples from a loopback
// server: a refusal is tried once, a throttle and the gateway's timeout
// are retried, a quota and maintenance end owed at once, and the caller
// reads each body byte for byte.
func TestClassifyFaultThroughTransport(t *testing.T) {
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	cases := []struct {
		sample    string
		attempts  int
		reason    string
		stop      string
		notBefore time.Time
	}{
		{"submit-not-in-progress", 1, "terminal:403;simplergrants:already_submitted", grantretry.StopTerminal, time.Time{}},
		{"submit-competition-not-open", 1, "terminal:422;simplergrants:competition_not_open", grantretry.StopTerminal, time.Time{}},
		{"gateway-forbidden", 1, "terminal:403;simplergrants:gateway_forbidden", grantretry.StopTerminal, time.Time{}},
		{"gateway-throttle", 3, "transient:429;aws:TooManyRequestsException", grantretry.StopRetriesSpent, time.Time{}},
		{"gateway-timeout", 3, "transient:504;simplergrants:gateway_timeout", grantretry.StopRetriesSpent, time.Time{}},
		{"gateway-quota", 1, "owed:429;aws:LimitExceededException", grantretry.StopOwedLater, time.Time{}},
		{"pending-file-upload-limit", 1, "owed:429;simplergrants:pending_file_upload_limit_exceeded", grantretry.StopOwedLater, time.Time{}},
		{"maintenance", 1, "owed:503;simplergrants:maintenance", grantretry.StopOwedLater, now.Add(time.Hour)},
	}
	for _, tc := range cases {
		t.Run(tc.sample, func(t *testing.T) {
			status, h, body := serveSample(t, tc.sample)
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
			tr := grantretry.New(srv.Client().Transport,
				grantretry.WithClassifier(simplergrants.ClassifyFault),
				grantretry.WithClock(fixedClock{now}),
				grantretry.WithBudget(2, time.Minute),
				grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
			ctx := grantretry.WithSubmissionID(context.Background(), "sub-"+tc.sample)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/alpha/applications/0f8e2d0a-1c3b-4e5f-8a9b-0c1d2e3f4a5b/submit", nil)
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
			if int(hits.Load()) != tc.attempts || o.Attempts != tc.attempts || o.Reason != tc.reason || o.StopReason != tc.stop {
				t.Errorf("server saw %d; outcome %d attempts, reason %q, stop %q; want %d, %q, %q",
					hits.Load(), o.Attempts, o.Reason, o.StopReason, tc.attempts, tc.reason, tc.stop)
			}
			if !o.NotBefore.Equal(tc.notBefore) {
				t.Errorf("NotBefore = %v, want %v", o.NotBefore, tc.notBefore)
			}
		})
	}
}

// gatewayTimeoutResponse is the gateway's 504 of the testdata sample.
func gatewayTimeoutResponse(r *http.Request) *http.Response {
	body := `{"message": "Endpoint request timed out"}`
	return &http.Response{
		StatusCode: http.StatusGatewayTimeout, Status: "504 Gateway Timeout", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}
