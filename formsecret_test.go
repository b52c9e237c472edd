package grantretry

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A dead letter never holds a form body that carries credentials: the
// body is left out, and BodyOmitted names the fields, never their values.
// A form without secrets, and a body that is not a form, are kept whole.
func TestDeadLetterLeavesOutAFormBodyWithCredentials(t *testing.T) {
	const secret = "s3cr3t-VALUE-never-on-disk"
	for _, tc := range []struct {
		name, contentType, body string
		wantOmitted             []string // the names BodyOmitted must quote; nil: the body is kept
	}{
		{"client_secret", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=a&client_secret=" + secret, []string{"client_secret"}},
		{"password grant", "application/x-www-form-urlencoded; charset=utf-8", "grant_type=password&username=u&password=" + secret, []string{"password"}},
		{"refresh_token", "application/x-www-form-urlencoded", "grant_type=refresh_token&refresh_token=" + secret, []string{"refresh_token"}},
		{"jwt bearer", "application/x-www-form-urlencoded", "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + secret, []string{"assertion"}},
		{"client_assertion", "application/x-www-form-urlencoded", "client_assertion_type=jwt&client_assertion=" + secret + ";scope=x", []string{"client_assertion"}},
		{"authorization code", "Application/X-WWW-Form-URLencoded", "grant_type=authorization_code&code=" + secret + "&code_verifier=" + secret, []string{"code", "code_verifier"}},
		{"a name WithRedact adds", "application/x-www-form-urlencoded", "applicant=a&Portal_PIN=" + secret, []string{"Portal_PIN"}},
		{"form without secrets", "application/x-www-form-urlencoded", "applicant=Riverside&amount=1200", nil},
		{"JSON is not a form", "application/json", `{"amount":1200}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &memLetters{}
			h := newHarness(t, WithDeadLetter(sink), WithBudget(1, time.Hour), WithRedact("portal_pin"))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
			req, _ := newPost(t, context.Background(), tc.body, true)
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := h.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			l := sink.only(t)
			data, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantOmitted == nil {
				if string(l.Body) != tc.body || l.BodyOmitted != "" {
					t.Fatalf("body %q, omitted %q: want it kept", l.Body, l.BodyOmitted)
				}
				return
			}
			if l.Body != nil || strings.Contains(string(data), secret) {
				t.Fatalf("the letter holds the secret:\n%s", data)
			}
			for _, n := range tc.wantOmitted {
				if !strings.Contains(l.BodyOmitted, `"`+n+`"`) || !strings.Contains(l.BodyOmitted, "credentials") {
					t.Errorf("BodyOmitted %q does not name %s as credentials", l.BodyOmitted, n)
				}
			}
			if l.BodyBytes != int64(len(tc.body)) {
				t.Errorf("body_bytes %d, want %d", l.BodyBytes, len(tc.body))
			}
		})
	}
}
