package fakes2s

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"mime"
	"mime/multipart"
	"strings"
)

// The MTOM/XOP framing of the service's answers, as HHS/simpler-grants-gov
// reproduces it for the live service (api/src/legacy_soap_api/legacy_soap_api_utils.py,
// get_soap_fault_error_response):
//
//	f"--uuid:{boundary_id}\r\n"
//	f'Content-Type: application/xop+xml; charset=UTF-8; type="text/xml"\r\n'
//	f"Content-Transfer-Encoding: binary\r\n"
//	f"Content-ID: <root.message@cxf.apache.org>\r\n\r\n"
//	f"{err}\r\n"
//	f"--uuid:{boundary_id}--"
//
// with the header
//
//	"multipart/related;"
//	' type="application/xop+xml";'
//	f' boundary="uuid:{boundary_id}";'
//	' start="<root.message@cxf.apache.org>";'
//	' start-info="text/xml"'
//
// The same file's get_soap_error_response answers a bare envelope under
// BASE_SOAP_API_RESPONSE_HEADERS, 'multipart/related; type="application/xop+xml"'
// with no boundary: the fake does that too, for the faults that come from
// that code path (the certificate checks, the generic server error).

// plainMultipartType is the label the mirror puts on a bare envelope.
const plainMultipartType = `multipart/related; type="application/xop+xml"`

// rootContentID is the Content-ID of the envelope's part.
const rootContentID = "<root.message@cxf.apache.org>"

// mtomFrame returns the Content-Type and the body of an MTOM answer whose
// root part, and only part, is envelope.
func mtomFrame(envelope []byte) (contentType string, body []byte) {
	boundary := "uuid:" + newUUID()
	var b bytes.Buffer
	b.WriteString("--" + boundary + "\r\n")
	b.WriteString("Content-Type: application/xop+xml; charset=UTF-8; type=\"text/xml\"\r\n")
	b.WriteString("Content-Transfer-Encoding: binary\r\n")
	b.WriteString("Content-ID: " + rootContentID + "\r\n\r\n")
	b.Write(envelope)
	b.WriteString("\r\n--" + boundary + "--")
	contentType = `multipart/related; type="application/xop+xml"; boundary="` + boundary +
		`"; start="` + rootContentID + `"; start-info="text/xml"`
	return contentType, b.Bytes()
}

// newUUID returns a random version 4 UUID, as the boundary's.
func newUUID() string {
	var u [16]byte
	rand.Read(u[:]) // never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// Envelope returns the SOAP envelope of a body as the service frames it:
// the root part of an MTOM body (the part named by the start parameter,
// else the first), or the body itself when it is not MIME-framed. The
// Content-Type is only a hint: the service labels bare envelopes
// multipart/related too, so a body that does not begin with a boundary
// line is taken as the envelope whatever its label. A request, which a
// CXF client with MTOM on also sends framed, is read the same way.
func Envelope(contentType string, body []byte) ([]byte, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !bytes.HasPrefix(trimmed, []byte("--")) {
		return body, nil
	}
	boundary, start := "", ""
	if mt, params, err := mime.ParseMediaType(contentType); err == nil && strings.HasPrefix(mt, "multipart/") {
		boundary, start = params["boundary"], params["start"]
	}
	if boundary == "" {
		// The boundary is the first line's, without its dashes.
		line, _, _ := bytes.Cut(trimmed[2:], []byte("\n"))
		boundary = strings.TrimSpace(string(line))
	}
	r := multipart.NewReader(bytes.NewReader(trimmed), boundary)
	var first []byte
	for {
		p, err := r.NextRawPart()
		if err != nil {
			if first != nil {
				return first, nil
			}
			return nil, fmt.Errorf("%w: no MIME part in a multipart body: %w", ErrMalformed, err)
		}
		var part bytes.Buffer
		if _, err := part.ReadFrom(p); err != nil {
			return nil, fmt.Errorf("%w: reading a MIME part: %w", ErrMalformed, err)
		}
		if start == "" || p.Header.Get("Content-ID") == start {
			return part.Bytes(), nil
		}
		if first == nil {
			first = part.Bytes()
		}
	}
}
