package grantretry

import (
	"bytes"
	"encoding/xml"
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

// ClassifySOAPFault is a ClassifyFunc for funders that speak SOAP, such as
// Grants.gov S2S, whose SOAP 1.1 faults all arrive as a 500: it tells the
// sender's fault (a refusal, terminal) from the receiver's (an outage,
// transient) by the fault code in the body.
//
// It reads only body, and of body at most the first MaxClassifyPeek bytes.
// It does not consult resp, which may be nil: not even its Content-Type,
// since funders send faults as text/xml, application/soap+xml and
// text/html alike.
//
// body is a SOAP fault when its root element is an Envelope in the SOAP 1.1
// (http://schemas.xmlsoap.org/soap/envelope/) or SOAP 1.2
// (http://www.w3.org/2003/05/soap-envelope) namespace, with a Body child
// whose first child element is a Fault, all three in that namespace (SOAP
// 1.2, and the WS-I Basic Profile for SOAP 1.1, make the Fault the Body's
// only child). Elements are matched by namespace and local name, so any
// prefix, or a default namespace, will do. The fault code is the text of
// the Fault's faultcode child in SOAP 1.1 (unqualified, as the SOAP 1.1
// schema has it, or in the envelope namespace) and of its Code/Value in
// SOAP 1.2. The code is a QName: its prefix is resolved against the
// namespace declarations in scope at that element, an unprefixed code
// takes the default namespace, and the code counts only when that is the
// document's envelope namespace. Whitespace around the code is ignored; in
// SOAP 1.1 only the part of the local name before the first dot counts, so
// "Client.Authentication" is Client. SOAP 1.2 subcodes are the funder's
// own and do not count. The verdicts:
//
//	SOAP 1.1  Client, VersionMismatch, MustUnderstand        terminal
//	SOAP 1.1  Server                                         transient
//	SOAP 1.2  Sender, VersionMismatch, MustUnderstand,
//	          DataEncodingUnknown                            terminal
//	SOAP 1.2  Receiver                                       transient
//
// The Reason is "soap:" and that name, whatever prefix the document used
// ("soap:Client", "soap:Receiver"); no other text from the body reaches it.
// The Transport puts the status's reason in front, as in
// "terminal:500;soap:Client".
//
// ok is false, leaving the verdict to the status, for everything else: a
// body that is empty or not XML; a root that is not a SOAP Envelope; an
// Envelope whose Body's first child is not a Fault; a Fault anywhere else;
// a Fault without a code; a code in any other namespace, under an
// undeclared prefix, of an unknown name, with an element inside it, or
// whose text, whitespace included, is longer than 256 bytes; and a
// document that, before the code's end tag, is malformed, is cut off,
// nests elements more than 32 deep, or declares an encoding other than
// UTF-8 (a UTF-8 byte-order mark is allowed). So a fault whose code ends
// beyond the MaxClassifyPeek bytes a Transport shows is not ok. Parsing
// stops as soon as the verdict is known; what follows is neither read nor
// checked.
//
// Hostile XML costs no more than its length: a DOCTYPE is skipped, never
// interpreted; no entity beyond XML's five predefined ones is ever
// expanded, and a reference to one makes the document malformed there (a
// billion-laughs entity used before or as the code leaves it not ok, one
// declared and never used changes nothing); nothing external is ever
// fetched. ClassifySOAPFault is a pure function, safe for concurrent use.
func ClassifySOAPFault(resp *http.Response, body []byte) (Classification, bool) {
	if len(body) > MaxClassifyPeek {
		body = body[:MaxClassifyPeek]
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '<' {
		return Classification{}, false // JSON, text, UTF-16: not worth a decoder
	}
	// The zero Decoder settings are the safe ones: Strict, no Entity map,
	// no CharsetReader.
	d := xml.NewDecoder(bytes.NewReader(body))
	var s soapScan
	for {
		tok, err := d.Token()
		if err != nil {
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
		if s.matched != s.depth {
			s.binds = s.binds[:s.marks[s.depth]]
			s.depth--
			return Classification{}, false, false
		}
		// Leaving the code gives the verdict; leaving any other element on
		// the path means it held no code.
		if s.depth == s.codeDepth() {
			c, ok = s.verdict()
			return c, ok, true
		}
		return Classification{}, false, true
	case xml.CharData:
		if s.collecting() {
			if s.n+len(t) > len(s.code) {
				return Classification{}, false, true // no known code is that long
			}
			s.n += copy(s.code[s.n:], t)
		} else if s.depth == 0 && len(bytes.TrimLeft(t, " \t\r\n")) > 0 {
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
	return s.depth == s.codeDepth() && s.matched == s.depth
}

// verdict reads the code held, a QName, in the scope of its element.
func (s *soapScan) verdict() (Classification, bool) {
	code := strings.Trim(string(s.code[:s.n]), " \t\r\n")
	prefix, local, found := strings.Cut(code, ":")
	if !found {
		prefix, local = "", code
	} else if prefix == "" || strings.Contains(local, ":") {
		return Classification{}, false
	}
	if s.resolve(prefix) != s.ns {
		return Classification{}, false
	}
	if s.ns == soap11Envelope {
		local, _, _ = strings.Cut(local, ".")
		return soap11Verdict(local)
	}
	return soap12Verdict(local)
}

// resolve finds the namespace prefix is bound to in the current scope; an
// unbound prefix has none. The reserved prefixes xml and xmlns are never
// SOAP's, whatever a document declares.
func (s *soapScan) resolve(prefix string) string {
	if prefix == "xml" || prefix == "xmlns" {
		return ""
	}
	for i := len(s.binds) - 1; i >= 0; i-- {
		if s.binds[i].prefix == prefix {
			return s.binds[i].uri
		}
	}
	return ""
}

func soap11Verdict(local string) (Classification, bool) {
	switch local {
	case "Client":
		return Classification{Retryable: false, Reason: "soap:Client"}, true
	case "Server":
		return Classification{Retryable: true, Reason: "soap:Server"}, true
	case "VersionMismatch":
		return Classification{Retryable: false, Reason: "soap:VersionMismatch"}, true
	case "MustUnderstand":
		return Classification{Retryable: false, Reason: "soap:MustUnderstand"}, true
	}
	return Classification{}, false
}

func soap12Verdict(local string) (Classification, bool) {
	switch local {
	case "Sender":
		return Classification{Retryable: false, Reason: "soap:Sender"}, true
	case "Receiver":
		return Classification{Retryable: true, Reason: "soap:Receiver"}, true
	case "VersionMismatch":
		return Classification{Retryable: false, Reason: "soap:VersionMismatch"}, true
	case "MustUnderstand":
		return Classification{Retryable: false, Reason: "soap:MustUnderstand"}, true
	case "DataEncodingUnknown":
		return Classification{Retryable: false, Reason: "soap:DataEncodingUnknown"}, true
	}
	return Classification{}, false
}
