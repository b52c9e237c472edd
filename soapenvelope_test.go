package grantretry

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// envCase is one body, the headers it comes with, and the envelope
// SOAPEnvelope must find in it ("" for none).
type envCase struct {
	name    string
	header  http.Header
	body    []byte
	want    string
	aliased bool // the result must be a subslice of body
}

// untouchableBody fails the test that reads it.
type untouchableBody struct{ t *testing.T }

func (b untouchableBody) Read([]byte) (int, error) { b.t.Error("resp.Body was read"); return 0, nil }
func (b untouchableBody) Close() error             { b.t.Error("resp.Body was closed"); return nil }

func (c envCase) check(t *testing.T) {
	t.Helper()
	var resp *http.Response
	if c.header != nil {
		resp = &http.Response{StatusCode: 500, Header: c.header, Body: untouchableBody{t}}
	}
	orig := bytes.Clone(c.body)
	got, ok := SOAPEnvelope(resp, c.body)
	if !bytes.Equal(c.body, orig) {
		t.Errorf("%s: SOAPEnvelope changed the body", c.name)
	}
	if ok != (c.want != "") || string(got) != c.want {
		t.Errorf("%s: SOAPEnvelope = %q, %v; want %q, %v", c.name, got, ok, c.want, c.want != "")
		return
	}
	if c.aliased && ok && !within(got, c.body) {
		t.Errorf("%s: the envelope was copied, though nothing needed decoding", c.name)
	}
}

// within reports whether sub lies in the memory of b.
func within(sub, b []byte) bool {
	if len(sub) == 0 || len(b) == 0 {
		return false
	}
	for i := range b {
		if &b[i] == &sub[0] {
			return len(b)-i >= len(sub)
		}
	}
	return false
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func zlibbed(s string) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func deflated(s string) []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.DefaultCompression)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

// cut is b without its last n bytes, as a peek cuts a long body.
func cut(b []byte, n int) []byte { return b[:len(b)-n] }

// mtom frames root as the root part of an MTOM body with boundary
// uuid:b, CXF's Content-ID, and an attachment after it.
func mtom(root, attachment string) string {
	return "--uuid:b\r\n" +
		`Content-Type: application/xop+xml; charset=UTF-8; type="text/xml"` + "\r\n" +
		"Content-Transfer-Encoding: binary\r\n" +
		"Content-ID: <root.message@cxf.apache.org>\r\n\r\n" +
		root + "\r\n" +
		"--uuid:b\r\n" +
		"Content-Type: application/octet-stream\r\n" +
		"Content-Transfer-Encoding: binary\r\n" +
		"Content-ID: <att-1@cxf.apache.org>\r\n\r\n" +
		attachment + "\r\n" +
		"--uuid:b--\r\n"
}

const mtomType = `multipart/related; type="application/xop+xml"; boundary="uuid:b"; start="<root.message@cxf.apache.org>"; start-info="text/xml"`

// readSample reads testdata/soapfaults/name.body and the headers beside it.
func readSample(t testing.TB, name string) (http.Header, []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "soapfaults")
	body, err := os.ReadFile(filepath.Join(dir, name+".body"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if f, err := os.Open(filepath.Join(dir, name+".headers")); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, name+".source")); err != nil {
		t.Fatalf("sample %s has no source note: %v", name, err)
	}
	return h, body
}

