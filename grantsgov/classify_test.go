package grantsgov

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

func fault(text string) string {
	return `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault><faultcode>soap:Server</faultcode><faultstring>` +
		text + `</faultstring></soap:Fault></soap:Body></soap:Envelope>`
}

func response(inner string) string {
	return `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>` +
		`<ns2:SubmitApplicationResponse xmlns:ns2="http://apply.grants.gov/services/ApplicantWebServices-V2.0" xmlns="http://apply.grants.gov/system/GrantsCommonElements-V1.0">` +
		inner + `</ns2:SubmitApplicationResponse></soap:Body></soap:Envelope>`
}

// TestClassifyFaultEdges covers what the corpus does not: the shapes an
// answer can take around the texts the rules know.
func TestClassifyFaultEdges(t *testing.T) {
	long := strings.Repeat("x", 2*maxText)
	deep := strings.Repeat("<a>", maxDepth+5)
	cases := []struct {
		name      string
		status    int
		body      string
		ok        bool
		retryable bool
		reason    string
	}{
		{"entities in the text", 500, fault("Failed to validate request. cvc-pattern-valid: &apos;GRANT[0-9]{8}&apos;"), true, false, "grantsgov:validation"},
		{"text in CDATA", 500, fault("<![CDATA[Certificate is expired. (Authorization Failure)]]>"), true, false, "grantsgov:certificate"},
		{"known text past the kept length", 500, fault(long + "Server error has occurred"), true, true, "grantsgov:unknown"},
		{"fault without faultstring", 500, `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><s:Fault><faultcode>s:Server</faultcode></s:Fault></s:Body></s:Envelope>`, true, true, "grantsgov:unknown"},
		{"unknown text on a 503", 503, fault("Service is down for maintenance"), true, true, "grantsgov:unknown"},
		{"unknown text on a 400", 400, fault("something new"), true, false, "grantsgov:unknown"},
		{"Success false with a known message", 500, response(`<ns2:Success>false</ns2:Success><ns2:ErrorMessage>Missing certificate. (Authorization Failure)</ns2:ErrorMessage>`), true, false, "grantsgov:certificate"},
		{"Success false, then a terminal message after a transient one", 500, response(`<ns2:Success>false</ns2:Success><ns2:ErrorMessage>Server error has occurred</ns2:ErrorMessage><ns2:ErrorMessage>Authorization error</ns2:ErrorMessage>`), true, false, "grantsgov:authorization"},
		{"Success false without a message", 500, response(`<ns2:Success> false </ns2:Success>`), true, true, "grantsgov:unknown"},
		{"Success false, cut off", 500, response(`<ns2:Success>false</ns2:Success><ns2:ErrorMessage>Authorization error</ns2:ErrorMessage><ns2:More>`)[:400], true, false, "grantsgov:authorization"},
		{"Success true", 500, response(`<ns2:Success>true</ns2:Success><ns2:ErrorMessage>Authorization error</ns2:ErrorMessage>`), false, false, ""},
		{"Success in another namespace", 500, response(`<x:Success xmlns:x="urn:other">false</x:Success>`), false, false, ""},
		{"a response not the service's", 500, `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><m:R xmlns:m="urn:x"><m:Success>false</m:Success></m:R></s:Body></s:Envelope>`, false, false, ""},
		{"SOAP 1.2", 500, `<e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Body><e:Fault><e:Reason><e:Text>Authorization error</e:Text></e:Reason></e:Fault></e:Body></e:Envelope>`, false, false, ""},
		{"empty Body", 500, `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header/><s:Body/></s:Envelope>`, false, false, ""},
		{"fault cut off before its faultstring ends", 500, fault("Authorization error")[:150], false, false, ""},
		{"nested too deep", 500, `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header>` + deep, false, false, ""},
		{"HTML", 502, `<html><body><h1>502 Bad Gateway</h1></body></html>`, false, false, ""},
		{"not XML", 500, `Authorization error`, false, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}}
			body := []byte(tc.body)
			orig := bytes.Clone(body)
			c, ok := ClassifyFault(resp, body)
			if ok != tc.ok || c.Retryable != tc.retryable || c.Reason != tc.reason {
				t.Errorf("ClassifyFault = %+v, %v; want {Retryable:%v Reason:%s}, %v", c, ok, tc.retryable, tc.reason, tc.ok)
			}
			if !bytes.Equal(body, orig) {
				t.Error("ClassifyFault changed the body")
			}
		})
	}
}

// TestClassifyFaultUnknownTextWithoutResponse has no status to leave the
// verdict to, so it gives none.
func TestClassifyFaultUnknownTextWithoutResponse(t *testing.T) {
	if c, ok := ClassifyFault(nil, []byte(fault("something new"))); ok {
		t.Errorf("ClassifyFault(nil, unknown) = %+v, true", c)
	}
	if c, ok := ClassifyFault(nil, []byte(fault("Authorization error"))); !ok || c.Reason != "grantsgov:authorization" {
		t.Errorf("ClassifyFault(nil, known) = %+v, %v", c, ok)
	}
}

// TestClassifyFaultReadsOnlyThePeek looks at no more than a Transport
// shows: a fault that ends past MaxClassifyPeek is not read.
func TestClassifyFaultReadsOnlyThePeek(t *testing.T) {
	pad := strings.Repeat(" ", 70<<10)
	body := []byte(`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">` + pad + `<soap:Body><soap:Fault><faultstring>Authorization error</faultstring></soap:Fault></soap:Body></soap:Envelope>`)
	if c, ok := ClassifyFault(&http.Response{StatusCode: 500}, body); ok {
		t.Errorf("ClassifyFault = %+v, true; want false", c)
	}
}
