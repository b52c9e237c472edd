package fakes2s_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

// The answer as the mirror frames it: the envelope is the root part, found
// by the start parameter, attachments after it skipped; a bare envelope
// under a multipart label is the envelope.
func TestEnvelopeReadsTheRootPart(t *testing.T) {
	const env = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body/></soap:Envelope>`
	framed := "--uuid:b1\r\nContent-Type: application/octet-stream\r\nContent-ID: <att1>\r\n\r\nbinary\r\n" +
		"--uuid:b1\r\nContent-Type: application/xop+xml; charset=UTF-8; type=\"text/xml\"\r\nContent-Transfer-Encoding: binary\r\n" +
		"Content-ID: <root.message@cxf.apache.org>\r\n\r\n" + env + "\r\n--uuid:b1--"
	for _, tc := range []struct {
		name, contentType, body string
	}{
		{"root part by start", `multipart/related; type="application/xop+xml"; boundary="uuid:b1"; start="<root.message@cxf.apache.org>"; start-info="text/xml"`, framed},
		{"framed, no boundary in the label", `multipart/related; type="application/xop+xml"`, strings.Replace(framed, "binary\r\n--uuid:b1\r\n", "x\r\n--uuid:b1\r\n", 1)},
		{"bare envelope labelled multipart", `multipart/related; type="application/xop+xml"`, env},
	} {
		got, err := fakes2s.Envelope(tc.contentType, []byte(tc.body))
		want := env
		if tc.name == "framed, no boundary in the label" {
			want = "x" // no start parameter: the first part
		}
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, want)
		}
	}
}

// A CXF client with MTOM on (Kuali Coeus sets mtom-enabled) sends its
// request framed too; the fake reads the root part.
func TestMTOMFramedRequestIsAccepted(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	env := fakes2s.SubmitEnvelope("GRANT-42", "<SF424/>")
	var b bytes.Buffer
	b.WriteString("--uuid:req\r\nContent-Type: application/xop+xml; charset=UTF-8; type=\"text/xml\"\r\nContent-ID: <root.message@cxf.apache.org>\r\n\r\n")
	b.Write(env)
	b.WriteString("\r\n--uuid:req--\r\n")
	req, err := http.NewRequest(http.MethodPost, f.URL(), &b)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", `multipart/related; type="application/xop+xml"; boundary="uuid:req"; start="<root.message@cxf.apache.org>"; start-info="text/xml"`)
	req.Header.Set("SOAPAction", `"`+fakes2s.Action(fakes2s.OpSubmitApplication)+`"`)
	resp, err := newClient(t, f).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || f.Applications("GRANT-42") != 1 {
		t.Errorf("status %d, %d applications; want 200, 1", resp.StatusCode, f.Applications("GRANT-42"))
	}
}
