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
// the other headers are left as they are.
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
	if !strings.Contains(err.Error(), "run-visible") {
		t.Errorf("error %q lost a header that is not a secret", err)
	}
}

func TestRedactSecretNames(t *testing.T) {
	rd := redactor{extra: map[string]bool{"x-portal-pin": true}}
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "Cookie": true, "Set-Cookie": true,
		"X-Api-Key": true, "Api_Key": true, "apikey": true, "X-Auth-Token": true, "access_token": true,
		"client_secret": true, "password": true, "X-Session-Id": true, "X-Amz-Signature": true,
		"key": true, "sig": true, "code": true, "X-Portal-Pin": true, "X-Private-Ref": true,
		"Content-Type": false, "Accept": false, "Idempotency-Key": false, "X-Correlation-ID": false,
		"cycle": false, "keyword": false, "X-Pipeline-Run": false,
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
