package fakes2s

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrMalformed is returned for an answer that is not the SOAP document
// expected: not XML, not a SOAP 1.1 Envelope, or without the operation's
// response and its required elements.
var ErrMalformed = errors.New("fakes2s: malformed SOAP answer")

// dateTimeLayout writes xsd:dateTime with milliseconds and the zone.
const dateTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Application XML namespaces: the envelope of a Grants.gov application
// and its header, where the submission title and the opportunity live.
// The fake reads the header's fields by local name (see readHeader).
const (
	metaGrantNS = "http://apply.grants.gov/system/MetaGrantApplication"
	headerNS    = "http://apply.grants.gov/system/Header-V1.0"
)

// ApplicationXML returns the text of a GrantApplicationXML element: a
// GrantApplication whose GrantSubmissionHeader carries title as its
// SubmissionTitle, followed by forms (XML, copied as is) in its Forms.
// The title is the only tie between the application and the pipeline's
// own submission: the service answers a tracking number, and
// GetApplicationList finds the application again by its title.
func ApplicationXML(title, forms string) string {
	var b bytes.Buffer
	b.WriteString(`<GrantApplication xmlns="` + metaGrantNS + `"><GrantSubmissionHeader xmlns="` + headerNS + `">`)
	element(&b, "SubmissionTitle", title)
	b.WriteString(`</GrantSubmissionHeader><Forms>` + forms + `</Forms></GrantApplication>`)
	return b.String()
}

// SubmitEnvelope returns a SubmitApplication request for an application
// titled title, its forms given as XML: the GrantApplicationXML holds
// ApplicationXML(title, forms) as text, escaped. Post it with
// SOAPAction Action(OpSubmitApplication).
func SubmitEnvelope(title, forms string) []byte {
	return ResubmitEnvelope("", title, forms)
}

// ResubmitEnvelope is SubmitEnvelope for an application that corrects
// the one with tracking number previous (the request's optional
// GrantsGovTrackingNumber); "" leaves it out. A previous that is not
// GRANT and 8 digits is refused with FaultInvalidTrackingNumber.
func ResubmitEnvelope(previous, title, forms string) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<app:SubmitApplicationRequest xmlns:app="` + Namespace + `" xmlns:gran="` + CommonNamespace + `">`)
		if previous != "" {
			element(b, "gran:GrantsGovTrackingNumber", previous)
		}
		element(b, "app:GrantApplicationXML", ApplicationXML(title, forms))
		b.WriteString(`</app:SubmitApplicationRequest>`)
	})
}

// ListEnvelope returns a GetApplicationList request with one
// ApplicationFilter per filter (Filter, FilterValue), in order. Post it
// with SOAPAction Action(OpGetApplicationList).
func ListEnvelope(filters ...Filter) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<app:GetApplicationListRequest xmlns:app="` + Namespace + `" xmlns:gran="` + CommonNamespace + `">`)
		for _, f := range filters {
			b.WriteString(`<gran:ApplicationFilter>`)
			element(b, "gran:Filter", f.Type)
			element(b, "gran:FilterValue", f.Value)
			b.WriteString(`</gran:ApplicationFilter>`)
		}
		b.WriteString(`</app:GetApplicationListRequest>`)
	})
}

