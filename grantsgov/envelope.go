package grantsgov

import (
	"bytes"
	"net/http"
)

// soapEnvelope finds the envelope; it is grantretry.SOAPEnvelope.
//
// Until then it is a small reader of the framing the Grants.gov mirror
// shows: a body that starts with a MIME boundary line ("--uuid:...") is
// MTOM/XOP, and its first part, the root, is the envelope (the attachments
// after it are never looked at); a body that starts with '<' is a plain
// envelope. The Content-Type is not consulted, since the mirror labels
// plain envelopes multipart/related too. It returns a sub-slice of body and
// never writes to it.
func soapEnvelope(resp *http.Response, body []byte) ([]byte, bool) {
	_ = resp // the headers are only a hint; the bytes decide
	b := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	switch {
	case bytes.HasPrefix(b, []byte("--")):
		return mimeRootPart(b)
	case len(b) > 0 && b[0] == '<':
		return b, true
	}
	return nil, false
}

// maxBoundaryLine bounds the boundary line: RFC 2046 caps a boundary at 70
// characters, and CXF's "uuid:" and a UUID take 41.
const maxBoundaryLine = 2 + 70 + 16

// mimeRootPart returns the content of the first part of a multipart body
// that starts with its boundary line: after the part's header lines and
// the blank line that ends them, up to the next boundary line or, if the
// body was cut short, its end.
func mimeRootPart(b []byte) ([]byte, bool) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > maxBoundaryLine {
		return nil, false
	}
	delim := bytes.TrimRight(b[:nl], " \t\r") // "--" and the boundary
	if len(delim) <= 2 {
		return nil, false
	}
	rest := b[nl+1:]
	// The part's headers end at the first empty line, CRLF or bare LF.
	for {
		eol := bytes.IndexByte(rest, '\n')
		if eol < 0 {
			return nil, false // cut off inside the headers
		}
		line := rest[:eol]
		rest = rest[eol+1:]
		if len(bytes.TrimRight(line, "\r")) == 0 {
			break
		}
		if bytes.HasPrefix(line, delim) {
			return nil, false // a part with no blank line after its headers
		}
	}
	if end := indexDelimiter(rest, delim); end >= 0 {
		rest = rest[:end]
	}
	return rest, true
}

// indexDelimiter finds the line break before the next boundary line.
func indexDelimiter(b, delim []byte) int {
	for off := 0; ; {
		i := bytes.Index(b[off:], delim)
		if i < 0 {
			return -1
		}
		at := off + i
		if at == 0 {
			return 0 // an empty root part
		}
		if b[at-1] == '\n' {
			if at > 1 && b[at-2] == '\r' {
				return at - 2
			}
			return at - 1
		}
		off = at + len(delim)
	}
}
