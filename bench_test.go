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
