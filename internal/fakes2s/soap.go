package fakes2s

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// PortPath is the path of the funder's SOAP port, where both operations
// are posted.
const PortPath = "/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort"

// Namespace is the XML namespace of the operations' request and response
// elements.
const Namespace = "http://apply.grants.gov/services/ApplicantWebServices-V2.0"

// ContentType is the media type of every SOAP document the funder and
// Lookup send.
const ContentType = "text/xml; charset=utf-8"

// soapNS is the SOAP 1.1 envelope namespace.
const soapNS = "http://schemas.xmlsoap.org/soap/envelope/"

// ErrMalformed is returned for an answer that is not the SOAP document
// expected: not XML, not a SOAP 1.1 Envelope, or without the operation's
// response and its required elements.
var ErrMalformed = errors.New("fakes2s: malformed SOAP answer")

// op is the operation a request calls.
type op int

const (
	opSubmit op = iota
	opList
)

// call is a request as the funder reads it.
type call struct {
	op op
	id string // the SubmissionID, trimmed
}

// requestEnvelope is the shape of both requests. encoding/xml's tags must
// be literals: the namespaces are soapNS and Namespace.
type requestEnvelope struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		Submit *struct {
			SubmissionID string `xml:"SubmissionID"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 SubmitApplicationRequest"`
		List *struct {
			SubmissionID string `xml:"SubmissionID"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 GetApplicationListRequest"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

// parseCall reads a request body. A body that names the list operation is
// a query even when it is otherwise malformed; anything else is taken for
// a submission.
func parseCall(body []byte) (call, error) {
	var env requestEnvelope
	if err := xml.Unmarshal(body, &env); err != nil {
		return call{}, fmt.Errorf("not a SOAP 1.1 envelope: %w", err)
	}
	s, l := env.Body.Submit, env.Body.List
	switch {
	case s != nil && l != nil:
		return call{}, errors.New("more than one operation in the Body")
	case l != nil:
		c := call{op: opList, id: strings.TrimSpace(l.SubmissionID)}
		if c.id == "" {
			return c, errors.New("GetApplicationListRequest has no SubmissionID")
		}
		return c, nil
	case s != nil:
		c := call{op: opSubmit, id: strings.TrimSpace(s.SubmissionID)}
		if c.id == "" {
			return c, errors.New("SubmitApplicationRequest has no SubmissionID")
		}
		return c, nil
	}
	return call{}, errors.New("no SubmitApplicationRequest or GetApplicationListRequest in the Body")
}

// SubmitEnvelope returns a SubmitApplication request for a submission id,
// with payload as the text of its GrantApplicationXML element. Both are
// escaped; characters XML cannot hold become U+FFFD.
func SubmitEnvelope(submissionID, payload string) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<SubmitApplicationRequest xmlns="` + Namespace + `">`)
		element(b, "SubmissionID", submissionID)
		element(b, "GrantApplicationXML", payload)
		b.WriteString(`</SubmitApplicationRequest>`)
	})
}

// ListEnvelope returns a GetApplicationList query for a submission id.
func ListEnvelope(submissionID string) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<GetApplicationListRequest xmlns="` + Namespace + `">`)
		element(b, "SubmissionID", submissionID)
		b.WriteString(`</GetApplicationListRequest>`)
	})
}

// SubmitResponse returns the funder's answer to an accepted
// SubmitApplication for a submission id: a SubmitApplicationResponse with
// the application's tracking number, as ParseSubmitResponse reads it. A
// reconciler that found the application with Lookup hands the caller this
// answer in place of the one the funder never sent.
func SubmitResponse(submissionID, trackingNumber string) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<SubmitApplicationResponse xmlns="` + Namespace + `">`)
		element(b, "GrantsGovTrackingNumber", trackingNumber)
		element(b, "SubmissionID", submissionID)
		b.WriteString(`</SubmitApplicationResponse>`)
	})
}

