package grantretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An inner transport whose error quotes the request's headers: the values
// of the credential headers, built in and named with WithRedact, are
// scrubbed from the error the caller gets and from every audit line, and
// so are the values of the other headers; their names stay readable.
func TestRedactScrubsSecretHeaderValuesFromErrors(t *testing.T) {
	h := newHarness(t, WithRedact("x-portal-pin"), WithBudget(1, time.Hour))
	h.mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("proxy refused request with headers %v", r.Header)
	})
	req, _ := newPost(t, context.Background(), `{"a":1}`, true)
	secrets := []string{"SECRET-bearer-1", "SECRET-pin-2", "SECRET-apikey-3"}
	req.Header.Set("Authorization", "Bearer "+secrets[0])
	req.Header.Set("X-Portal-Pin", secrets[1])
	req.Header.Set("Api-Key", secrets[2])
	req.Header.Set("X-Pipeline-Run", "run-visible")
	_, err := h.tr.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	texts := []string{err.Error()}
	for _, e := range h.logs.All() {
		for _, v := range e.ContextMap() {
			if s, ok := v.(string); ok {
				texts = append(texts, s)
			}
		}
	}
	all := strings.Join(texts, "\n")
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("secret %q in an error or audit line:\n%s", s, all)
		}
	}
	if !strings.Contains(err.Error(), "X-Pipeline-Run") || strings.Contains(err.Error(), "run-visible") {
		t.Errorf("error %q: want the header's name and not its value", err)
	}
}

func TestRedactSecretNames(t *testing.T) {
	rd := redactor{extra: map[string]bool{"x-portal-pin": true}}
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "Cookie": true, "Set-Cookie": true,
		"X-Api-Key": true, "Api_Key": true, "apikey": true, "X-Auth-Token": true, "access_token": true,
		"client_secret": true, "password": true, "X-Session-Id": true, "X-Amz-Signature": true,
		"key": true, "sig": true, "code": true, "X-Portal-Pin": true, "X-Private-Ref": true,
		"Ocp-Apim-Subscription-Key": true, "X-Functions-Key": true, "X-Access-Key": true, "access_key": true,
		"subscription-key": true, "pass": true, "PASS": true, "client.key": true,
		"Content-Type": false, "Accept": false, "Idempotency-Key": false, "idempotency-key": false, "X-Correlation-ID": false,
		"cycle": false, "keyword": false, "X-Pipeline-Run": false, "monkey": false, "passage": false,
	} {
		if got := rd.secret(name); got != want {
			t.Errorf("secret(%q) = %v, want %v", name, got, want)
		}
		if got := SecretName(name); got != want && name != "X-Portal-Pin" { // named with WithRedact only
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSecretNameKnowsOnlyTheBuiltInNames(t *testing.T) {
	if SecretName("X-Portal-Pin") || !SecretName("X-Portal-Token") {
		t.Error("SecretName must follow the built-in rules only")
	}
}

func TestWithRedactRefusesBadNames(t *testing.T) {
	for _, name := range []string{"", "X-Bad\r\nInjected: 1", "has space", "colon:"} {
		tr := New(nil, WithRedact("X-Fine", name))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("WithRedact(%q): error %v, want ErrInvalidOption", name, err)
		}
	}
}

// A query split with ";" as well as "&", as some servers read it: the
// secret after a ";" is dropped from a letter's URL too, and the rest is
// kept as it was. A query with no secret is kept byte for byte.
func TestRedactURLSplitsQueriesAtSemicolons(t *testing.T) {
	rd := redactor{}
	for raw, want := range map[string]struct {
		url     string
		dropped string
	}{
		"https://f.test/a?cycle=2026;api_key=SECRET-SEMI":          {"https://f.test/a?cycle=2026", "api_key"},
		"https://f.test/a?api%5Fkey=S1&cycle=2026;token=S2;page=3": {"https://f.test/a?cycle=2026;page=3", "api_key,token"},
		"https://f.test/a?x=1&&y=2;;z=%7e":                         {"https://f.test/a?x=1&&y=2;;z=%7e", ""},
	} {
		got, dropped := rd.url(mustURL(t, raw))
		if got != want.url || strings.Join(dropped, ",") != want.dropped {
			t.Errorf("url(%q) = %q, %q; want %q, %q", raw, got, dropped, want.url, want.dropped)
		}
	}
}

// A short value that is part of a longer secret (the query's "live" in
// "sk_live_…", a user name that begins the password) must not be scrubbed
// first and leave the rest of the secret readable.
func TestRedactScrubsLongestSecretsFirst(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "https://user:user-and-more-SECRET@f.test/a?mode=live", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk_live_TAILSECRET123")
	msg := redactor{}.scrub(fmt.Errorf("refused %s with %s", "user-and-more-SECRET", "Bearer sk_live_TAILSECRET123"), req)
	for _, leak := range []string{"TAILSECRET", "and-more-SECRET"} {
		if strings.Contains(msg, leak) {
			t.Errorf("scrubbed message %q still holds %q", msg, leak)
		}
	}
}

// The derived key of a request without a submission id does not depend on
// the credentials in its URL: a resend after a rotated key is the same
// submission, and a key that is logged does not hash a secret.
func TestImplicitKeyIgnoresCredentialsInTheURL(t *testing.T) {
	rd := redactor{}
	key := func(raw string) string {
		req, err := http.NewRequest(http.MethodPost, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		return IdempotencyKey(implicitKeyPrefix(req, rd), []byte("payload"))
	}
	base := key("https://f.test/v1/apply?cycle=2026")
	for _, raw := range []string{
		"https://f.test/v1/apply?cycle=2026&api_key=OLD",
		"https://f.test/v1/apply?api_key=NEW&cycle=2026",
		"https://svc:pw@f.test/v1/apply?cycle=2026",
		"https://f.test/v1/apply?cycle=2026#frag",
	} {
		if got := key(raw); got != base {
			t.Errorf("key of %s = %s, want %s, the key without credentials", raw, got, base)
		}
	}
	if key("https://f.test/v1/apply?cycle=2027") == base {
		t.Error("a different query parameter that is no secret must change the key")
	}
}

// A query value is scrubbed even when an error quotes it without the rest of
// the query.
func TestQueryValueQuotedAloneIsRedacted(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute))
	h.mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("funder refused credential %s", r.URL.Query().Get("token"))
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL+"?token=qs-token-abcdef&x=1", nil)
	_, err := h.tr.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	texts := []string{err.Error()}
	for _, l := range h.logs.AllUntimed() {
		for _, v := range l.ContextMap() {
			texts = append(texts, fmt.Sprint(v))
		}
	}
	if all := strings.Join(texts, "\n"); strings.Contains(all, "qs-token-abcdef") {
		t.Errorf("query value leaked:\n%s", all)
	}
}
