package fakes2s

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// node is an element of a request, with its text and its child elements.
type node struct {
	XMLName  xml.Name
	Text     string `xml:",chardata"`
	Children []node `xml:",any"`
}

// requestEnvelope is a SOAP 1.1 request; the Body's element is checked
// against the operation by hand, as a validator walks a sequence.
type requestEnvelope struct {
	XMLName xml.Name
	Body    *struct {
		Children []node `xml:",any"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

// refusal is why the fake refuses a request: a fault code and string.
type refusal struct {
	code, text string
}

// CXF's faults for a body it cannot dispatch, before any schema check.
// apache/cxf, rt/bindings/soap/src/main/java/org/apache/cxf/binding/soap/interceptor/Messages.properties:
//
//	XML_STREAM_EXC=Error reading XMLStreamReader.
//	INVALID_11_VERSION=A SOAP 1.2 message is not valid when sent to a SOAP 1.1 only endpoint.
//
// and DocLiteralInInterceptor's "Message part {namespace}name was not
// recognized.  (Does it exist in service WSDL?)", answered soap:Client
// (the CXF services quoted in public fixtures, e.g. a mule test asserting
// "Message part {http://www.muleumo.org}ssss was not recognized.  (Does
// it exist in service WSDL?)"). These three are CXF's own codes: the
// Grants.gov mirror shows no text of its own for them.
const soap12NS = "http://www.w3.org/2003/05/soap-envelope"

func refuseNotXML() *refusal {
	return &refusal{"soap:Client", "Error reading XMLStreamReader."}
}

func refuseSOAP12() *refusal {
	return &refusal{"soap:VersionMismatch", "A SOAP 1.2 message is not valid when sent to a SOAP 1.1 only endpoint."}
}

func refuseUnknownPart(n xml.Name) *refusal {
	return &refusal{"soap:Client", "Message part {" + n.Space + "}" + n.Local + " was not recognized.  (Does it exist in service WSDL?)"}
}

func server(text string) *refusal { return &refusal{"soap:Server", text} }

// bodyElement reads a request and returns its Body's one element.
func bodyElement(envelope []byte) (node, *refusal) {
	var env requestEnvelope
	if err := xml.Unmarshal(envelope, &env); err != nil {
		return node{}, refuseNotXML()
	}
	if env.XMLName.Space == soap12NS {
		return node{}, refuseSOAP12()
	}
	if env.XMLName != (xml.Name{Space: soapNS, Local: "Envelope"}) || env.Body == nil {
		return node{}, refuseUnknownPart(env.XMLName)
	}
	if len(env.Body.Children) != 1 {
		return node{}, refuseUnknownPart(xml.Name{Space: soapNS, Local: "Body"})
	}
	return env.Body.Children[0], nil
}

// requestOperation returns the operation a Body element calls, "" if none
// of the three the fake serves.
func requestOperation(n xml.Name) string {
	if n.Space != Namespace {
		return ""
	}
	switch n.Local {
	case "SubmitApplicationRequest":
		return OpSubmitApplication
	case "GetApplicationListRequest":
		return OpGetApplicationList
	case "GetSubmissionListRequest":
		return OpGetSubmissionList
	}
	return ""
}

// isTrackingNumber reports whether s matches GrantsGovTrackingNumberType's
// pattern, GRANT[0-9]{8}.
func isTrackingNumber(s string) bool {
	digits, ok := strings.CutPrefix(s, "GRANT")
	if !ok || len(digits) != 8 {
		return false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// submitCall is a SubmitApplicationRequest as the funder reads it.
type submitCall struct {
	previous    string // GrantsGovTrackingNumber, of the application this one corrects
	application string // GrantApplicationXML's text
}

// parseSubmit checks a SubmitApplicationRequest against its sequence:
// GrantsGovTrackingNumber?, GrantApplicationXML, Attachment*.
func parseSubmit(n node) (submitCall, *refusal) {
	var c submitCall
	tracking := qname{CommonNamespace, "GrantsGovTrackingNumber"}
	appXML := qname{Namespace, "GrantApplicationXML"}
	attachment := qname{CommonNamespace, "Attachment"}
	i, kids := 0, n.Children
	if i < len(kids) && is(kids[i], tracking) {
		c.previous = strings.TrimSpace(kids[i].Text)
		if !isTrackingNumber(c.previous) {
			return c, server(FaultInvalidTrackingNumber)
		}
		i++
	}
	if i == len(kids) {
		return c, server(faultIncomplete("SubmitApplicationRequest", appXML))
	}
	if !is(kids[i], appXML) {
		expected := []qname{appXML}
		if i == 0 {
			expected = []qname{tracking, appXML}
		}
		return c, server(faultUnexpected(nameOf(kids[i]), expected))
	}
	c.application = kids[i].Text
	for _, k := range kids[i+1:] {
		if !is(k, attachment) {
			return c, server(faultUnexpected(nameOf(k), []qname{attachment}))
		}
	}
	return c, nil
}

// Filter is one filter of a list query: for GetApplicationList an
// ApplicationFilter (Filter, FilterValue), for GetSubmissionList a
// SubmissionFilter (Type, Value).
type Filter struct {
	Type, Value string
}

// parseApplicationList checks a GetApplicationListRequest: zero or more
// ApplicationFilter, each with an optional Filter from the enumeration and
// an optional FilterValue. The WSDL's xsd:unique on Filter selects
// "GetApplicationListRequest/ApplicationFilter" below the request itself,
// unprefixed, which matches nothing: the service does not enforce it, and
// neither does the fake.
func parseApplicationList(n node) ([]Filter, *refusal) {
	filterEl := qname{CommonNamespace, "ApplicationFilter"}
	typeEl, valueEl := qname{CommonNamespace, "Filter"}, qname{CommonNamespace, "FilterValue"}
	var filters []Filter
	for _, k := range n.Children {
		if !is(k, filterEl) {
			return nil, server(faultUnexpected(nameOf(k), []qname{filterEl}))
		}
		var f Filter
		i := 0
		if i < len(k.Children) && is(k.Children[i], typeEl) {
			f.Type = strings.TrimSpace(k.Children[i].Text)
			if !contains(applicationFilters(), f.Type) {
				return nil, server(faultEnumeration(f.Type, applicationFilters()))
			}
			i++
		}
		if i < len(k.Children) && is(k.Children[i], valueEl) {
			f.Value = k.Children[i].Text
			i++
		}
		if i < len(k.Children) {
			return nil, server(faultNoMoreChildren(nameOf(k.Children[i])))
		}
		if f.Type == "" {
			return nil, server(faultInvalidFilter(f.Type))
		}
		filters = append(filters, f)
	}
	return filters, nil
}

// parseSubmissionList checks a GetSubmissionListRequest: at most five
// SubmissionFilter, each a Type from the enumeration and a Value of at
// least one character, no Type twice (the WSDL's
// SubmissionFilter-Type-Uniqueness).
func parseSubmissionList(n node) ([]Filter, *refusal) {
	filterEl := qname{ApplicantNamespace, "SubmissionFilter"}
	typeEl, valueEl := qname{ApplicantNamespace, "Type"}, qname{ApplicantNamespace, "Value"}
	var filters []Filter
	for j, k := range n.Children {
		if !is(k, filterEl) {
			return nil, server(faultUnexpected(nameOf(k), []qname{filterEl}))
		}
		if j == maxSubmissionFilters {
			return nil, server(faultNoMoreChildren(nameOf(k)))
		}
		kids := k.Children
		switch {
		case len(kids) == 0:
			return nil, server(faultIncomplete("SubmissionFilter", typeEl))
		case !is(kids[0], typeEl):
			return nil, server(faultUnexpected(nameOf(kids[0]), []qname{typeEl}))
		case len(kids) == 1:
			return nil, server(faultIncomplete("SubmissionFilter", valueEl))
		case !is(kids[1], valueEl):
			return nil, server(faultUnexpected(nameOf(kids[1]), []qname{valueEl}))
		case len(kids) > 2:
			return nil, server(faultNoMoreChildren(nameOf(kids[2])))
		}
		f := Filter{Type: strings.TrimSpace(kids[0].Text), Value: kids[1].Text}
		if !contains(submissionFilters(), f.Type) {
			return nil, server(faultEnumeration(f.Type, submissionFilters()))
		}
		if f.Value == "" {
			return nil, server(faultMinLength(f.Value, "StringMin1Max255Type"))
		}
		for _, g := range filters {
			if g.Type == f.Type {
				return nil, server(faultDuplicate(f.Type, "SubmissionFilter-Type-Uniqueness", "GetSubmissionListRequest"))
			}
		}
		filters = append(filters, f)
	}
	return filters, nil
}

func is(n node, q qname) bool { return n.XMLName.Space == q.space && n.XMLName.Local == q.local }

func nameOf(n node) qname { return qname{n.XMLName.Space, n.XMLName.Local} }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// header is what the fake reads of an application: the fields of its
// GrantSubmissionHeader that the list queries filter on.
type header struct {
	title, opportunityID, cfda, fon string
	wellFormed                      bool
}

// readHeader reads the first SubmissionTitle, OpportunityID, CFDANumber
// and FundingOpportunityNumber elements of an application, by local name.
// The real service takes them from the application's
// GrantSubmissionHeader, a form schema the reference does not hold; the
// fake does not check the forms. An application that is not well-formed
// XML is still received, and its status is Rejected with Errors: Grants.gov
// validates the application after it has answered with a tracking number.
func readHeader(application string) header {
	h := header{wellFormed: true}
	d := xml.NewDecoder(strings.NewReader(application))
	var field *string
	for {
		tok, err := d.Token()
		if err != nil {
			h.wellFormed = errors.Is(err, io.EOF)
			return h
		}
		switch t := tok.(type) {
		case xml.StartElement:
			field = nil
			switch t.Name.Local {
			case "SubmissionTitle":
				field = &h.title
			case "OpportunityID":
				field = &h.opportunityID
			case "CFDANumber":
				field = &h.cfda
			case "FundingOpportunityNumber":
				field = &h.fon
			}
			if field != nil && *field != "" {
				field = nil // the first one counts
			}
		case xml.CharData:
			if field != nil {
				*field += string(t)
			}
		case xml.EndElement:
			if field != nil {
				*field = strings.TrimSpace(*field)
			}
			field = nil
		}
	}
}
