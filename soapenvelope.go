package grantretry

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// SOAPEnvelope returns the bytes of the SOAP envelope a response body
// carries, decoded for reading, and whether it found one: the UTF-8 text
// from the envelope's start tag (`<soap:Envelope ...`, any prefix or none)
// to the end of the MIME part, or of the body, that holds it. What came
// before the start tag (an XML declaration, a DOCTYPE, an HTML error page
// that a proxy or IIS put in front of the fault) is not part of it. It is
// the reader that ClassifySOAPFault uses, exported for classifiers of
// particular funders that read more of the envelope than its fault code.
//
// It reads only body and, when resp is not nil, resp's Content-Type and
// Content-Encoding headers, which it takes as hints, not as the truth,
// since funders and their proxies mislabel bodies. It never reads resp.Body
// and never modifies body: what it returns is a subslice of body when
// nothing had to be decoded, and a new slice otherwise. In order:
//
//   - Content-Encoding: a body in gzip (also x-gzip) or deflate (zlib, or
//     the raw DEFLATE some servers send under that name) is decompressed,
//     codings listed together undone in reverse order, and a body that
//     starts with the gzip magic number is decompressed whatever the
//     header says. At most MaxClassifyPeek bytes of output are produced,
//     so a cut-off stream gives what it holds and a compression bomb costs
//     no more than that. A body that does not decompress, or a coding it
//     does not know (br, zstd), is read as it is.
//   - MTOM/XOP and other multipart bodies (RFC 2046, RFC 2387): when the
//     Content-Type is multipart with a boundary found in the body, or,
//     whatever the label, when the body starts (after blank lines) with
//     "--" and a boundary line, the envelope is looked for in the root
//     part only: the part whose Content-ID the Content-Type's start
//     parameter names (and none, if no part has it), else the first part.
//     Attachments after it are skipped; a part cut off by the end of body
//     ends there. A part's Content-Transfer-Encoding is not undone:
//     SOAP stacks send the root part as 8bit or binary.
//   - The charset: the root part's charset parameter, else the
//     Content-Type's, else the encoding of the XML declaration just before
//     the envelope, else UTF-8. UTF-8 is returned as it is; ISO-8859-1
//     (latin1), windows-1252 and US-ASCII, by any of their usual labels,
//     are converted to UTF-8 the way browsers do (all three as
//     windows-1252). A body in any other charset (UTF-16, Shift_JIS) is
//     not found, since its bytes could not be read as UTF-8.
//   - The envelope: the first start tag named Envelope, with or without a
//     prefix, that declares the SOAP 1.1
//     (http://schemas.xmlsoap.org/soap/envelope/) or SOAP 1.2
//     (http://www.w3.org/2003/05/soap-envelope) namespace on itself, as
//     every SOAP stack writes it. What follows the start tag is not
//     checked: the result is the envelope's bytes, not a verdict on them,
//     and an XML decoder reading them still meets whatever they hold.
//
// A body with no such envelope gives (nil, false): empty, JSON, text, an
// HTML page alone, an envelope only in an attachment, one in a charset it
// cannot read.
//
// The cost is bounded by the body's length: every step is a forward scan
// of the body, or of at most MaxClassifyPeek decompressed bytes, and the
// charset conversion writes at most three bytes per byte read. Nothing is
// parsed as XML, so no entity is expanded and nothing is fetched.
// SOAPEnvelope is a pure function, safe for concurrent use.
func SOAPEnvelope(resp *http.Response, body []byte) ([]byte, bool) {
	var ctype, coding string
	if resp != nil {
		ctype = resp.Header.Get("Content-Type")
		coding = resp.Header.Get("Content-Encoding")
	}
	body = decodeContent(coding, body)
	part, charset, ok := rootPart(ctype, body)
	if !ok {
		return nil, false
	}
	return envelopeIn(part, charset)
}

// maxCodings bounds how many stacked Content-Encodings are undone: each
// costs a decompressor, and no server stacks more than two.
const maxCodings = 4

