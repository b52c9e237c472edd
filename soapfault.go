package grantretry

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
)

// The SOAP envelope namespaces, which name the version a document speaks.
const (
	soap11Envelope = "http://schemas.xmlsoap.org/soap/envelope/"
	soap12Envelope = "http://www.w3.org/2003/05/soap-envelope"
)

// A SOAP fault's code sits 4 (SOAP 1.1) or 5 (SOAP 1.2) elements deep and
// is one of a handful of short names, so these bounds cost no real fault
// anything; they only cap what a hostile body can make the parser hold.
const (
	maxSOAPDepth    = 32
	maxSOAPCodeText = 256
)

// maxSOAPFaultText is how much of a fault's text (faultstring, or SOAP
// 1.2's first Reason Text) is kept for faultRules: the texts they look for
// open the message, and what follows is the funder's own detail.
const maxSOAPFaultText = 1024

// ClassifySOAPFault is a ClassifyFunc for funders that speak SOAP, such as
// Grants.gov S2S, whose SOAP 1.1 faults all arrive as a 500: it tells the
// sender's fault (a refusal, terminal) from the receiver's (an outage,
// transient) by the fault code in the body.
//
// It reads only body, and of body at most the first MaxClassifyPeek bytes,
// through SOAPEnvelope: so an MTOM/XOP (multipart) body, a gzip or deflate
// Content-Encoding, an ISO-8859-1 or windows-1252 charset and an HTML page
// with the fault appended are all read, and resp, which may be nil, is
// consulted only for the Content-Type and Content-Encoding that
// SOAPEnvelope takes as hints. Funders send faults as text/xml,
// application/soap+xml, multipart/related and text/html alike, so a label
// that does not match the body neither helps nor hurts.
//
// The envelope is a SOAP fault when it is in the SOAP 1.1
// (http://schemas.xmlsoap.org/soap/envelope/) or SOAP 1.2
// (http://www.w3.org/2003/05/soap-envelope) namespace, with a Body child
// whose first child element is a Fault, all three in that namespace (SOAP
// 1.2, and the WS-I Basic Profile for SOAP 1.1, make the Fault the Body's
// only child). Elements are matched by namespace and local name, so any
// prefix, or a default namespace, will do. The fault code is the text of
// the Fault's faultcode child in SOAP 1.1 (unqualified, as the SOAP 1.1
// schema has it, or in the envelope namespace) and of its Code/Value in
// SOAP 1.2. The code is a QName: its prefix is resolved against the
// namespace declarations in scope at that element, and an unprefixed code
// takes the default namespace. Whitespace around the code is ignored; in
// SOAP 1.1 only the part of the local name before the first dot counts, so
// "Client.Authentication" is Client. SOAP 1.2 subcodes are the funder's
// own and do not count. The verdicts, by the code's namespace:
//
//	SOAP 1.1 namespace  Client, VersionMismatch, MustUnderstand    terminal
//	                    Server                                     transient
//	SOAP 1.2 namespace  Sender, VersionMismatch, MustUnderstand,
//	                    DataEncodingUnknown                        terminal
//	                    Receiver                                   transient
//	no namespace        Client, Sender, VersionMismatch,
//	                    MustUnderstand, DataEncodingUnknown        terminal
//	                    Server, Receiver                           transient
//	WS-Addressing       EndpointUnavailable                        transient
//	                    any other                                  terminal
//	WCF dispatcher      InternalServiceFault                       transient
//	                    DeserializationFailed, any other           terminal
//	Salesforce faults   REQUEST_LIMIT_EXCEEDED                     transient
//	                    (owed when its text names TotalRequests)
//	                    any other                                  terminal
//	anything else                                                  terminal
//
// An unprefixed code with no default namespace in scope is how PHP's
// SoapServer writes "Sender" and how Axis 1 writes "Server.userException":
// such a code is read by its name alone, in either version's vocabulary.
// The WS-Addressing namespaces are 1.0's (http://www.w3.org/2005/08/addressing),
// the 2004/08 submission's (http://schemas.xmlsoap.org/ws/2004/08/addressing)
// and the one WCF puts its addressing faults in when a binding has no
// addressing (http://schemas.microsoft.com/ws/2005/05/addressing/none, as
// in WCF's "a:ActionNotSupported"). Their faults say the request's
// addressing headers are wrong or name an action or destination the
// service does not have, which the same request meets again; the one
// exception is EndpointUnavailable, which WS-Addressing defines as the
// endpoint being unable to process the message at this time. WCF's
// dispatcher namespace
// (http://schemas.microsoft.com/net/2005/12/windowscommunicationfoundation/dispatcher)
// holds the codes WCF writes in SOAP 1.1 where SOAP 1.2 would have a
// subcode: InternalServiceFault, an exception inside the service, sits
// under Receiver, and DeserializationFailed, a request it could not read,
// under Sender, so each gets that code's verdict. Salesforce's SOAP API
// puts its own codes in urn:fault.partner.soap.sforce.com (or the
// enterprise WSDL's urn:fault.enterprise.soap.sforce.com): its
// REQUEST_LIMIT_EXCEEDED is a concurrent request limit, which clears in
// seconds, unless the fault's text is the org's rolling 24-hour limit
// ("TotalRequests Limit exceeded"), which is Owed ("salesforce:TotalRequests").
//
// Some stacks label a client's error Server or Receiver, so a Server or
// Receiver code (in the SOAP namespaces or none) is not the verdict until
// the Fault's end tag: a NetSuite fault element in the detail
// (urn:faults_*.platform.webservices.netsuite.com) gives its own, and
// otherwise the first faultRules text in the fault's text (SOAP 1.1's
// faultstring, SOAP 1.2's first Reason Text, its first 1,024 bytes; for
// xsd:validation also the first 1,024 bytes of the detail's text) makes
// it terminal:
//
//	netsuite:exceededConcurrentRequestLimitFault, exceededRequestLimitFault,
//	         unexpectedErrorFault                                  transient
//	netsuite:invalidCredentialsFault, invalidSessionFault, invalidAccountFault,
//	         invalidVersionFault, insufficientPermissionFault,
//	         exceededRequestSizeFault, exceededRecordCountFault,
//	         exceededUsageLimitFault                               terminal
//	axis:no_such_operation       "No such operation"               terminal
//	cxf:action_mismatch          "does not match an operation"     terminal
//	metro:action_not_supported   "ActionNotSupportedException"     terminal
//	xsd:validation               "cvc-", in the text or the detail terminal
//
// The reason is then the rule's name ("netsuite:invalidCredentialsFault",
// "axis:no_such_operation"), never the text. A document malformed after
// such a code, before the Fault's end tag, is judged on what was read
// before the fault; one cut off there is not ok.
//
// A well-formed fault whose code is in none of those sets (a funder's own
// code such as INVALID_LOGIN or ERR_NO_SESSION, a name the SOAP namespace
// does not define) is terminal, as an unknown status is: the fault says
// the request was refused, the code does not say that a retry can help,
// and an unknown answer is more likely a contract the caller has to look
// at than a blip, so the call fails loud, once, rather than being resent
// on a guess and counted against the funder's breaker.
//
// The Reason is "soap:" and the code's name as the table above spells it
// ("soap:Client", "soap:Receiver"), whatever prefix the document used;
// "wsa:" and the WS-Addressing name ("wsa:ActionNotSupported", or
// "wsa:unknown" for a name WS-Addressing does not define); "wcf:" and the
// WCF name ("wcf:InternalServiceFault"); "salesforce:REQUEST_LIMIT_EXCEEDED"
// or "salesforce:TotalRequests"; or
// "soap:unknown" for a code in no known set; or a rule's name, above. No
// other text from the body reaches it. The Transport puts the status's reason in front, as in
// "terminal:500;soap:Client".
//
// ok is false, leaving the verdict to the status, for everything else: a
// body in which SOAPEnvelope finds no envelope; an Envelope whose Body's
// first child is not a Fault; a Fault anywhere else; a Fault without a
// code, or with an empty one; a code that is not a QName (an empty prefix
// or local name, two colons, whitespace inside), under an undeclared prefix
// or the reserved xml or xmlns prefix, with an element inside it, or whose
// text, whitespace included, is longer than 256 bytes; and a document
// that, before the code's end tag, is malformed, is cut off, or nests
// elements more than 32 deep; and a Server, Receiver or Salesforce
// REQUEST_LIMIT_EXCEEDED fault cut off
// before the Fault's end tag. So a fault whose code ends beyond the
// MaxClassifyPeek bytes a Transport shows is not ok, and neither is a
// Server fault whose end tag does: the status decides. Parsing stops as
// soon as the verdict is known; what follows is neither read nor checked.
//
// Hostile XML costs no more than its length: a DOCTYPE before the envelope
// is skipped, never interpreted; no entity beyond XML's five predefined
// ones is ever expanded, and a reference to one makes the document
// malformed there (a billion-laughs entity used before or as the code
// leaves it not ok, one declared and never used changes nothing); nothing
// external is ever fetched; a compressed body is decompressed to at most
// MaxClassifyPeek bytes. ClassifySOAPFault never reads resp.Body and never
// changes body; it is a pure function, safe for concurrent use.
func ClassifySOAPFault(resp *http.Response, body []byte) (Classification, bool) {
	if len(body) > MaxClassifyPeek {
		body = body[:MaxClassifyPeek]
	}
	env, ok := SOAPEnvelope(resp, body)
	if !ok {
		return Classification{}, false
	}
	// The zero Decoder settings are the safe ones: Strict, no Entity map,
	// no CharsetReader. SOAPEnvelope has left out any XML declaration, and
	// its bytes are UTF-8.
	d := xml.NewDecoder(bytes.NewReader(env))
	var s soapScan
	for {
		tok, err := d.Token()
		if err != nil {
			// Malformed after a Server or Receiver code, the Fault's rest
			// cannot be read: what was read decides. Cut off there, what
			// follows might still change the verdict, so it is not known.
			if s.coded && !errors.Is(err, io.EOF) && d.InputOffset() < int64(len(env)) {
				return s.final(), true
			}
			return Classification{}, false
		}
		if c, ok, done := s.step(tok); done {
			return c, ok
		}
	}
}