// SubmissionListEnvelope returns a GetSubmissionList request with one
// SubmissionFilter per filter (Type, Value). Post it with SOAPAction
// Action(OpGetSubmissionList).
func SubmissionListEnvelope(filters ...Filter) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<app:GetSubmissionListRequest xmlns:app="` + Namespace + `" xmlns:app1="` + ApplicantNamespace + `">`)
		for _, f := range filters {
			b.WriteString(`<app1:SubmissionFilter>`)
			element(b, "app1:Type", f.Type)
			element(b, "app1:Value", f.Value)
			b.WriteString(`</app1:SubmissionFilter>`)
		}
		b.WriteString(`</app:GetSubmissionListRequest>`)
	})
}

// SubmitResponse returns the funder's answer to an accepted
// SubmitApplication, its Content-Type and its MTOM-framed body: a
// SubmitApplicationResponse with the tracking number and the
// ReceivedDateTime. A reconciler that found the application with Lookup
// hands the caller this answer in place of the one the funder never sent.
func SubmitResponse(trackingNumber string, received time.Time) (contentType string, body []byte) {
	return mtomFrame(document(func(b *bytes.Buffer) {
		b.WriteString(`<ns2:SubmitApplicationResponse xmlns="` + CommonNamespace + `" xmlns:ns2="` + Namespace + `">`)
		element(b, "GrantsGovTrackingNumber", trackingNumber)
		element(b, "ns2:ReceivedDateTime", received.Format(dateTimeLayout))
		b.WriteString(`</ns2:SubmitApplicationResponse>`)
	}))
}

// applicationListResponse is GetApplicationListResponse's envelope, its
// ApplicationInfo children in the schema's order.
func applicationListResponse(apps []application) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<ns2:GetApplicationListResponse xmlns="` + CommonNamespace + `" xmlns:ns2="` + Namespace + `">`)
		element(b, "ns2:AvailableApplicationNumber", strconv.Itoa(len(apps)))
		for _, a := range apps {
			b.WriteString(`<ns2:ApplicationInfo>`)
			optional(b, "CFDANumber", a.cfda)
			optional(b, "FundingOpportunityNumber", a.fon)
			element(b, "GrantsGovTrackingNumber", a.tracking)
			element(b, "ns2:ReceivedDateTime", a.received.Format(dateTimeLayout))
			element(b, "GrantsGovApplicationStatus", a.status)
			element(b, "ns2:StatusDateTime", a.statusAt.Format(dateTimeLayout))
			optional(b, "SubmissionTitle", a.title)
			b.WriteString(`</ns2:ApplicationInfo>`)
		}
		b.WriteString(`</ns2:GetApplicationListResponse>`)
	})
}

// submissionListResponse is GetSubmissionListResponse's envelope, its
// SubmissionDetails children in the schema's order.
func submissionListResponse(apps []application) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<ns2:GetSubmissionListResponse xmlns="` + CommonNamespace + `" xmlns:ns2="` + Namespace + `" xmlns:ns3="` + ApplicantNamespace + `">`)
		element(b, "ns2:AvailableApplicationNumber", strconv.Itoa(len(apps)))
		for _, a := range apps {
			b.WriteString(`<ns3:SubmissionDetails>`)
			element(b, "GrantsGovTrackingNumber", a.tracking)
			element(b, "GrantsGovApplicationStatus", a.status)
			element(b, "ns3:ReceivedDateTime", a.received.Format(dateTimeLayout))
			element(b, "ns3:StatusDateTime", a.statusAt.Format(dateTimeLayout))
			optional(b, "FundingOpportunityNumber", a.fon)
			optional(b, "SubmissionTitle", a.title)
			b.WriteString(`</ns3:SubmissionDetails>`)
		}
		b.WriteString(`</ns2:GetSubmissionListResponse>`)
	})
}

// faultEnvelope is a SOAP 1.1 fault, unqualified faultcode and
// faultstring, as the mirror writes it.
func faultEnvelope(code, text string) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<soap:Fault>`)
		element(b, "faultcode", code)
		element(b, "faultstring", text)
		b.WriteString(`</soap:Fault>`)
	})
}

// document wraps what body writes in a SOAP 1.1 Envelope and Body, under
// the prefix soap, which fault codes rely on.
func document(body func(b *bytes.Buffer)) []byte {
	var b bytes.Buffer
	b.WriteString(`<soap:Envelope xmlns:soap="` + soapNS + `"><soap:Body>`)
	body(&b)
	b.WriteString(`</soap:Body></soap:Envelope>`)
	return b.Bytes()
}

// element writes <name>text</name>, text escaped; characters XML cannot
// hold become U+FFFD.
func element(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	xml.EscapeText(b, []byte(text)) // a bytes.Buffer never fails
	b.WriteString("</" + name + ">")
}

// optional writes the element only if text is not empty.
func optional(b *bytes.Buffer, name, text string) {
	if text != "" {
		element(b, name, text)
	}
}

// Receipt is what SubmitApplication answers.
type Receipt struct {
	TrackingNumber   string
	ReceivedDateTime time.Time
}

// ApplicationInfo is one application in a GetApplicationList or
// GetSubmissionList answer.
type ApplicationInfo struct {
	TrackingNumber   string
	Status           string // a GrantsGovApplicationStatusType value
	SubmissionTitle  string
	ReceivedDateTime time.Time
	StatusDateTime   time.Time
}

