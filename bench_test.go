package grantretry

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// cannedOK is an in-memory inner transport: a 200 with a small body.
type cannedOK struct{}

func (cannedOK) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(okBody)), Request: r}, nil
}

var okBody = []byte(`{"status":"received"}`)

// BenchmarkRoundTripSuccess is the success path of one call, audit log
// off, against an in-memory funder: the cost grantretry adds to every call.
func BenchmarkRoundTripSuccess(b *testing.B) {
	payload := []byte(`{"applicant":"Riverbend Food Bank","amount":125000}`)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		b.Run(method, func(b *testing.B) {
			for _, tc := range []struct {
				name string
				rt   http.RoundTripper
			}{{"bare", cannedOK{}}, {"grantretry", New(cannedOK{})}} {
				b.Run(tc.name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						var body io.Reader
						if method == http.MethodPost {
							body = bytes.NewReader(payload)
						}
						req, _ := http.NewRequest(method, "https://funder.test/v1/applications", body)
						resp, err := tc.rt.RoundTrip(req)
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		})
	}
}

// BenchmarkThrottleBucket is one host's retry throttle alone, on the system
// clock: a success on a full bucket (a healthy funder), a success on a
// bucket that is not full, and a failure with the question a retry asks.
// Successes never read the clock; failures read it once and compute the
// refill since the last update.
func BenchmarkThrottleBucket(b *testing.B) {
	b.Run("op=success-full", func(b *testing.B) {
		rt := newRetryThrottle(DefaultThrottleMaxTokens, DefaultThrottleTokenRatio, DefaultThrottleRefill, systemClock{})
		b.ReportAllocs()
		for range b.N {
			rt.onSuccess()
		}
	})
	b.Run("op=success-refilling", func(b *testing.B) {
		// A bucket of 1000 tokens refilled by 0.001 a success, emptied
		// every half million: it is never full, so every success swaps.
		rt := newRetryThrottle(1000, 0.001, DefaultThrottleRefill, systemClock{})
		b.ReportAllocs()
		for i := range b.N {
			if i%500_000 == 0 {
				rt.state.Store(0)
			}
			rt.onSuccess()
		}
	})
	b.Run("op=failure-and-allow", func(b *testing.B) {
		rt := newRetryThrottle(DefaultThrottleMaxTokens, DefaultThrottleTokenRatio, DefaultThrottleRefill, systemClock{})
		b.ReportAllocs()
		for range b.N {
			rt.onFailure()
			rt.allowRetry()
		}
	})
}

// BenchmarkRoundTripSuccessFleet is the success path with fleet mode off
// and on (an in-memory Fleet, so only what the Transport adds is
// measured): fleet mode reads the host's fleet state and counts the
// success, in memory, with no I/O.
//
//	go test -run '^$' -bench RoundTripSuccessFleet -benchmem -count 6
func BenchmarkRoundTripSuccessFleet(b *testing.B) {
	payload := []byte(`{"applicant":"Riverbend Food Bank","amount":125000}`)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, tc := range []struct {
			name string
			rt   http.RoundTripper
		}{{"fleet=off", New(cannedOK{})}, {"fleet=on", New(cannedOK{}, WithFleet(newMemFleet()))}} {
			b.Run("method="+method+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					var body io.Reader
					if method == http.MethodPost {
						body = bytes.NewReader(payload)
					}
					req, _ := http.NewRequest(method, "https://funder.test/v1/applications", body)
					resp, err := tc.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
}