// soapScan follows a SOAP document token by token down the one path that
// leads to the fault code: Envelope, Body, Fault, then faultcode (SOAP 1.1)
// or Code and Value (SOAP 1.2).
type soapScan struct {
	ns      string // the Envelope's namespace, once the root is read
	depth   int    // elements open
	matched int    // how many of them, from the root, are on the path
	binds   []nsBinding
	marks   [maxSOAPDepth + 1]int // len(binds) before each open element's own
	code    [maxSOAPCodeText]byte
	n       int // bytes of code held

	// Once a Server or Receiver code is read, the verdict waits for the
	// Fault's end tag: the fault's text and detail may still name a
	// client error that stack labels Server (faultRules).
	coded   bool
	pending Classification
	child   string // the local name of the Fault's child open now
	text    [maxSOAPFaultText]byte
	tn      int    // bytes of the fault's text held
	textAt  int    // the depth whose text is the fault's text, 0 if none
	texted  bool   // the fault's text element was read once already
	detail  string // the verdict's reason a NetSuite detail named
	dverd   Classification
	dtext   [maxSOAPFaultText]byte
	dn      int // bytes of the detail's text held
}

// nsBinding is one namespace declaration: xmlns:prefix="uri", or
// xmlns="uri" with an empty prefix.
type nsBinding struct{ prefix, uri string }

