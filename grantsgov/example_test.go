package grantsgov_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantsgov"
)

// Grants.gov sends a refusal and an outage alike, as a 500 with
// soap:Server in an MTOM body; the fault string tells them apart.
func ExampleClassifyFault() {
	const mtom = "--uuid:0c0ffee0\r\n" +
		"Content-Type: application/xop+xml; charset=UTF-8; type=\"text/xml\"\r\n" +
		"Content-Transfer-Encoding: binary\r\n" +
		"Content-ID: <root.message@cxf.apache.org>\r\n\r\n" +
		`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault>` +
		`<faultcode>soap:Server</faultcode><faultstring>%s</faultstring>` +
		"</soap:Fault></soap:Body></soap:Envelope>\r\n--uuid:0c0ffee0--"
	resp := &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{
		"Content-Type": {`multipart/related; type="application/xop+xml"; boundary="uuid:0c0ffee0"`}}}
	for _, text := range []string{
		"Failed to validate request. cvc-pattern-valid: Value is not facet-valid with respect to pattern 'GRANT[0-9]{8}' for type 'GrantsGovTrackingNumberType'.",
		"Certificate is expired. (Authorization Failure)",
		"Server error has occurred",
		"A text no rule knows",
	} {
		c, ok := grantsgov.ClassifyFault(resp, []byte(fmt.Sprintf(mtom, text)))
		fmt.Println(c.Reason, "retryable:", c.Retryable, ok)
	}

	// Wired for the S2S host only, beside a Transport's other funders.
	_ = grantretry.New(http.DefaultTransport,
		grantretry.ForHost("ws07.grants.gov", grantretry.WithClassifier(grantsgov.ClassifyFault)))
	// Output:
	// grantsgov:validation retryable: false true
	// grantsgov:certificate retryable: false true
	// grantsgov:server retryable: true true
	// grantsgov:unknown retryable: true true
}

// The S2S host's profile: its faults read by their text, an ambiguous
// SubmitApplication looked up by its SubmissionTitle, and a budget and
// breaker sized for uploads and maintenance windows.
func ExampleProfile() {
	// Both transports present the S2S client certificate; the reconciler's
	// is a plain client of its own.
	tlsConfig := &tls.Config{ /* Certificates: the S2S client certificate */ }
	inner := &http.Transport{TLSClientConfig: tlsConfig}
	lookup := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}

	rec, err := grantsgov.NewReconciler(lookup, grantsgov.DefaultClockSkew)
	if err != nil {
		fmt.Println(err)
		return
	}
	t := grantretry.New(inner, grantsgov.Profile("ws07.grants.gov", rec))
	fmt.Println(t.Err())

	// Each SubmitApplication goes under its submission id, which is also
	// its SubmissionTitle: the reconciler checks one against the other.
	envelope := []byte(`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>` +
		`<app:SubmitApplicationRequest xmlns:app="http://apply.grants.gov/services/ApplicantWebServices-V2.0">` +
		`<app:GrantApplicationXML>&lt;GrantApplication&gt;&lt;GrantSubmissionHeader&gt;` +
		`&lt;SubmissionTitle&gt;PROP-2026-0042&lt;/SubmissionTitle&gt;&lt;/GrantSubmissionHeader&gt;&lt;/GrantApplication&gt;` +
		`</app:GrantApplicationXML></app:SubmitApplicationRequest></soap:Body></soap:Envelope>`)
	title, err := grantsgov.SubmissionTitle(envelope)
	fmt.Println(title, err)
	ctx := grantretry.WithSubmissionID(context.Background(), title)
	_ = ctx // the request's context: http.NewRequestWithContext(ctx, ...)
	// Output:
	// <nil>
	// PROP-2026-0042 <nil>
}
