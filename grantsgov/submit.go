package grantsgov

import (
	"bytes"
	"crypto/sha256"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The service's namespaces (ApplicantWebServices-V2.0.wsdl and
// GrantsCommonElements-V1.0.xsd): the operations' elements and their own
// children, and the common elements (GrantsGovTrackingNumber,
// SubmissionTitle, GrantsGovApplicationStatus, ApplicationFilter).
const (
	servicesNS = "http://apply.grants.gov/services/ApplicantWebServices-V2.0"
	commonNS   = "http://apply.grants.gov/system/GrantsCommonElements-V1.0"
)

// ErrMalformed is wrapped by the error of ParseSubmitResponse, and of a
// list query whose answer is not the document its operation answers: not
// a SOAP 1.1 envelope, framed or bare, or without the response and its
// required elements.
var ErrMalformed = errors.New("grantretry: grantsgov: not the answer the operation sends")

// ErrNoTitle is wrapped by the error of SubmissionTitle for a request that
// is not a SubmitApplication whose application has a SubmissionTitle in
// its GrantSubmissionHeader.
var ErrNoTitle = errors.New("grantretry: grantsgov: no SubmissionTitle in a SubmitApplication request")

// Receipt is what SubmitApplication answers for an application the
// service received: its tracking number and when it was received, as the
// service's clock tells it.
type Receipt struct {
	TrackingNumber   string // GRANT and 8 digits (GrantsGovTrackingNumberType)
	ReceivedDateTime time.Time
}

// submitResponse is the shape of SubmitApplicationResponse.
type submitResponse struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		Submit *struct {
			TrackingNumber string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovTrackingNumber"`
			Received       string `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 ReceivedDateTime"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 SubmitApplicationResponse"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

// ParseSubmitResponse reads the answer to SubmitApplication: the body of
// a 200, MTOM-framed or a bare envelope, whatever its Content-Type says.
// It reads the answer a reconciler built by NewReconciler hands back the
// same way. The error wraps ErrMalformed for anything but a
// SubmitApplicationResponse with a GrantsGovTrackingNumber of the
// schema's pattern and a ReceivedDateTime.
func ParseSubmitResponse(body []byte) (Receipt, error) {
	env, ok := soapEnvelope(nil, body)
	if !ok {
		return Receipt{}, fmt.Errorf("%w: not a SOAP envelope, framed or bare", ErrMalformed)
	}
	var r submitResponse
	if err := xml.Unmarshal(env, &r); err != nil {
		return Receipt{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	s := r.Body.Submit
	if s == nil {
		return Receipt{}, fmt.Errorf("%w: no SubmitApplicationResponse", ErrMalformed)
	}
	tn := strings.TrimSpace(s.TrackingNumber)
	if !isTrackingNumber(tn) {
		return Receipt{}, fmt.Errorf("%w: GrantsGovTrackingNumber %q is not GRANT and 8 digits", ErrMalformed, tn)
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s.Received))
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: ReceivedDateTime: %w", ErrMalformed, err)
	}
	return Receipt{TrackingNumber: tn, ReceivedDateTime: at}, nil
}

// isTrackingNumber reports whether s is GRANT and 8 digits, the pattern of
// GrantsGovTrackingNumberType.
func isTrackingNumber(s string) bool {
	d, ok := strings.CutPrefix(s, "GRANT")
	if !ok || len(d) != 8 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// SubmissionTitle returns the SubmissionTitle of a SubmitApplication
// request: the body a pipeline posts, MTOM-framed or a bare envelope. The
// title is read from the GrantSubmissionHeader of the application in the
// request's GrantApplicationXML, the text the service keeps and the list
// queries filter on; surrounding spaces are trimmed. A pipeline can check
// with it, before it sends, that the title is its submission id, as a
// Reconciler requires. The error wraps ErrNoTitle for a request that has
// none, and for one that is not a well-formed SubmitApplication.
func SubmissionTitle(request []byte) (string, error) {
	env, ok := soapEnvelope(nil, request)
	if !ok {
		return "", fmt.Errorf("%w: not a SOAP envelope, framed or bare", ErrNoTitle)
	}
	app, inline, err := applicationXML(env)
	if err != nil {
		return "", err
	}
	if inline != "" {
		return inline, nil
	}
	title, err := headerTitle(xml.NewDecoder(strings.NewReader(app)))
	if err != nil {
		return "", err
	}
	return title, nil
}

// applicationXML returns the text of the request's
// Envelope/Body/SubmitApplicationRequest/GrantApplicationXML, the
// application as the schema's xsd:string holds it, escaped or as CDATA.
// An application written as child elements instead has its title read
// on the way and returned as inline.
func applicationXML(env []byte) (app, inline string, err error) {
	d := xml.NewDecoder(bytes.NewReader(env))
	path := make([]xml.Name, 0, 4)
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return "", "", fmt.Errorf("%w: no GrantApplicationXML in a SubmitApplicationRequest: %w", ErrNoTitle, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(path) == 3 && isName(t.Name, servicesNS, "GrantApplicationXML") && isRequest(path) {
				return grantApplicationText(d, &text)
			}
			if len(path) == maxDepth {
				return "", "", fmt.Errorf("%w: nested deeper than %d elements", ErrNoTitle, maxDepth)
			}
			path = append(path, t.Name)
		case xml.EndElement:
			path = path[:len(path)-1]
		}
	}
}

// isRequest reports whether path is Envelope/Body/SubmitApplicationRequest.
func isRequest(path []xml.Name) bool {
	return isName(path[0], soap11Envelope, "Envelope") && isName(path[1], soap11Envelope, "Body") &&
		isName(path[2], servicesNS, "SubmitApplicationRequest")
}

func isName(n xml.Name, space, local string) bool { return n.Space == space && n.Local == local }

// grantApplicationText reads GrantApplicationXML's content to its end.
func grantApplicationText(d *xml.Decoder, text *strings.Builder) (app, inline string, err error) {
	tok, err := d.Token()
	for ; err == nil; tok, err = d.Token() {
		switch t := tok.(type) {
		case xml.CharData:
			text.Write(t)
		case xml.StartElement:
			title, err := headerTitleFrom(d, t)
			return "", title, err
		case xml.EndElement:
			return text.String(), "", nil
		}
	}
	return "", "", fmt.Errorf("%w: GrantApplicationXML: %w", ErrNoTitle, err)
}

// headerTitle finds GrantSubmissionHeader/SubmissionTitle in an
// application read by d.
func headerTitle(d *xml.Decoder) (string, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return "", fmt.Errorf("%w: the application has no GrantSubmissionHeader with a SubmissionTitle: %w", ErrNoTitle, err)
		}
		if t, ok := tok.(xml.StartElement); ok {
			return headerTitleFrom(d, t)
		}
	}
}

// headerTitleFrom is headerTitle from the application's root element,
// start. The header's elements are read by their local names, as the
// header's schema version changes its namespace.
func headerTitleFrom(d *xml.Decoder, start xml.StartElement) (string, error) {
	parent := []string{start.Name.Local}
	for {
		tok, err := d.Token()
		if err != nil {
			return "", fmt.Errorf("%w: the application has no GrantSubmissionHeader with a SubmissionTitle: %w", ErrNoTitle, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "SubmissionTitle" && parent[len(parent)-1] == "GrantSubmissionHeader" {
				var title string
				if err := d.DecodeElement(&title, &t); err != nil {
					return "", fmt.Errorf("%w: SubmissionTitle: %w", ErrNoTitle, err)
				}
				if title = strings.TrimSpace(title); title == "" {
					return "", fmt.Errorf("%w: the SubmissionTitle is empty", ErrNoTitle)
				}
				return title, nil
			}
			if len(parent) == maxDepth {
				return "", fmt.Errorf("%w: nested deeper than %d elements", ErrNoTitle, maxDepth)
			}
			parent = append(parent, t.Name.Local)
		case xml.EndElement:
			parent = parent[:len(parent)-1]
			if len(parent) == 0 {
				return "", fmt.Errorf("%w: the application has no GrantSubmissionHeader with a SubmissionTitle", ErrNoTitle)
			}
		}
	}
}

// rootContentID is the Content-ID of the envelope's part in the service's
// MTOM answers (Apache CXF's).
const rootContentID = "<root.message@cxf.apache.org>"

// receiptResponse returns the answer the service sends for an accepted
// SubmitApplication: a 200 whose body is MTOM-framed as the service frames
// it (HHS/simpler-grants-gov api/src/legacy_soap_api/legacy_soap_api_utils.py),
// the envelope the root and only part. received is written as the list
// query answered it. The boundary is derived from the receipt, so the
// same receipt always reads the same, with no randomness to inject.
func receiptResponse(tracking, received string) *http.Response {
	var env bytes.Buffer
	env.WriteString(`<soap:Envelope xmlns:soap="` + soap11Envelope + `"><soap:Body>`)
	env.WriteString(`<ns2:SubmitApplicationResponse xmlns="` + commonNS + `" xmlns:ns2="` + servicesNS + `">`)
	writeElement(&env, "GrantsGovTrackingNumber", tracking)
	writeElement(&env, "ns2:ReceivedDateTime", received)
	env.WriteString(`</ns2:SubmitApplicationResponse></soap:Body></soap:Envelope>`)

	sum := sha256.Sum256([]byte(tracking + " " + received))
	boundary := fmt.Sprintf("uuid:%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	var b bytes.Buffer
	b.WriteString("--" + boundary + "\r\n")
	b.WriteString("Content-Type: application/xop+xml; charset=UTF-8; type=\"text/xml\"\r\n")
	b.WriteString("Content-Transfer-Encoding: binary\r\n")
	b.WriteString("Content-ID: " + rootContentID + "\r\n\r\n")
	b.Write(env.Bytes())
	b.WriteString("\r\n--" + boundary + "--")
	ct := `multipart/related; type="application/xop+xml"; boundary="` + boundary +
		`"; start="` + rootContentID + `"; start-info="text/xml"`
	return &http.Response{
		Status: strconv.Itoa(http.StatusOK) + " " + http.StatusText(http.StatusOK), StatusCode: http.StatusOK,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {ct}},
		Body:          io.NopCloser(bytes.NewReader(b.Bytes())),
		ContentLength: int64(b.Len()),
	}
}

// writeElement writes <name>text</name>, text escaped.
func writeElement(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	_ = xml.EscapeText(b, []byte(text)) // a bytes.Buffer never fails
	b.WriteString("</" + name + ">")
}