// step takes one token; done is true once the verdict (c, ok) is known.
func (s *soapScan) step(tok xml.Token) (c Classification, ok, done bool) {
	switch t := tok.(type) {
	case xml.StartElement:
		return s.start(t)
	case xml.EndElement:
		return s.end()
	case xml.CharData:
		switch {
		case s.collecting():
			if s.n+len(t) > len(s.code) {
				return Classification{}, false, true // no known code is that long
			}
			s.n += copy(s.code[s.n:], t)
		case s.textAt != 0 && s.depth == s.textAt:
			s.tn += copy(s.text[s.tn:], t) // the rest is not looked at
		case s.coded && s.depth >= 4 && (s.child == "detail" || s.child == "Detail"):
			s.dn += copy(s.dtext[s.dn:], t) // the detail's text, its first bytes
		case s.depth == 0 && len(bytes.TrimLeft(t, " \t\r\n")) > 0:
			return Classification{}, false, true // text outside the root: not XML
		}
	}
	// Comments, processing instructions and a DOCTYPE are skipped.
	return Classification{}, false, false
}

func (s *soapScan) start(t xml.StartElement) (c Classification, ok, done bool) {
	if s.collecting() || s.depth == maxSOAPDepth {
		return Classification{}, false, true
	}
	s.depth++
	s.marks[s.depth] = len(s.binds)
	for _, a := range t.Attr {
		switch {
		case a.Name.Space == "xmlns":
			s.binds = append(s.binds, nsBinding{a.Name.Local, a.Value})
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			s.binds = append(s.binds, nsBinding{"", a.Value})
		}
	}
	switch {
	case s.matched == s.depth-1 && s.onPath(t.Name):
		s.matched = s.depth
	case s.matched == 3:
		s.inFault(t.Name)
	case s.depth == 1:
		return Classification{}, false, true // the root is not an Envelope
	case s.depth == 3 && s.matched == 2:
		// The Body's first child is not a Fault. SOAP 1.2, and the WS-I
		// Basic Profile for SOAP 1.1, make a Fault the Body's only child,
		// so this is not a fault, and need not be read to its end.
		return Classification{}, false, true
	}
	return Classification{}, false, false
}

