package grantretrytest

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"time"
)

// Answer is what a [Funder] does with one request: answer it with a status,
// headers and a body, or drop the connection before or after reading it,
// each after an optional delay. Build one as a literal for a plain answer
// (Answer{Status: 503}) or with [Reply], [SOAPFault], [DropBeforeRead] and
// [DropAfterRead]; [Answer.After] adds a delay.
//
// The zero Answer is a 200 with an empty body. An Answer is a value: the
// Funder copies its header when it answers, and never changes it.
type Answer struct {
	// Status is the response's status code, from 200 to 999; 0 means 200.
	// An informational 1xx is not a final answer: the Funder takes it,
	// as any status out of range, as an error of the script (see
	// [StatusScriptRanOut]). A drop ignores it.
	Status int
	// Header holds the response's headers; nil means none. A drop
	// ignores it.
	Header http.Header
	// Body is the response body. A drop ignores it.
	Body string
	// Delay is how long the Funder waits, after it has the request and
	// before it answers or drops it. The wait ends early when the
	// request's context ends: the attempt then fails with the context's
	// cause, as net/http's Transport fails. It waits on a time.Timer, so
	// in a testing/synctest bubble it passes in no wall time. Zero or
	// negative means no wait.
	Delay time.Duration

	drop drop
}

// drop says whether and when an Answer drops the connection.
type drop int

const (
	noDrop     drop = iota
	dropBefore      // before the request is read: never processed
	dropAfter       // after the request is read: processed, answer lost
)

// Reply returns an Answer with status and body.
func Reply(status int, body string) Answer {
	return Answer{Status: status, Body: body}
}

// DropBeforeRead returns an Answer that refuses the connection: the
// request is never read, so the funder never processed it. The attempt
// fails with the error net/http returns for a refused connection (a
// *net.OpError of the dial, wrapping syscall.ECONNREFUSED), which
// grantretry classifies "transport:refused": retried, and not ambiguous,
// since nothing was sent.
//
// The Funder still reads the request body and records the request, with
// Processed false, so a test can see what the client tried to send.
func DropBeforeRead() Answer { return Answer{drop: dropBefore} }

// DropAfterRead returns an Answer that reads the request, processes it,
// and drops the connection before the answer is written: the funder has
// the request, the client never learns so. The attempt fails with a
// connection reset on read (a *net.OpError wrapping syscall.ECONNRESET),
// which grantretry classifies "transport:reset": retried, and ambiguous,
// since the request may have been applied (see
// [github.com/grantretry/grantretry.WithReconciler]).
func DropAfterRead() Answer { return Answer{drop: dropAfter} }

// After returns a copy of a that waits d before it answers or drops the
// connection (see Answer.Delay).
func (a Answer) After(d time.Duration) Answer {
	a.Delay = d
	return a
}

// The MTOM framing of a Grants.gov S2S answer, as HHS/simpler-grants-gov
// reproduces the live service (Apache CXF): format_local_soap_response in
// api/src/legacy_soap_api/legacy_soap_api_utils.py, whose comment says
// "the grants.gov SOAP API currently includes this data", and the
// Content-Type of get_soap_proxy_grant_application_not_found_response in
// the same file. The boundary is the one of the sample
// testdata/soapfaults/grantsgov-mtom-not-found.body at the repository's
// root, so that the not-found fault is that sample byte for byte.
const (
	soapBoundary    = "uuid:6d1a6e0e-2c7b-4c53-9a0b-3f1f2b5e8a11"
	soapContentType = `multipart/related; type="application/xop+xml"; boundary="` + soapBoundary +
		`"; start="<root.message@cxf.apache.org>"; start-info="text/xml"`
	soapPartHeader = "--" + soapBoundary + "\r\n" +
		`Content-Type: application/xop+xml; charset=UTF-8; type="text/xml"` + "\r\n" +
		"Content-Transfer-Encoding: binary\r\n" +
		"Content-ID: <root.message@cxf.apache.org>\r\n\r\n"
	soapFaultOpen = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">` +
		`<soap:Body><soap:Fault><faultcode>soap:Server</faultcode><faultstring>`
	soapFaultClose = `</faultstring></soap:Fault></soap:Body></soap:Envelope>`
	soapEnd        = "\r\n--" + soapBoundary + "--"
)

// SOAPFault returns a Grants.gov S2S fault as the service sends one: HTTP
// 500, the fault code soap:Server, faultstring (escaped for XML) as its
// text, inside the MTOM/XOP framing of every answer of the service, with
// its multipart/related Content-Type.
//
// The shape is that of the service's public mirror, HHS/simpler-grants-gov
// (api/src/legacy_soap_api/legacy_soap_api_utils.py at commit
// 32d9a126f4f2f54228d77abe8ea4e2395b2c78d6:
// get_soap_proxy_grant_application_not_found_response framed by
// format_local_soap_response), whose code says its framing and fault
// texts copy the live service's. Every fault that material shows is a
// 500 with soap:Server, whatever the cause: the text tells a refusal
// from an outage, as github.com/grantretry/grantretry/grantsgov's
// ClassifyFault reads it. Texts the service is known to send include
// "Server error has occurred" (an outage) and "Failed to validate
// request." (a refusal); the grantsgov package's table lists them all,
// each with its source.
func SOAPFault(faultstring string) Answer {
	var b bytes.Buffer
	b.WriteString(soapPartHeader)
	b.WriteString(soapFaultOpen)
	xml.EscapeText(&b, []byte(faultstring)) // writes to a bytes.Buffer never fail
	b.WriteString(soapFaultClose)
	b.WriteString(soapEnd)
	return Answer{
		Status: http.StatusInternalServerError,
		Header: http.Header{"Content-Type": {soapContentType}},
		Body:   b.String(),
	}
}