func listResponse(id string, tracking []string) []byte {
	return document(func(b *bytes.Buffer) {
		b.WriteString(`<GetApplicationListResponse xmlns="` + Namespace + `">`)
		element(b, "AvailableApplicationNumber", strconv.Itoa(len(tracking)))
		for _, t := range tracking {
			b.WriteString(`<ApplicationInfo>`)
			element(b, "GrantsGovTrackingNumber", t)
			element(b, "SubmissionID", id)
			element(b, "GrantsGovApplicationStatus", "Received")
			b.WriteString(`</ApplicationInfo>`)
		}
		b.WriteString(`</GetApplicationListResponse>`)
	})
}

// document wraps what body writes in a SOAP 1.1 Envelope and Body, under
// the prefix soap, which fault codes rely on.
func document(body func(b *bytes.Buffer)) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<soap:Envelope xmlns:soap="` + soapNS + `"><soap:Body>`)
	body(&b)
	b.WriteString(`</soap:Body></soap:Envelope>`)
	return b.Bytes()
}

// element writes <name>text</name>, text escaped.
func element(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	xml.EscapeText(b, []byte(text)) // a bytes.Buffer never fails
	b.WriteString("</" + name + ">")
}

func writeSOAP(w http.ResponseWriter, status int, doc []byte) {
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(status)
	w.Write(doc)
}

// writeFault answers a SOAP 1.1 fault; code is "soap:Client" or
// "soap:Server".
func writeFault(w http.ResponseWriter, status int, code, reason string) {
	writeSOAP(w, status, document(func(b *bytes.Buffer) {
		b.WriteString(`<soap:Fault>`)
		element(b, "faultcode", code)
		element(b, "faultstring", reason)
		b.WriteString(`</soap:Fault>`)
	}))
}

// responseEnvelope is the shape of both answers.
type responseEnvelope struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		Submit *struct {
			TrackingNumber string `xml:"GrantsGovTrackingNumber"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 SubmitApplicationResponse"`
		List *struct {
			Available *int `xml:"AvailableApplicationNumber"`
			Infos     []struct {
				TrackingNumber string `xml:"GrantsGovTrackingNumber"`
				SubmissionID   string `xml:"SubmissionID"`
			} `xml:"ApplicationInfo"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 GetApplicationListResponse"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

// ParseSubmitResponse returns the tracking number in the body of a 200
// answer to SubmitApplication. An error wraps ErrMalformed.
func ParseSubmitResponse(body []byte) (trackingNumber string, err error) {
	var env responseEnvelope
	if err := xml.Unmarshal(body, &env); err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if env.Body.Submit == nil || strings.TrimSpace(env.Body.Submit.TrackingNumber) == "" {
		return "", fmt.Errorf("%w: no SubmitApplicationResponse with a GrantsGovTrackingNumber", ErrMalformed)
	}
	return strings.TrimSpace(env.Body.Submit.TrackingNumber), nil
}

// parseListResponse returns the tracking numbers in the body of a 200
// answer to a GetApplicationList query about id. It checks that the count
// matches the list and that every application is id's, so a truncated or
// misdirected answer is an error, never a shorter list.
func parseListResponse(body []byte, id string) ([]string, error) {
	var env responseEnvelope
	if err := xml.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	l := env.Body.List
	if l == nil || l.Available == nil {
		return nil, fmt.Errorf("%w: no GetApplicationListResponse with an AvailableApplicationNumber", ErrMalformed)
	}
	if *l.Available != len(l.Infos) {
		return nil, fmt.Errorf("%w: AvailableApplicationNumber is %d, but %d ApplicationInfo follow", ErrMalformed, *l.Available, len(l.Infos))
	}
	id = strings.TrimSpace(id) // as the funder reads it
	tracking := make([]string, 0, len(l.Infos))
	for _, info := range l.Infos {
		t := strings.TrimSpace(info.TrackingNumber)
		if t == "" || strings.TrimSpace(info.SubmissionID) != id {
			return nil, fmt.Errorf("%w: an ApplicationInfo without a tracking number, or for another submission", ErrMalformed)
		}
		tracking = append(tracking, t)
	}
	return tracking, nil
}