// onPath reports whether name, opened at s.depth inside the path so far, is
// the next element on it. At the root it learns the document's version.
func (s *soapScan) onPath(name xml.Name) bool {
	switch s.depth {
	case 1:
		if name.Local != "Envelope" || (name.Space != soap11Envelope && name.Space != soap12Envelope) {
			return false
		}
		s.ns = name.Space
		return true
	case 2:
		return name.Space == s.ns && name.Local == "Body"
	case 3:
		return name.Space == s.ns && name.Local == "Fault"
	case 4:
		if s.ns == soap11Envelope {
			return (name.Space == "" || name.Space == s.ns) && name.Local == "faultcode"
		}
		return name.Space == s.ns && name.Local == "Code"
	case 5:
		return s.ns == soap12Envelope && name.Space == s.ns && name.Local == "Value"
	}
	return false
}

// codeDepth is the depth of the element whose text is the fault code.
func (s *soapScan) codeDepth() int {
	switch s.ns {
	case soap11Envelope:
		return 4
	case soap12Envelope:
		return 5
	}
	return -1
}

func (s *soapScan) collecting() bool {
	return !s.coded && s.depth == s.codeDepth() && s.matched == s.depth
}

// end takes an end tag. Leaving the code gives the verdict, unless it is
// a Server or Receiver code, whose verdict waits for the Fault's end tag;
// leaving any other element on the path before a code was read means it
// held none.
func (s *soapScan) end() (c Classification, ok, done bool) {
	onPath := s.matched == s.depth
	switch {
	case onPath && s.depth == s.codeDepth() && !s.coded:
		c, ok = s.verdict()
		if !ok || !awaitsText(c) {
			return c, ok, true
		}
		s.coded, s.pending = true, c
	case onPath && !s.coded:
		return Classification{}, false, true
	case onPath && s.depth == 3:
		return s.final(), true, true
	}
	if s.depth == s.textAt {
		s.textAt, s.texted = 0, true
	}
	if s.depth == 4 && s.matched >= 3 {
		s.child = ""
	}
	s.binds = s.binds[:s.marks[s.depth]]
	if onPath {
		s.matched--
	}
	s.depth--
	return Classification{}, false, false
}

