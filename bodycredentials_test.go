package grantretry

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A letter never holds a token request's credentials, whatever shape the
// body takes: a form sent gzip- or deflate-encoded, a JSON token request
// after a UTF-8 byte order mark, one whose secret sits in an object inside
// it, and a JSON array of token requests. A form whose Content-Encoding
// cannot be read is left out too, saying why; a JSON application sent with
// such an encoding is kept as sent.
func TestLetterLeavesOutCredentialsOfEncodedNestedAndArrayBodies(t *testing.T) {
	const secret = "s3cr3t-VALUE-never-on-disk"
	form := "grant_type=client_credentials&client_id=a&client_secret=" + secret
	var gz, df bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(form))
	zw.Close()
	fw := zlib.NewWriter(&df)
	fw.Write([]byte(form))
	fw.Close()
	for _, tc := range []struct {
		name, ctype, cenc, body string
		want                    string // in BodyOmitted; "" for a body kept whole
	}{
		{"gzip form", "application/x-www-form-urlencoded", "gzip", gz.String(), `"client_secret"`},
		{"x-gzip form", "application/x-www-form-urlencoded", "x-gzip", gz.String(), `"client_secret"`},
		{"deflate form", "application/x-www-form-urlencoded", "deflate", df.String(), `"client_secret"`},
		{"form in an encoding it cannot read", "application/x-www-form-urlencoded", "br", "\x1b\x2a\x00" + form, "Content-Encoding"},
		{"form whose gzip is broken", "application/x-www-form-urlencoded", "gzip", gz.String()[:20], "Content-Encoding"},
		{"JSON token request after a byte order mark", "application/json", "", "\ufeff" + `{"grant_type":"client_credentials","client_secret":"` + secret + `"}`, `"client_secret"`},
		{"secret one level down", "application/json", "", `{"grant_type":"client_credentials","client":{"id":"a","secret":"` + secret + `"}}`, `"client.secret"`},
		{"array of token requests", "application/json", "", `[{"grant_type":"client_credentials","client_secret":"` + secret + `"}]`, `"client_secret"`},
		{"JSON application in an encoding it cannot read", "application/json", "br", "\x1b\x2a\x00{\"applicant\":\"Riverside\"}", ""},
		{"array of applications", "application/json", "", `[{"applicant":"Riverside","grant_type":"capital","applicant_signature":"J. Doe"}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &memLetters{}
			h := newHarness(t, WithDeadLetter(sink), WithBudget(1, time.Hour))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
			req, _ := newPost(t, context.Background(), tc.body, true)
			req.Header.Set("Content-Type", tc.ctype)
			if tc.cenc != "" {
				req.Header.Set("Content-Encoding", tc.cenc)
			}
			resp, err := h.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			l := sink.only(t)
			if tc.want == "" {
				if string(l.Body) != tc.body || l.BodyOmitted != "" {
					t.Errorf("body %q, omitted %q: want it kept whole", l.Body, l.BodyOmitted)
				}
				return
			}
			data, _ := json.Marshal(l)
			if l.Body != nil || strings.Contains(string(data), secret) {
				t.Errorf("the letter keeps the body (%d bytes); BodyOmitted %q", len(l.Body), l.BodyOmitted)
			}
			if !strings.Contains(l.BodyOmitted, tc.want) {
				t.Errorf("BodyOmitted %q does not say %s", l.BodyOmitted, tc.want)
			}
			if l.BodyBytes != int64(len(tc.body)) || l.BodySHA256 == "" {
				t.Errorf("body_bytes %d, sha256 %q: want the body described", l.BodyBytes, l.BodySHA256)
			}
		})
	}
}
