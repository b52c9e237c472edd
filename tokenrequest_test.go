package grantretry

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A grant funder's application may have a field called grant_type ("capital",
// "project") beside fields whose names look secret (an authorized
// representative, an applicant's signature): it is the work itself, and its
// letter keeps it whole, so it can be redelivered.
func TestApplicationWithAGrantTypeFieldKeepsItsBodyInTheLetter(t *testing.T) {
	const body = `{"applicant":"Riverside Arts","grant_type":"capital","authorized_representative":"Jane Doe","applicant_signature":"Jane Doe","amount":1200}`
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithBudget(1, time.Hour))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	req, _ := newPost(t, context.Background(), body, true)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if l := sink.only(t); string(l.Body) != body || l.BodyOmitted != "" {
		t.Errorf("the application's letter: body %q, omitted %q; want it kept whole", l.Body, l.BodyOmitted)
	}
}

// A JSON body is an OAuth token request only when its grant_type is an OAuth
// 2.0 grant: one of RFC 6749's (client_credentials, password, refresh_token,
// authorization_code) or an absolute URI (RFC 6749 section 4.5: the
// urn:ietf:params:oauth:grant-type: grants of RFC 7523, 8628 and 8693, and
// any other). Only then are its secret-named fields credentials.
func TestJSONBodyIsATokenRequestOnlyWhenItsGrantTypeIsAnOAuthGrant(t *testing.T) {
	rd := redactor{}
	for _, tc := range []struct {
		grant string
		want  string // the credential fields found, "" if the body is not a token request
	}{
		{"client_credentials", "client_secret"},
		{"password", "client_secret"},
		{"refresh_token", "client_secret"},
		{"authorization_code", "client_secret"},
		{"urn:ietf:params:oauth:grant-type:jwt-bearer", "client_secret"},
		{"urn:ietf:params:oauth:grant-type:token-exchange", "client_secret"},
		{"urn:ietf:params:oauth:grant-type:device_code", "client_secret"},
		{"urn:openid:params:grant-type:ciba", "client_secret"},
		{"https://funder.example/grants/saml2-bearer", "client_secret"},
		{"capital", ""},
		{"project", ""},
		{"matching", ""},
		{"", ""},
	} {
		body := `{"grant_type":"` + tc.grant + `","client_secret":"zz","authorized_representative":"Jane Doe"}`
		got := strings.Join(rd.bodySecrets(http.Header{"Content-Type": {"application/json"}}, []byte(body)), ",")
		if tc.want != "" {
			tc.want = "authorized_representative,client_secret"
		}
		if got != tc.want {
			t.Errorf("grant_type %q: credential fields %q, want %q", tc.grant, got, tc.want)
		}
	}
	// a grant_type that is not a string is no OAuth grant
	if got := rd.bodySecrets(nil, []byte(`{"grant_type":7,"client_secret":"zz"}`)); got != nil {
		t.Errorf("grant_type 7: %q, want none", got)
	}
}