// inFault notes an element opened inside the Fault, off the path to its
// code: the fault's text (SOAP 1.1's faultstring, SOAP 1.2's first Text
// in Reason) is kept, and a NetSuite fault element in the detail is read
// by its name.
func (s *soapScan) inFault(name xml.Name) {
	switch s.depth {
	case 4:
		s.child = name.Local
		if name.Space != s.ns && (s.ns != soap11Envelope || name.Space != "") {
			s.child = ""
		}
		if s.ns == soap11Envelope && s.child == "faultstring" && !s.texted {
			s.textAt = 4
		}
	case 5:
		switch {
		case s.ns == soap12Envelope && s.child == "Reason" && name.Space == s.ns && name.Local == "Text" && !s.texted:
			s.textAt = 5
		case (s.child == "detail" || s.child == "Detail") && s.detail == "" && isNetSuiteFaults(name.Space):
			if r, ok := netSuiteFaults[name.Local]; ok {
				s.detail, s.dverd = "netsuite:"+name.Local, Classification{Retryable: r, Reason: "netsuite:" + name.Local}
			}
		}
	}
}

// final is the verdict at the Fault's end tag on a Server or Receiver
// code: a NetSuite detail's, else the first faultRule the fault's text
// meets, else the code's own.
func (s *soapScan) final() Classification {
	text := s.text[:s.tn]
	if s.pending == salesforceLimit {
		if bytes.Contains(text, []byte(salesforceDailyText)) {
			return Classification{Owed: true, Reason: "salesforce:TotalRequests"}
		}
		return s.pending
	}
	if s.detail != "" {
		return s.dverd
	}
	for _, r := range faultRules {
		if bytes.Contains(text, []byte(r.text)) || (r.detail && bytes.Contains(s.dtext[:s.dn], []byte(r.text))) {
			return Classification{Retryable: false, Reason: r.name}
		}
	}
	return s.pending
}

// awaitsText reports whether c is a code's verdict that a fault's text or
// detail can still change: Server's and Receiver's.
func awaitsText(c Classification) bool {
	return c.Reason == "soap:Server" || c.Reason == "soap:Receiver" || c == salesforceLimit
}

// faultRule is a text some SOAP stack writes in the fault it labels Server
// or Receiver for a request that will meet the same fault again.
type faultRule struct {
	name   string // the reason reported
	text   string // looked for in the fault's text, case and all
	detail bool   // looked for in the detail's text too
	source string // where the text comes from
}

// faultRules are the texts that turn a Server or Receiver fault terminal.
// Each is a stack's fixed message for a request it cannot dispatch, which
// that stack labels Server (Axis 1, Apache CXF) or Receiver (Metro).
var faultRules = []faultRule{
	{"axis:no_such_operation", "No such operation", false, "Apache Axis 1's noSuchOperation00 message (\"No such operation '{0}'\"), as in savonrb/savon spec/fixtures/response/html_soap_fault.xml"},
	{"cxf:action_mismatch", "does not match an operation", false, "Apache CXF's SoapActionInInterceptor (\"The given SOAPAction ... does not match an operation.\"), as OpenLiberty/open-liberty#28121 and zapadi/vies-dotnet#12 quote it"},
	{"metro:action_not_supported", "ActionNotSupportedException", false, "Metro's com.sun.xml.ws.addressing.model.ActionNotSupportedException, as in javaee/metro-jax-ws#93"},
	{"xsd:validation", "cvc-", true, "the XML Schema validator's error codes (cvc-type.3.1.3, cvc-complex-type.2.4.a, ...: XML Schema Part 1, Appendix C, Validation Rules), which Xerces, and so Metro's and CXF's schema validation, put at the head of their messages; a request the schema refuses is refused again"},
}

