package grantretry_test

import (
	"fmt"
	"net/http"

	"github.com/grantretry/grantretry"
)

// A SOAP 1.1 funder answers every fault with a 500; the fault code says
// whether it was a refusal or an outage. A body that is not a SOAP fault
// leaves the verdict to the status.
func ExampleClassifySOAPFault() {
	refusal := `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>
  <soap:Fault><faultcode>soap:Client</faultcode><faultstring>SF424 is incomplete</faultstring></soap:Fault>
</soap:Body></soap:Envelope>`
	outage := `<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body>
  <SOAP-ENV:Fault><faultcode>SOAP-ENV:Server</faultcode><faultstring>try again later</faultstring></SOAP-ENV:Fault>
</SOAP-ENV:Body></SOAP-ENV:Envelope>`
	soap12 := `<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body>
  <env:Fault><env:Code><env:Value>env:Receiver</env:Value></env:Code></env:Fault>
</env:Body></env:Envelope>`
	gateway := `{"error":"upstream unavailable"}`

	resp := &http.Response{StatusCode: http.StatusInternalServerError,
		Header: http.Header{"Content-Type": {"text/html"}}} // mislabelled: a hint, not the truth
	for _, body := range []string{refusal, outage, soap12, gateway} {
		c, ok := grantretry.ClassifySOAPFault(resp, []byte(body))
		if !ok {
			fmt.Println("not a SOAP fault:", grantretry.Classify(resp.StatusCode, nil).Reason)
			continue
		}
		fmt.Println(c.Reason, "retryable:", c.Retryable)
	}
	// Output:
	// soap:Client retryable: false
	// soap:Server retryable: true
	// soap:Receiver retryable: true
	// not a SOAP fault: transient:500
}