// TestSOAPEnvelope: where the envelope is found, in each framing, coding
// and charset, and where none is.
func TestSOAPEnvelope(t *testing.T) {
	fault := fault11("soap:Client")
	fault12 := fault12("env:Sender")
	att := "PK\x03\x04" + env11(`<soap:Fault><faultcode>soap:Server</faultcode></soap:Fault>`) + "\xff\xfe"
	latin1 := `<?xml version="1.0" encoding="ISO-8859-1"?>` + "\n" + fault11("soap:Client") // ASCII so far
	latin1Text := env11("<soap:Fault><faultcode>soap:Client</faultcode><faultstring>Donn\xe9es refus\xe9es</faultstring></soap:Fault>")
	latin1UTF8 := env11(`<soap:Fault><faultcode>soap:Client</faultcode><faultstring>Données refusées</faultstring></soap:Fault>`)
	cp1252Text := env11("<soap:Fault><faultcode>soap:Client</faultcode><faultstring>\x80 5 \x93due\x94 \x81</faultstring></soap:Fault>")
	cp1252UTF8 := env11(`<soap:Fault><faultcode>soap:Client</faultcode><faultstring>€ 5 “due” ` + "\u0081" + `</faultstring></soap:Fault>`)
	html := `<!DOCTYPE html><html><head><title>500 - Internal server error.</title></head><body><h2>500 - Internal server error.</h2></body></html>` + "\r\n"
	long := fault11("soap:Client") + strings.Repeat(" ", 1<<20)
	_, ggBody := readSample(t, "grantsgov-mtom-not-found")
	ggHeader, _ := readSample(t, "grantsgov-mtom-not-found")
	ggEnv := string(ggBody[bytes.Index(ggBody, []byte("<soap:Envelope")):bytes.LastIndex(ggBody, []byte("\r\n--uuid:"))])

	cases := []envCase{
		{"a plain 1.1 envelope, no response", nil, []byte(fault), fault, true},
		{"a plain 1.2 envelope", hdr("Content-Type", "application/soap+xml"), []byte(fault12), fault12, true},
		{"a default-namespace envelope", nil, []byte(`<Envelope xmlns="http://schemas.xmlsoap.org/soap/envelope/"><Body/></Envelope>`), `<Envelope xmlns="http://schemas.xmlsoap.org/soap/envelope/"><Body/></Envelope>`, true},
		{"the XML declaration and a byte-order mark are left out", nil, []byte("\xef\xbb\xbf<?xml version=\"1.0\"?>\n" + fault), fault, true},
		{"a DOCTYPE is left out", nil, []byte(`<!DOCTYPE soap:Envelope [<!ENTITY x "y">]>` + fault), fault, true},

		{"Grants.gov mirror MTOM fault, its own headers", ggHeader, ggBody, ggEnv, true},
		{"Grants.gov mirror MTOM fault, no response", nil, ggBody, ggEnv, true},
		{"Grants.gov mirror MTOM fault labelled text/xml", hdr("Content-Type", "text/xml; charset=utf-8"), ggBody, ggEnv, true},
		{"MTOM, attachments skipped", hdr("Content-Type", mtomType), []byte(mtom(fault, att)), fault, true},
		{"MTOM, start names the second part", hdr("Content-Type", strings.Replace(mtomType, "root.message", "att-1", 1)), []byte(mtom(fault, att)), env11(`<soap:Fault><faultcode>soap:Server</faultcode></soap:Fault>`) + "\xff\xfe", true},
		{"MTOM, start names no part", hdr("Content-Type", strings.Replace(mtomType, "root.message", "missing", 1)), []byte(mtom(fault, att)), "", false},
		{"MTOM, no start: the first part", hdr("Content-Type", `multipart/related; type="application/xop+xml"; boundary="uuid:b"`), []byte(mtom(fault, att)), fault, true},
		{"MTOM sniffed, blank lines before the first boundary", nil, []byte("\r\n\r\n" + mtom(fault, att)), fault, true},
		{"MTOM sniffed, LF line ends", nil, []byte(strings.ReplaceAll(mtom(fault, att), "\r\n", "\n")), fault, true},
		{"MTOM, the boundary in the header is wrong", hdr("Content-Type", `multipart/related; boundary="other"; start="<x>"`), []byte(mtom(fault, att)), fault, true},
		{"MTOM cut inside the root part", hdr("Content-Type", mtomType), []byte(upTo(mtom(fault, att), "</faultcode>")), upTo(fault, "</faultcode>"), true},
		{"MTOM with the envelope only in an attachment", hdr("Content-Type", mtomType), []byte(mtom(`<m:r xmlns:m="urn:m"/>`, att)), "", false},
		{"MTOM, the root part's charset on a folded line", hdr("Content-Type", mtomType), []byte(strings.Replace(mtom(latin1Text, att), "Content-Type: application/xop+xml; charset=UTF-8;", "Content-Type: application/xop+xml;\r\n charset=ISO-8859-1;", 1)), latin1UTF8, false},
		{"MTOM whose root part has no header end", nil, []byte("--uuid:b\r\nContent-Type: text/xml\r\n" + fault), "", false},
		{"labelled multipart, a plain envelope", hdr("Content-Type", mtomType), []byte(fault), fault, true},

		{"gzip", hdr("Content-Encoding", "gzip"), gzipped(fault), fault, false},
		{"x-gzip", hdr("Content-Encoding", "x-gzip"), gzipped(fault), fault, false},
		{"gzip sniffed, no response", nil, gzipped(fault), fault, false},
		{"gzip, MTOM inside", hdr("Content-Encoding", "gzip", "Content-Type", mtomType), gzipped(mtom(fault, att)), fault, false},
		{"deflate as zlib", hdr("Content-Encoding", "deflate"), zlibbed(fault), fault, false},
		{"deflate raw", hdr("Content-Encoding", "deflate"), deflated(fault), fault, false},
		{"deflate then gzip", hdr("Content-Encoding", "deflate, gzip"), gzipped(string(zlibbed(fault))), fault, false},
		{"gzip cut off before its trailer", hdr("Content-Encoding", "gzip"), cut(gzipped(fault), 4), fault, false},
		{"labelled gzip, plain bytes", hdr("Content-Encoding", "gzip"), []byte(fault), fault, true},
		{"an unknown coding, plain bytes", hdr("Content-Encoding", "br"), []byte(fault), fault, true},
		{"gzip of 1 MiB: decoded up to the peek", hdr("Content-Encoding", "gzip"), gzipped(long), long[:MaxClassifyPeek], false},

		{"ISO-8859-1 declared, ASCII text", nil, []byte(latin1), fault, true},
		{"ISO-8859-1 declared, Latin-1 text", nil, []byte(`<?xml version="1.0" encoding="ISO-8859-1"?>` + latin1Text), latin1UTF8, false},
		{"latin1 in the Content-Type", hdr("Content-Type", "text/xml; charset=latin1"), []byte(latin1Text), latin1UTF8, false},
		{"the Content-Type's charset wins over the declaration", hdr("Content-Type", "text/xml; charset=ISO-8859-1"), []byte(`<?xml version="1.0" encoding="UTF-8"?>` + latin1Text), latin1UTF8, false},
		{"windows-1252", hdr("Content-Type", "text/xml; charset=windows-1252"), []byte(cp1252Text), cp1252UTF8, false},
		{"US-ASCII", hdr("Content-Type", `text/xml; charset="us-ascii"`), []byte(fault), fault, true},
		{"the MTOM root part's charset", hdr("Content-Type", mtomType), []byte(strings.Replace(mtom(latin1Text, att), "charset=UTF-8", "charset=ISO-8859-1", 1)), latin1UTF8, false},
		{"Shift_JIS: not read", hdr("Content-Type", "text/xml; charset=Shift_JIS"), []byte(fault), "", false},
		{"UTF-16 declared: not read", nil, []byte(`<?xml version="1.0" encoding="UTF-16"?>` + fault), "", false},

		{"an HTML page with a fault appended", hdr("Content-Type", "text/html"), []byte(html + `<?xml version="1.0" encoding="utf-8"?>` + fault), fault, true},
		{"an HTML page, then a Latin-1 fault", hdr("Content-Type", "text/html"), []byte(html + `<?xml version="1.0" encoding="ISO-8859-1"?>` + latin1Text), latin1UTF8, false},
		{"text before the envelope", nil, []byte("oops" + fault), fault, true},

		{"empty", nil, nil, "", false},
		{"JSON", nil, []byte(`{"Envelope":"http://schemas.xmlsoap.org/soap/envelope/"}`), "", false},
		{"an HTML page alone", nil, []byte(html), "", false},
		{"an Envelope in another namespace", nil, []byte(strings.ReplaceAll(fault, "schemas.xmlsoap.org", "schemas.example.org")), "", false},
		{"an EnvelopeX element", nil, []byte(`<soap:EnvelopeX ` + soapNS + `/>`), "", false},
		{"an Envelope start tag cut off", nil, []byte(`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"`), "", false},
		{"Envelope as text, then an envelope", nil, []byte(`<p>Envelope <b:Envelope>` + fault), fault, true},
		{"UTF-16 with a byte-order mark", nil, []byte("\xff\xfe<\x00s\x00"), "", false},
	}
	for _, c := range cases {
		c.check(t)
	}
}

// TestSOAPEnvelopeBoundsDecompression: a compression bomb gives at most
// MaxClassifyPeek bytes.
func TestSOAPEnvelopeBoundsDecompression(t *testing.T) {
	bomb := gzipped(fault11("soap:Client") + strings.Repeat("\x00", 64<<20))
	got, ok := SOAPEnvelope(&http.Response{Header: hdr("Content-Encoding", "gzip")}, bomb)
	if !ok || len(got) != MaxClassifyPeek {
		t.Errorf("a %d-byte gzip of 64 MiB gave %d bytes, %v; want %d", len(bomb), len(got), ok, MaxClassifyPeek)
	}
}