// netSuiteFaults are the fault elements NetSuite SuiteTalk puts in a
// fault's detail, in its platform faults namespace, and whether each is
// transient: the limits on concurrent and per-period requests and an
// unexpected error pass with time; a login, session, account, version or
// permission refusal, and a request too large or asking for too many
// records, meet the same fault again. NetSuite labels all of them
// Server.userException, so only the detail tells them apart. The names
// are those of NetSuite's platform.faults schema, as
// Stedi-Public-Archive/typesuite src/netsuite_webservices/2019_2/platform_faults.ts
// lists them; asyncFault, about an asynchronous job, is left to the code.
var netSuiteFaults = map[string]bool{
	"exceededConcurrentRequestLimitFault": true,
	"exceededRequestLimitFault":           true,
	"unexpectedErrorFault":                true,
	"invalidCredentialsFault":             false,
	"invalidSessionFault":                 false,
	"invalidAccountFault":                 false,
	"invalidVersionFault":                 false,
	"insufficientPermissionFault":         false,
	"exceededRequestSizeFault":            false,
	"exceededRecordCountFault":            false,
	"exceededUsageLimitFault":             false,
}

// isNetSuiteFaults reports whether ns is NetSuite's platform faults
// namespace, which names its release: urn:faults_2011_2.platform.webservices.netsuite.com.
func isNetSuiteFaults(ns string) bool {
	v, ok := strings.CutPrefix(ns, "urn:faults_")
	return ok && strings.HasSuffix(v, ".platform.webservices.netsuite.com")
}

// The WS-Addressing namespaces whose codes a SOAP 1.1 faultcode can carry:
// 1.0, the 2004/08 submission, and WCF's for bindings without addressing.
const (
	wsa10     = "http://www.w3.org/2005/08/addressing"
	wsa200408 = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
	wsaWCF    = "http://schemas.microsoft.com/ws/2005/05/addressing/none"
)

// wcfDispatcher is the namespace of WCF's own dispatcher faults. SOAP 1.1
// has no subcodes, so WCF writes the subcode as the faultcode: its
// InternalServiceFault is SOAP 1.2's Receiver, its DeserializationFailed
// the Sender's.
const wcfDispatcher = "http://schemas.microsoft.com/net/2005/12/windowscommunicationfoundation/dispatcher"

// The namespaces of Salesforce's SOAP API faults (partner and enterprise
// WSDLs), whose codes are the API's own (sf:INVALID_LOGIN).
const (
	sfPartnerFaults    = "urn:fault.partner.soap.sforce.com"
	sfEnterpriseFaults = "urn:fault.enterprise.soap.sforce.com"
)

// salesforceLimit is the verdict on Salesforce's sf:REQUEST_LIMIT_EXCEEDED,
// which it sends for its concurrent request limits, that clear in seconds,
// and for the org's rolling 24-hour limit, whose fault text names it
// (salesforceDailyText): that one is owed, read at the Fault's end tag.
var salesforceLimit = Classification{Retryable: true, Reason: "salesforce:REQUEST_LIMIT_EXCEEDED"}

// salesforceDailyText names the rolling 24-hour limit in Salesforce's
// fault text: "REQUEST_LIMIT_EXCEEDED: TotalRequests Limit exceeded.".
const salesforceDailyText = "TotalRequests Limit exceeded"

// unknownCode is the verdict on a well-formed code in no known set.
var unknownCode = Classification{Retryable: false, Reason: "soap:unknown"}

