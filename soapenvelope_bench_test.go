package grantretry

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strings"
	"testing"
)

// benchBody is one 64 KiB body the SOAP readers are measured on.
type benchBody struct {
	name  string
	ctype string
	body  []byte
	fault bool
}

// soapBenchBodies are bodies of MaxClassifyPeek bytes: Grants.gov's MTOM
// framing around a fault whose code comes after a 64 KiB faultstring (the
// worst case: every byte is read), the same fault's code first and an
// attachment after it (the usual case), and a well-formed XHTML error page
// that is not SOAP (the scan finds no envelope).
func soapBenchBodies(tb testing.TB) []benchBody {
	header, gg := readSample(tb, "grantsgov-mtom-not-found")
	ctype := header.Get("Content-Type")
	const pad = "\x00pad\x00"
	fit := func(doc string) []byte {
		n := MaxClassifyPeek - len(doc) + len(pad)
		b := []byte(strings.Replace(doc, pad, strings.Repeat("x", n), 1))
		if len(b) != MaxClassifyPeek {
			tb.Fatalf("%d bytes", len(b))
		}
		return b
	}
	codeLast := strings.Replace(string(gg), `<faultcode>soap:Server</faultcode><faultstring>`, `<faultstring>`+pad, 1)
	codeLast = strings.Replace(codeLast, `</faultstring>`, `</faultstring><faultcode>soap:Server</faultcode>`, 1)
	withAttachment := strings.Replace(string(gg), "\r\n--uuid:6d1a6e0e-2c7b-4c53-9a0b-3f1f2b5e8a11--",
		"\r\n--uuid:6d1a6e0e-2c7b-4c53-9a0b-3f1f2b5e8a11\r\nContent-Type: application/octet-stream\r\nContent-ID: <att>\r\n\r\n"+pad+
			"\r\n--uuid:6d1a6e0e-2c7b-4c53-9a0b-3f1f2b5e8a11--", 1)
	page := `<html xmlns="http://www.w3.org/1999/xhtml"><head><title>502 Bad Gateway</title></head><body>` +
		`<p>` + pad + `</p></body></html>`
	return []benchBody{
		{"mtom-fault-64KiB-code-last", ctype, fit(codeLast), true},
		{"mtom-fault-64KiB-attachment", ctype, fit(withAttachment), true},
		{"xhtml-64KiB-not-soap", "text/html", fit(page), false},
	}
}

func benchResp(ctype string) *http.Response {
	return &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {ctype}}}
}

// BenchmarkSOAPEnvelope is what finding the envelope costs on 64 KiB.
func BenchmarkSOAPEnvelope(b *testing.B) {
	for _, bb := range soapBenchBodies(b) {
		resp := benchResp(bb.ctype)
		b.Run(bb.name, func(b *testing.B) {
			if _, ok := SOAPEnvelope(resp, bb.body); ok != bb.fault {
				b.Fatalf("found: %v; want %v", ok, bb.fault)
			}
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				SOAPEnvelope(resp, bb.body)
			}
		})
	}
}

// BenchmarkClassifySOAPFault64KiB is what the classifier costs on the same
// bodies, with their Content-Type.
func BenchmarkClassifySOAPFault64KiB(b *testing.B) {
	for _, bb := range soapBenchBodies(b) {
		resp := benchResp(bb.ctype)
		b.Run(bb.name, func(b *testing.B) {
			if _, ok := ClassifySOAPFault(resp, bb.body); ok != bb.fault {
				b.Fatalf("classified: %v; want %v", ok, bb.fault)
			}
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ClassifySOAPFault(resp, bb.body)
			}
		})
	}
}

// BenchmarkXMLTokenScan is the yardstick: encoding/xml reading every token
// of the same bytes, as a classifier that parsed the whole body would. It
// cannot read MIME framing, so of an MTOM body it reads the root part's
// envelope, from its start tag to the end of the body.
func BenchmarkXMLTokenScan(b *testing.B) {
	for _, bb := range soapBenchBodies(b) {
		xmlBytes := bb.body
		if i := bytes.Index(xmlBytes, []byte("<soap:Envelope")); i >= 0 {
			xmlBytes = xmlBytes[i:]
		}
		b.Run(bb.name, func(b *testing.B) {
			if n := xmlTokens(xmlBytes); n < 5 {
				b.Fatalf("%d tokens", n)
			}
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				xmlTokens(xmlBytes)
			}
		})
	}
}

// xmlTokens counts the tokens encoding/xml reads from b, up to its end or
// its first error.
func xmlTokens(b []byte) int {
	d := xml.NewDecoder(bytes.NewReader(b))
	n := 0
	for {
		if _, err := d.Token(); err != nil {
			return n
		}
		n++
	}
}