// decodeContent undoes the content codings of body that it knows.
func decodeContent(coding string, body []byte) []byte {
	if coding == "" {
		if isGzip(body) {
			if out, ok := inflate(body, gunzip); ok {
				return out
			}
		}
		return body
	}
	codings := strings.Split(coding, ",")
	for i := len(codings) - 1; i >= 0 && i >= len(codings)-maxCodings; i-- {
		var out []byte
		ok := false
		switch strings.ToLower(strings.TrimSpace(codings[i])) {
		case "identity", "":
			continue
		case "gzip", "x-gzip":
			out, ok = inflate(body, gunzip)
		case "deflate":
			if out, ok = inflate(body, unzlib); !ok {
				out, ok = inflate(body, unflate)
			}
		}
		if !ok {
			// Not what the label says, or a coding not known here: the
			// header is a hint, so the bytes are read as they are.
			return body
		}
		body = out
	}
	return body
}

func isGzip(b []byte) bool { return len(b) >= 3 && b[0] == 0x1f && b[1] == 0x8b && b[2] == 8 }

func gunzip(r io.Reader) (io.Reader, error)  { return gzip.NewReader(r) }
func unzlib(r io.Reader) (io.Reader, error)  { return zlib.NewReader(r) }
func unflate(r io.Reader) (io.Reader, error) { return flate.NewReader(r), nil }

// inflate decompresses body, keeping at most MaxClassifyPeek bytes of
// output; a stream cut off or corrupt after some output gives that output.
func inflate(body []byte, open func(io.Reader) (io.Reader, error)) ([]byte, bool) {
	r, err := open(bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	out, _ := io.ReadAll(io.LimitReader(r, MaxClassifyPeek))
	return out, len(out) > 0
}

// rootPart finds the part of body that can hold the envelope, and the
// charset its headers declare: the root part of a multipart body, or body.
// ok is false when a multipart body's start parameter names no part.
func rootPart(ctype string, body []byte) (part []byte, charset string, ok bool) {
	var start, boundary string
	var params map[string]string
	if ctype != "" {
		var media string
		media, params, _ = mime.ParseMediaType(ctype)
		if strings.HasPrefix(media, "multipart/") {
			boundary, start = params["boundary"], params["start"]
		}
	}
	at := -1
	if boundary != "" {
		at = delimiterAt(body, []byte(boundary))
	}
	if at < 0 {
		// The label is wrong or missing: the first line may still be a
		// boundary, and a start named for another boundary means nothing.
		boundary, at, start = sniffBoundary(body), -1, ""
		if boundary != "" {
			at = bytes.IndexByte(body, '-')
		}
	}
	if at < 0 {
		return body, params["charset"], true
	}
	p, partType, found := findPart(body[at:], []byte("--"+boundary), start)
	if !found {
		return nil, "", false
	}
	if cs := charsetOf(partType); cs != "" {
		return p, cs, true
	}
	return p, params["charset"], true
}

// delimiterAt is the index of the first "--"+boundary at the start of a
// line in body, or -1.
func delimiterAt(body, boundary []byte) int {
	for off := 0; off < len(body); {
		i := bytes.Index(body[off:], boundary)
		if i < 0 {
			return -1
		}
		i += off
		if i >= 2 && body[i-1] == '-' && body[i-2] == '-' && (i == 2 || body[i-3] == '\n') {
			return i - 2
		}
		off = i + 1
	}
	return -1
}

// sniffBoundary is the boundary of a body that starts, after blank lines,
// with a delimiter line: "--", 1 to 70 of the characters RFC 2046 allows in
// a boundary, and a line end. Otherwise it is "".
func sniffBoundary(body []byte) string {
	t := bytes.TrimLeft(body, " \t\r\n")
	if !bytes.HasPrefix(t, []byte("--")) {
		return ""
	}
	nl := bytes.IndexByte(t, '\n')
	if nl < 0 {
		return ""
	}
	b := bytes.TrimRight(t[2:nl], " \t\r")
	if len(b) == 0 || len(b) > 70 {
		return ""
	}
	for _, c := range b {
		if !isBoundaryByte(c) {
			return ""
		}
	}
	return string(b)
}

func isBoundaryByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("'()+_,-./:=? ", c) >= 0
}

