package grantretry

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// multipartBody is a multipart/form-data body with the given parts, in
// order, and its Content-Type.
func multipartBody(t *testing.T, parts ...[2]string) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, p := range parts {
		if err := w.WriteField(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), w.FormDataContentType()
}

// The shapes of a token request net/http sends and its server reads as
// credentials, each through a real net/http client and server: a form
// whose Content-Type is set under a key that is not canonical, a form
// whose Content-Type has a parameter mime.ParseMediaType refuses, a JSON
// token request, and a multipart form with a secret-named part. The server
// shows that it read the secret; the letter keeps none of it. A JSON body
// that is not a token request, and a multipart form without a secret-named
// part, are kept whole.
func TestDeadLetterLeavesOutCredentialsInEveryShapeNetHTTPSends(t *testing.T) {
	const secret = "s3cr3t-VALUE-never-on-disk"
	mpSecret, mpSecretType := multipartBody(t, [2]string{"grant_type", "client_credentials"}, [2]string{"client_secret", secret})
	mpPlain, mpPlainType := multipartBody(t, [2]string{"applicant", "Riverside"}, [2]string{"amount", "1200"})
	for _, tc := range []struct {
		name              string
		headerKey, ctype  string
		body              string
		wantOmitted       []string // nil: the body is kept whole
		serverReadsSecret bool
	}{
		{"Content-Type under a key that is not canonical", "content-type", "application/x-www-form-urlencoded",
			"grant_type=client_credentials&client_id=a&client_secret=" + secret, []string{"client_secret"}, true},
		{"a parameter mime.ParseMediaType refuses", "Content-Type", "application/x-www-form-urlencoded; charset",
			"grant_type=client_credentials&client_id=a&client_secret=" + secret, []string{"client_secret"}, true},
		{"JSON token request", "Content-Type", "application/json",
			`{"grant_type":"client_credentials","client_id":"a","client_secret":"` + secret + `"}`, []string{"client_secret"}, true},
		{"multipart form with a secret-named part", "Content-Type", mpSecretType, mpSecret, []string{"client_secret"}, true},
		{"JSON that is not a token request", "Content-Type", "application/json",
			`{"applicant":"Riverside","authorized_representative":"J. Doe","amount":1200}`, nil, false},
		{"multipart form without a secret-named part", "Content-Type", mpPlainType, mpPlain, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var serverSaw atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, ok := r.Header["Content-Type"]; ok && !strings.Contains(r.Header.Get("Content-Type"), "json") {
					_ = r.ParseMultipartForm(1 << 20) // parses a URL-encoded form too
					serverSaw.Store(r.FormValue("client_secret") == secret)
				} else {
					var m map[string]any
					_ = json.NewDecoder(r.Body).Decode(&m)
					serverSaw.Store(m["client_secret"] == secret)
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			sink := &memLetters{}
			tr := New(srv.Client().Transport, WithClock(newFakeClock()), WithDeadLetter(sink), WithBudget(0, time.Hour))
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/oauth/token", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header[tc.headerKey] = []string{tc.ctype}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if serverSaw.Load() != tc.serverReadsSecret {
				t.Fatalf("the server read the secret: %v, want %v", serverSaw.Load(), tc.serverReadsSecret)
			}
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

// The edges of reading a body for credentials: a multipart body whose
// boundary is not in its Content-Type, a token request with leading
// whitespace and a grant_type in another case, a JSON array of token
// requests and one of applications, a body whose Content-Type names
// another type, and a form whose Content-Type lists another type after it.
func TestBodySecretsReadsTheEdgesOfEachShape(t *testing.T) {
	mp, _ := multipartBody(t, [2]string{"assertion", "x"}, [2]string{"scope", "y"})
	rd := redactor{}
	for _, tc := range []struct {
		name, ctype, body string
		want              string
	}{
		{"multipart without a boundary parameter", "multipart/form-data", mp, "assertion"},
		{"token request with whitespace and Grant_Type", "text/plain", " \n{\"Grant_Type\":\"password\",\"Password\":\"p\",\"username\":\"u\"}", "Password"},
		{"JSON array of token requests", "application/json", `[{"grant_type":"password","password":"p"}]`, "password"},
		{"JSON array of applications", "application/json", `[{"applicant":"Riverside","applicant_signature":"J. Doe"}]`, ""},
		{"form under another type", "text/plain", "client_secret=x", ""},
		{"form listed before another type", "application/x-www-form-urlencoded, text/plain", "client_secret=x", "client_secret"},
	} {
		got := strings.Join(rd.bodySecrets(http.Header{"Content-Type": {tc.ctype}}, []byte(tc.body)), ",")
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
