package bench

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// soapFault is a SOAP 1.1 validation fault of about 1 KB, shaped like the
// ones Grants.gov S2S sends in a 500.
var soapFault = []byte(`<?xml version="1.0" encoding="UTF-8"?>
<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">
   <soap:Body>
      <soap:Fault>
         <faultcode>soap:Client</faultcode>
         <faultstring>Application failed validation: the SF424 form is missing required field ApplicantName</faultstring>
         <detail>
            <ns2:ErrorDetails xmlns:ns2="http://apply.grants.gov/system/GrantsCommonElements-V1.0">
               <ns2:Code>ValidationError</ns2:Code>
               <ns2:Message>cvc-complex-type.2.4.b: The content of element 'SF424_4_0' is not complete. One of '{"http://apply.grants.gov/forms/SF424_4_0-V4.0":ApplicantName}' is expected.</ns2:Message>
            </ns2:ErrorDetails>
         </detail>
      </soap:Fault>
   </soap:Body>
</soap:Envelope>`)

// faultTransport answers every request with a 500 carrying soapFault.
type faultTransport struct{}

func (faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/xml; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(soapFault)),
		ContentLength: int64(len(soapFault)),
		Request:       r,
	}, nil
}

// BenchmarkClassifier is what a classifier costs on the call it is for: a
// GET answered with a SOAP fault in a 500, in memory, read to the end by
// the caller. With no classifier the 500 is retried as transient, so the
// budget is 0 (one attempt) in both rows: the difference is the peek and
// ClassifySOAPFault alone.
func BenchmarkClassifier(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []grantretry.Option
	}{
		{"classifier=none", nil},
		{"classifier=soap", []grantretry.Option{grantretry.WithClassifier(grantretry.ClassifySOAPFault)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			opts := append([]grantretry.Option{grantretry.WithBudget(0, time.Minute), grantretry.WithoutBreaker()}, tc.opts...)
			client := &http.Client{Transport: grantretry.New(faultTransport{}, opts...)}
			req, _ := http.NewRequest(http.MethodGet, "https://apply07.grants.gov/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort", nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