// findPart walks the parts of body, which starts with delim, and returns
// the content and Content-Type of the root part: the one whose Content-ID
// is start, or the first when start is "".
func findPart(body, delim []byte, start string) (content []byte, ctype string, found bool) {
	start = trimID(start)
	pos := len(delim)
	for {
		rest := body[pos:]
		if bytes.HasPrefix(rest, []byte("--")) {
			return nil, "", false // the close delimiter
		}
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return nil, "", false
		}
		pos += nl + 1
		end, next := len(body), -1
		if i := indexDelimiter(body[pos:], delim); i >= 0 {
			end, next = pos+i, pos+i+1+len(delim)
			if end > pos && body[end-1] == '\r' {
				end--
			}
		}
		header, content := splitHeader(body[pos:end])
		id, ctype := partHeaders(header)
		if start == "" || trimID(id) == start {
			return content, ctype, true
		}
		if next < 0 {
			return nil, "", false
		}
		pos = next
	}
}

// indexDelimiter is the index of the "\n" before the next delim that
// starts a line of b, or -1.
func indexDelimiter(b, delim []byte) int {
	for off := 0; off < len(b); {
		i := bytes.Index(b[off:], delim)
		if i < 0 {
			return -1
		}
		i += off
		if i > 0 && b[i-1] == '\n' {
			return i - 1
		}
		off = i + 1
	}
	return -1
}

// splitHeader splits a MIME part at the blank line that ends its header; a
// part without one is all header.
func splitHeader(p []byte) (header, content []byte) {
	for off := 0; off < len(p); {
		nl := bytes.IndexByte(p[off:], '\n')
		if nl < 0 {
			return p, nil
		}
		line := bytes.TrimRight(p[off:off+nl], "\r")
		if len(line) == 0 {
			return p[:off], p[off+nl+1:]
		}
		off += nl + 1
	}
	return p, nil
}

// partHeaders reads a part's Content-ID and Content-Type; a line that
// starts with a space or a tab continues the header before it (RFC 5322
// folding, which some stacks use for a Content-Type's parameters).
func partHeaders(header []byte) (id, ctype string) {
	var name, value []byte
	flush := func() {
		v := string(bytes.TrimSpace(value))
		switch {
		case bytes.EqualFold(name, []byte("Content-ID")):
			id = v
		case bytes.EqualFold(name, []byte("Content-Type")):
			ctype = v
		}
		name, value = nil, nil
	}
	for len(header) > 0 {
		line := header
		if nl := bytes.IndexByte(header, '\n'); nl >= 0 {
			line, header = header[:nl], header[nl+1:]
		} else {
			header = nil
		}
		line = bytes.TrimRight(line, "\r")
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			if name != nil {
				value = append(append(value, ' '), bytes.TrimSpace(line)...)
			}
			continue
		}
		flush()
		n, v, ok := bytes.Cut(line, []byte(":"))
		if ok {
			name, value = bytes.TrimSpace(n), append([]byte(nil), v...)
		}
	}
	flush()
	return id, ctype
}

func trimID(id string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(id), "<"), ">")
}

func charsetOf(ctype string) string {
	if ctype == "" {
		return ""
	}
	_, params, _ := mime.ParseMediaType(ctype)
	return params["charset"]
}

// envelopeIn finds the envelope in part and returns it as UTF-8.
func envelopeIn(part []byte, charset string) ([]byte, bool) {
	i := envelopeStart(part)
	if i < 0 {
		return nil, false
	}
	if charset == "" {
		charset = declaredEncoding(part[:i])
	}
	switch charsetFamily(charset) {
	case familyUTF8:
		return part[i:], true
	case family1252:
		return windows1252ToUTF8(part[i:]), true
	}
	return nil, false
}

