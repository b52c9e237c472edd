package grantsgov

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"os"
	"strings"
	"testing"
)

// benchSize is the most a Transport shows a classifier.
const benchSize = 64 << 10

// mtomFault64K is a real fault of the corpus, its envelope grown to 64 KiB
// by a SOAP Header of small elements: the most tokens per byte the reader
// must walk before the Body.
func mtomFault64K(tb testing.TB) []byte {
	raw, err := os.ReadFile("testdata/corpus/validation-tracking-number-pattern.body")
	if err != nil {
		tb.Fatal(err)
	}
	at := bytes.Index(raw, []byte("<soap:Body>"))
	const item = `<h:i xmlns:h="urn:pad">x</h:i>`
	n := (benchSize - len(raw) - len("<soap:Header></soap:Header>")) / len(item)
	pad := "<soap:Header>" + strings.Repeat(item, n) + "</soap:Header>"
	out := append(append(append([]byte{}, raw[:at]...), pad...), raw[at:]...)
	return out
}

// notSOAP64K is a 64 KiB HTML error page, as a proxy in front of a funder
// sends: markup, but no envelope.
func notSOAP64K() []byte {
	head := "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>\n"
	tail := "</body></html>\n"
	line := "<p>The upstream server did not answer in time.</p>\n"
	return []byte(head + strings.Repeat(line, (benchSize-len(head)-len(tail))/len(line)) + tail)
}

// BenchmarkClassifyFault runs ClassifyFault beside an encoding/xml token
// scan of the same bytes, the bound its cost must meet.
func BenchmarkClassifyFault(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
	}{
		{"mtom_fault_64KiB", mtomFault64K(b)},
		{"not_soap_64KiB", notSOAP64K()},
	}
	resp := &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {`multipart/related; type="application/xop+xml"`}}}
	for _, bb := range bodies {
		b.Run(bb.name+"/ClassifyFault", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				ClassifyFault(resp, bb.body)
			}
		})
		b.Run(bb.name+"/xml_token_scan", func(b *testing.B) {
			benchTokenScan(b, bb.body)
		})
		// encoding/xml stops at an MTOM body's first part header, whose
		// Content-ID "<root.message@cxf.apache.org>" is no XML name, so the
		// bound that means something is a scan of the envelope itself.
		if env, ok := soapEnvelope(resp, bb.body); ok && len(env) != len(bb.body) {
			b.Run(bb.name+"/xml_token_scan_envelope", func(b *testing.B) {
				benchTokenScan(b, env)
			})
		}
	}
}

func benchTokenScan(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d := xml.NewDecoder(bytes.NewReader(body))
		for {
			if _, err := d.Token(); err != nil {
				break
			}
		}
	}
}

// TestBenchBodiesAreWhatTheyClaim keeps the benchmark honest: 64 KiB each,
// the fault still read as a validation fault, the page not SOAP.
func TestBenchBodiesAreWhatTheyClaim(t *testing.T) {
	f, p := mtomFault64K(t), notSOAP64K()
	if len(f) > benchSize || len(f) < benchSize-64 || len(p) > benchSize || len(p) < benchSize-64 {
		t.Fatalf("sizes %d, %d", len(f), len(p))
	}
	if c, ok := ClassifyFault(&http.Response{StatusCode: 500}, f); !ok || c.Reason != "grantsgov:validation" {
		t.Errorf("fault = %+v, %v", c, ok)
	}
	if _, ok := ClassifyFault(&http.Response{StatusCode: 500}, p); ok {
		t.Error("page is classified")
	}
}
