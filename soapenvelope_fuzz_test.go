package grantretry

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// sampleSeeds is every real sample's body, for fuzz seeds.
func sampleSeeds(f *testing.F) [][]byte {
	files, _ := filepath.Glob(filepath.Join("testdata", "soapfaults", "*.body"))
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzSOAPEnvelope: for any body and any Content-Type and Content-Encoding
// it never panics, never reads resp.Body, never changes body, gives the
// same answer twice, and when it finds an envelope, that starts with an
// Envelope start tag and is no longer than three bytes per byte of body or
// of at most MaxClassifyPeek decompressed bytes; when it finds none, it
// returns nil.
func FuzzSOAPEnvelope(f *testing.F) {
	fault := fault11("soap:Client")
	seeds := append(sampleSeeds(f),
		[]byte(fault), []byte(mtom(fault, "PK\x03\x04")), gzipped(fault), zlibbed(fault), deflated(fault),
		gzipped(mtom(fault, "")), []byte(`<?xml version="1.0" encoding="ISO-8859-1"?>`+env11("<soap:Fault><faultcode>soap:Client</faultcode><faultstring>\xe9</faultstring></soap:Fault>")),
		[]byte(`<html><body>500</body></html>`+fault), []byte("--uuid:b\r\nContent-ID: <x>\r\n\r\n"+fault))
	for _, s := range seeds {
		f.Add(s, "", "")
	}
	f.Add([]byte(mtom(fault, "")), mtomType, "")
	f.Add(gzipped(fault), "text/xml; charset=ISO-8859-1", "gzip")
	f.Add(zlibbed(mtom(fault, "")), `multipart/related; boundary="uuid:b"; start="<att-1@cxf.apache.org>"`, "deflate, identity")
	f.Fuzz(func(t *testing.T, body []byte, ctype, coding string) {
		resp := &http.Response{Header: http.Header{}, Body: untouchableBody{t}}
		if ctype != "" {
			resp.Header.Set("Content-Type", ctype)
		}
		if coding != "" {
			resp.Header.Set("Content-Encoding", coding)
		}
		orig := bytes.Clone(body)
		got, ok := SOAPEnvelope(resp, body)
		if !bytes.Equal(body, orig) {
			t.Fatal("the body was changed")
		}
		again, ok2 := SOAPEnvelope(resp, body)
		if ok != ok2 || !bytes.Equal(got, again) {
			t.Fatalf("two calls differ: %q, %v and %q, %v", got, ok, again, ok2)
		}
		if !ok {
			if got != nil {
				t.Fatalf("not found, but %q", got)
			}
			return
		}
		if envelopeStart(got) != 0 {
			t.Fatalf("the envelope does not start with its start tag: %q", got)
		}
		if limit := 3 * max(len(body), MaxClassifyPeek); len(got) > limit {
			t.Fatalf("%d bytes from a %d-byte body", len(got), len(body))
		}
	})
}
