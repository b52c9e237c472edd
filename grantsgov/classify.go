package grantsgov

import (
	"net/http"

	"github.com/grantretry/grantretry"
)

// ClassifyFault is a grantretry.ClassifyFunc for Grants.gov S2S: it tells
// a refusal, which the same request will meet again, from an outage by the
// text of the service's answer, since the service sends both as a 500 with
// the fault code soap:Server.
//
// It finds the SOAP envelope in body: the root part of an MTOM/XOP body
// (the attachments after it are skipped), or a plain envelope, whatever
// the Content-Type says. It reads the envelope's SOAP 1.1 Fault and its
// faultstring, or an operation's response that reports a refusal with a
// Success of false and reads its ErrorMessage. The text is matched against
// the package's rules, each a text the service is publicly known to send:
//
//	grantsgov:certificate    missing, not registered, expired, or
//	                         not configured for the Simpler SOAP proxy  terminal
//	grantsgov:validation     "Failed to validate request", cvc-*   terminal
//	grantsgov:retrieved      already retrieved                      terminal
//	grantsgov:status         not in the status the call needs       terminal
//	grantsgov:not_found      unknown tracking number                terminal
//	grantsgov:filter         a missing or invalid filter            terminal
//	grantsgov:authorization  authorization failure                  terminal
//	grantsgov:action         a SOAPAction of no operation           terminal
//	grantsgov:server         the service's generic server error     transient
//
// The Reason is the rule's name; no text from the body reaches it. The
// Transport puts the status's reason in front: "terminal:500;grantsgov:validation".
//
// A fault or refusal whose text no rule knows leaves the verdict to the
// status, as grantretry.Classify gives it with the default status sets,
// and its Reason, "grantsgov:unknown", says so ("transient:500;grantsgov:unknown").
// ok is false, leaving the verdict to the Transport's status sets, for
// every other body: empty, not XML, not a SOAP 1.1 envelope, an operation's
// response that reports no refusal, or one malformed or cut off before the
// answer; and for an unknown text when resp is nil.
//
// It reads only body, and of body at most the first
// grantretry.MaxClassifyPeek bytes; it never reads resp.Body and never
// writes to body. Its cost is at most one encoding/xml token scan of the
// envelope. It is a pure function, safe for concurrent use.
func ClassifyFault(resp *http.Response, body []byte) (grantretry.Classification, bool) {
	if len(body) > grantretry.MaxClassifyPeek {
		body = body[:grantretry.MaxClassifyPeek]
	}
	env, ok := soapEnvelope(resp, body)
	if !ok {
		return grantretry.Classification{}, false
	}
	a, ok := readAnswer(env)
	if !ok {
		return grantretry.Classification{}, false
	}
	if r, ok := verdictOf(a.texts); ok {
		return grantretry.Classification{Retryable: r.retryable, Reason: r.name}, true
	}
	if resp == nil {
		return grantretry.Classification{}, false
	}
	st := grantretry.Classify(resp.StatusCode, nil)
	return grantretry.Classification{Retryable: st.Retryable, Reason: reasonUnknown}, true
}