// verdict reads the code held, a QName, in the scope of its element.
func (s *soapScan) verdict() (Classification, bool) {
	code := strings.Trim(string(s.code[:s.n]), " \t\r\n")
	prefix, local, found := strings.Cut(code, ":")
	if !found {
		prefix, local = "", code
	} else if prefix == "" {
		return Classification{}, false
	}
	if local == "" || strings.ContainsAny(local, ": \t\r\n") {
		return Classification{}, false // not a QName
	}
	ns, ok := s.resolve(prefix)
	if !ok {
		return Classification{}, false
	}
	switch ns {
	case soap11Envelope:
		local, _, _ = strings.Cut(local, ".")
		return soap11Verdict(local), true
	case soap12Envelope:
		return soap12Verdict(local), true
	case wsa10, wsa200408, wsaWCF:
		return wsaVerdict(local), true
	case wcfDispatcher:
		return wcfVerdict(local), true
	case sfPartnerFaults, sfEnterpriseFaults:
		if local == "REQUEST_LIMIT_EXCEEDED" {
			return salesforceLimit, true
		}
		return unknownCode, true
	case "":
		local, _, _ = strings.Cut(local, ".")
		return bareVerdict(local), true
	}
	return unknownCode, true
}

// resolve finds the namespace prefix is bound to in the current scope: ok
// is false for an undeclared prefix, and for the reserved prefixes xml and
// xmlns, never SOAP's, whatever a document declares. No prefix gives the
// default namespace, "" when none is declared.
func (s *soapScan) resolve(prefix string) (uri string, ok bool) {
	if prefix == "xml" || prefix == "xmlns" {
		return "", false
	}
	for i := len(s.binds) - 1; i >= 0; i-- {
		if s.binds[i].prefix == prefix {
			return s.binds[i].uri, true
		}
	}
	return "", prefix == ""
}

func soap11Verdict(local string) Classification {
	switch local {
	case "Client":
		return Classification{Retryable: false, Reason: "soap:Client"}
	case "Server":
		return Classification{Retryable: true, Reason: "soap:Server"}
	case "VersionMismatch":
		return Classification{Retryable: false, Reason: "soap:VersionMismatch"}
	case "MustUnderstand":
		return Classification{Retryable: false, Reason: "soap:MustUnderstand"}
	}
	return unknownCode
}

func soap12Verdict(local string) Classification {
	switch local {
	case "Sender":
		return Classification{Retryable: false, Reason: "soap:Sender"}
	case "Receiver":
		return Classification{Retryable: true, Reason: "soap:Receiver"}
	case "VersionMismatch":
		return Classification{Retryable: false, Reason: "soap:VersionMismatch"}
	case "MustUnderstand":
		return Classification{Retryable: false, Reason: "soap:MustUnderstand"}
	case "DataEncodingUnknown":
		return Classification{Retryable: false, Reason: "soap:DataEncodingUnknown"}
	}
	return unknownCode
}

// bareVerdict reads a code in no namespace by its name, in either SOAP
// version's vocabulary.
func bareVerdict(local string) Classification {
	if c := soap11Verdict(local); c != unknownCode {
		return c
	}
	return soap12Verdict(local)
}

// wsaVerdict reads a WS-Addressing fault code: the names WS-Addressing 1.0
// (SOAP Binding, section 6.4) and the 2004/08 submission (section 4.4)
// define.
func wsaVerdict(local string) Classification {
	switch local {
	case "EndpointUnavailable":
		return Classification{Retryable: true, Reason: "wsa:EndpointUnavailable"}
	case "InvalidAddressingHeader", "InvalidAddress", "InvalidEPR", "InvalidCardinality",
		"MissingAddressInEPR", "DuplicateMessageID", "ActionMismatch",
		"MessageAddressingHeaderRequired", "DestinationUnreachable", "ActionNotSupported",
		"OnlyAnonymousAddressSupported", "OnlyNonAnonymousAddressSupported",
		"InvalidMessageInformationHeader", "MessageInformationHeaderRequired":
		return Classification{Retryable: false, Reason: "wsa:" + local}
	}
	return Classification{Retryable: false, Reason: "wsa:unknown"}
}

// wcfVerdict reads a code in WCF's dispatcher namespace by the SOAP 1.2
// code WCF puts above it.
func wcfVerdict(local string) Classification {
	switch local {
	case "InternalServiceFault":
		return Classification{Retryable: true, Reason: "wcf:InternalServiceFault"}
	case "DeserializationFailed":
		return Classification{Retryable: false, Reason: "wcf:DeserializationFailed"}
	}
	return unknownCode
}
