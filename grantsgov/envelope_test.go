package grantsgov

import (
	"bytes"
	"strings"
	"testing"
)

const testEnvelope = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault><faultcode>soap:Server</faultcode><faultstring>Server error has occurred</faultstring></soap:Fault></soap:Body></soap:Envelope>`

// boundaryInText is an envelope whose fault string holds the boundary's
// text, not at the start of a line.
const boundaryInText = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault><faultcode>soap:Server</faultcode><faultstring>--uuid:b</faultstring></soap:Fault></soap:Body></soap:Envelope>`

// TestSoapEnvelopeFindsMTOMRootPart reads the root part the way the
// mirror frames it, and tolerates what a proxy may do to the line ends:
// what any envelope finder behind soapEnvelope must do.
func TestSoapEnvelopeFindsMTOMRootPart(t *testing.T) {
	root := "Content-Type: application/xop+xml; charset=UTF-8; type=\"text/xml\"\r\nContent-Transfer-Encoding: binary\r\nContent-ID: <root.message@cxf.apache.org>\r\n\r\n"
	cases := []struct {
		name string
		body string
		want string
		ok   bool
	}{
		{"mtom", "--uuid:b\r\n" + root + testEnvelope + "\r\n--uuid:b--", testEnvelope, true},
		{"mtom with an attachment", "--uuid:b\r\n" + root + testEnvelope + "\r\n--uuid:b\r\nContent-Type: application/octet-stream\r\n\r\n<not the envelope/>\r\n--uuid:b--", testEnvelope, true},
		{"bare line feeds", strings.ReplaceAll("--uuid:b\r\n"+root+testEnvelope+"\r\n--uuid:b--", "\r\n", "\n"), testEnvelope, true},
		{"cut off before the closing boundary", "--uuid:b\r\n" + root + testEnvelope[:120], testEnvelope[:120], true},
		{"boundary text inside the part", "--uuid:b\r\n" + root + boundaryInText + "\r\n--uuid:b--", boundaryInText, true},
		{"empty root part", "--uuid:b\r\n" + root + "--uuid:b--", "", false},
		{"plain envelope", "\r\n\r\n" + testEnvelope, testEnvelope, true},
		{"byte-order mark", "\xef\xbb\xbf" + testEnvelope, testEnvelope, true},
		{"JSON", `{"error":"unavailable"}`, "", false},
		{"empty", "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			orig := bytes.Clone(body)
			got, ok := soapEnvelope(nil, body)
			if ok != tc.ok || string(got) != tc.want {
				t.Errorf("soapEnvelope = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
			if !bytes.Equal(body, orig) {
				t.Error("soapEnvelope changed the body")
			}
		})
	}
}

// TestSoapEnvelopeSkipsTheAttachments keeps the zip the mirror attaches
// to GetApplicationZipResponse out of the envelope.
func TestSoapEnvelopeSkipsTheAttachments(t *testing.T) {
	s := loadSample(t, "get-application-zip-with-attachment")
	env, ok := soapEnvelope(s.response(), s.body)
	if !ok {
		t.Fatal("no envelope")
	}
	if !bytes.HasPrefix(env, []byte("<soap:Envelope")) || !bytes.HasSuffix(env, []byte("</soap:Envelope>")) {
		t.Errorf("envelope = %q", env)
	}
	if bytes.Contains(env, []byte("PK-zip-bytes")) {
		t.Error("the attachment is in the envelope")
	}
}