// envelopeStart is the index of the first Envelope start tag in b that
// declares a SOAP envelope namespace, or -1.
func envelopeStart(b []byte) int {
	const name = "Envelope"
	for off := 0; off < len(b); {
		j := bytes.Index(b[off:], []byte(name))
		if j < 0 {
			return -1
		}
		j += off
		off = j + len(name)
		lt := tagOpen(b, j)
		if lt < 0 || off >= len(b) || !endsName(b[off]) {
			continue
		}
		gt := bytes.IndexByte(b[off:], '>')
		if gt < 0 {
			return -1 // no tag after this one can end either
		}
		tag := b[off : off+gt]
		off += gt + 1 // tags do not overlap: the scan stays linear
		if bytes.Contains(tag, []byte(soap11Envelope)) || bytes.Contains(tag, []byte(soap12Envelope)) {
			return lt
		}
	}
	return -1
}

// maxPrefix bounds the namespace prefix looked for before a local name, so
// that walking back over it keeps the scan linear.
const maxPrefix = 64

// tagOpen is the index of the '<' that opens a start tag whose local name
// begins at j ("<Envelope" or "<p:Envelope"), or -1.
func tagOpen(b []byte, j int) int {
	if j > 0 && b[j-1] == '<' {
		return j - 1
	}
	if j < 2 || b[j-1] != ':' {
		return -1
	}
	k := j - 1
	for k > 0 && j-1-k < maxPrefix && isNameByte(b[k-1]) {
		k--
	}
	if k == j-1 || k == 0 || b[k-1] != '<' || !isNameStart(b[k]) {
		return -1
	}
	return k - 1
}

func endsName(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '>' || c == '/'
}

func isNameStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c >= 0x80
}

func isNameByte(c byte) bool {
	return isNameStart(c) || '0' <= c && c <= '9' || c == '-' || c == '.'
}

// declaredEncoding is the encoding named by the last XML declaration in
// pre, the bytes before the envelope, or "".
func declaredEncoding(pre []byte) string {
	i := bytes.LastIndex(pre, []byte("<?xml"))
	if i < 0 {
		return ""
	}
	decl := pre[i:]
	if j := bytes.Index(decl, []byte("?>")); j >= 0 {
		decl = decl[:j]
	}
	j := bytes.Index(decl, []byte("encoding"))
	if j < 0 {
		return ""
	}
	v := bytes.TrimLeft(decl[j+len("encoding"):], " \t\r\n")
	if len(v) == 0 || v[0] != '=' {
		return ""
	}
	v = bytes.TrimLeft(v[1:], " \t\r\n")
	if len(v) == 0 || (v[0] != '"' && v[0] != '\'') {
		return ""
	}
	q := v[0]
	v = v[1:]
	if k := bytes.IndexByte(v, q); k >= 0 {
		return string(v[:k])
	}
	return ""
}

const (
	familyOther = iota
	familyUTF8
	family1252
)

// charsetFamily sorts a charset label: UTF-8 (and no label), the labels
// browsers read as windows-1252 (the WHATWG Encoding Standard's list for
// it, which takes in ISO-8859-1 and US-ASCII), or another.
func charsetFamily(label string) int {
	switch strings.ToLower(strings.Trim(label, " \t\r\n\"'")) {
	case "", "utf-8", "utf8", "unicode-1-1-utf-8":
		return familyUTF8
	case "ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819", "iso-8859-1",
		"iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1", "iso_8859-1:1987", "l1", "latin1",
		"us-ascii", "windows-1252", "x-cp1252":
		return family1252
	}
	return familyOther
}

// cp1252High maps windows-1252's bytes 0x80 to 0x9F; the five it leaves
// undefined map to the C1 control of the same value, as WHATWG has it.
var cp1252High = [32]rune{
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
}

// windows1252ToUTF8 converts b; b itself when it is ASCII.
func windows1252ToUTF8(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, i, len(b)+len(b)/2)
	copy(out, b[:i])
	for _, c := range b[i:] {
		switch {
		case c < utf8.RuneSelf:
			out = append(out, c)
		case c < 0xA0:
			out = utf8.AppendRune(out, cp1252High[c-0x80])
		default:
			out = utf8.AppendRune(out, rune(c))
		}
	}
	return out
}