// responseEnvelope is the shape of the three answers. encoding/xml's tags
// must be literals: the namespaces are soapNS, Namespace, CommonNamespace
// and ApplicantNamespace.
type responseEnvelope struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		Submit *struct {
			TrackingNumber string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovTrackingNumber"`
			Received       string `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 ReceivedDateTime"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 SubmitApplicationResponse"`
		List *struct {
			Available *int       `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 AvailableApplicationNumber"`
			Infos     []infoElem `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 ApplicationInfo"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 GetApplicationListResponse"`
		Submissions *struct {
			Available *int `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 AvailableApplicationNumber"`
			Details   []struct {
				TrackingNumber string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovTrackingNumber"`
				Status         string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovApplicationStatus"`
				Title          string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 SubmissionTitle"`
				Received       string `xml:"http://apply.grants.gov/system/ApplicantCommonElements-V1.0 ReceivedDateTime"`
				StatusAt       string `xml:"http://apply.grants.gov/system/ApplicantCommonElements-V1.0 StatusDateTime"`
			} `xml:"http://apply.grants.gov/system/ApplicantCommonElements-V1.0 SubmissionDetails"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 GetSubmissionListResponse"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

type infoElem struct {
	TrackingNumber string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovTrackingNumber"`
	Status         string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovApplicationStatus"`
	Title          string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 SubmissionTitle"`
	Received       string `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 ReceivedDateTime"`
	StatusAt       string `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 StatusDateTime"`
}

func readEnvelope(contentType string, body []byte) (responseEnvelope, error) {
	var env responseEnvelope
	doc, err := Envelope(contentType, body)
	if err != nil {
		return env, err
	}
	if err := xml.Unmarshal(doc, &env); err != nil {
		return env, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return env, nil
}

// ParseSubmitResponse reads the answer to SubmitApplication, MTOM-framed
// or bare, its Content-Type a hint ("" will do). An error wraps
// ErrMalformed.
func ParseSubmitResponse(contentType string, body []byte) (Receipt, error) {
	env, err := readEnvelope(contentType, body)
	if err != nil {
		return Receipt{}, err
	}
	s := env.Body.Submit
	if s == nil || !isTrackingNumber(strings.TrimSpace(s.TrackingNumber)) {
		return Receipt{}, fmt.Errorf("%w: no SubmitApplicationResponse with a GrantsGovTrackingNumber", ErrMalformed)
	}
	received, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s.Received))
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: ReceivedDateTime: %w", ErrMalformed, err)
	}
	return Receipt{TrackingNumber: strings.TrimSpace(s.TrackingNumber), ReceivedDateTime: received}, nil
}

// parseList reads the answer to GetApplicationList or GetSubmissionList.
// It checks that the count matches the list, so a truncated answer is an
// error, never a shorter list.
func parseList(contentType string, body []byte) ([]ApplicationInfo, error) {
	env, err := readEnvelope(contentType, body)
	if err != nil {
		return nil, err
	}
	var available *int
	var infos []infoElem
	switch l, s := env.Body.List, env.Body.Submissions; {
	case l != nil:
		available, infos = l.Available, l.Infos
	case s != nil:
		available = s.Available
		for _, d := range s.Details {
			infos = append(infos, infoElem(d))
		}
	default:
		return nil, fmt.Errorf("%w: no GetApplicationListResponse or GetSubmissionListResponse", ErrMalformed)
	}
	if available == nil || *available != len(infos) {
		return nil, fmt.Errorf("%w: AvailableApplicationNumber does not count the %d applications that follow", ErrMalformed, len(infos))
	}
	out := make([]ApplicationInfo, 0, len(infos))
	for _, e := range infos {
		a := ApplicationInfo{TrackingNumber: strings.TrimSpace(e.TrackingNumber), Status: strings.TrimSpace(e.Status), SubmissionTitle: e.Title}
		if !isTrackingNumber(a.TrackingNumber) || a.Status == "" {
			return nil, fmt.Errorf("%w: an application without a tracking number or a status", ErrMalformed)
		}
		if a.ReceivedDateTime, err = parseOptionalTime(e.Received); err != nil {
			return nil, err
		}
		if a.StatusDateTime, err = parseOptionalTime(e.StatusAt); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseOptionalTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return t, nil
}
