package stacks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// newAuthedFunderClient returns the client for a funder that wants a
// bearer token from src: oauth2.Transport outside grantretry, so that a
// call takes its token once and every attempt of the call carries it.
// Keep the *grantretry.Transport it returns: oauth2.Transport passes no
// CloseIdleConnections on, so client.CloseIdleConnections closes nothing.
func newAuthedFunderClient(src oauth2.TokenSource, base http.RoundTripper, opts ...grantretry.Option) (*http.Client, *grantretry.Transport) {
	tr := grantretry.New(base, opts...)
	return &http.Client{Transport: &oauth2.Transport{Source: src, Base: tr}}, tr
}

// newTokenSource fetches tokens through a client of its own: the token
// endpoint is not the funder, and through grantretry its requests would
// be retried, keyed and audited as calls to one. Name the endpoint's
// AuthStyle: left to auto-detection, a failed fetch is sent twice.
func newTokenSource(ctx context.Context, tokenURL, clientID, secret string) oauth2.TokenSource {
	cfg := clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: tokenURL,
		AuthStyle: oauth2.AuthStyleInHeader}
	tokenClient := &http.Client{Timeout: 10 * time.Second}
	return cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, tokenClient))
}

// With oauth2.Transport outside grantretry, one call to a funder that
// answers 503, 503, 201 asks the token endpoint once, and its three
// attempts carry the same token and the same Idempotency-Key; a second
// call reuses the token; no audit line holds it.
func TestAuthOutsideOneTokenPerCall(t *testing.T) {
	tokens := newTokenServer(t, 3600)
	f := newFunder(t, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusCreated)
	core, logs := observer.New(zap.InfoLevel)
	client, tr := newAuthedFunderClient(newTokenSource(context.Background(), tokens.url(), "pipeline", "s3cret"), nil,
		grantretry.WithLogger(zap.New(core)), grantretry.WithClock(&stepClock{now: testClock}))
	defer tr.CloseIdleConnections()

	resp, err := post(t, client, grantretry.WithSubmissionID(context.Background(), "GRANT-42"), f.url())
	if err != nil {
		t.Fatal(err)
	}
	out, ok := grantretry.OutcomeOf(resp)
	if !ok || out.Disposition != grantretry.Succeeded || out.Attempts != 3 {
		t.Fatalf("outcome %+v (%v), want succeeded after 3 attempts", out, ok)
	}
	reqs := f.requests()
	if n, all := distinct(reqs, "Authorization"); len(reqs) != 3 || n != 1 || !all || reqs[0].Get("Authorization") != "Bearer tok-1" {
		t.Fatalf("%d requests with %d distinct Authorization headers (all set: %v), first %q; want 3 with one, Bearer tok-1",
			len(reqs), n, all, reqs[0].Get("Authorization"))
	}
	if n, all := distinct(reqs, grantretry.HeaderIdempotencyKey); n != 1 || !all {
		t.Fatalf("%d distinct Idempotency-Keys (all set: %v), want one on every attempt", n, all)
	}
	if n := tokens.asked.Load(); n != 1 {
		t.Fatalf("the token endpoint was asked %d times for one call, want 1", n)
	}
	if _, err := post(t, client, grantretry.WithSubmissionID(context.Background(), "GRANT-43"), f.url()); err != nil {
		t.Fatal(err)
	}
	if n := tokens.asked.Load(); n != 1 {
		t.Fatalf("the token endpoint was asked %d times for two calls, want 1: the token lasts an hour", n)
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if strings.Contains(fmt.Sprint(v), "tok-1") {
				t.Errorf("audit line %s: field %s holds the token: %v", e.Message, k, v)
			}
		}
	}
}

// With the token endpoint down and oauth2.Transport outside grantretry,
// the call fails in oauth2 before grantretry sees it: the funder gets
// nothing, and the error is oauth2's, not a *grantretry.Error, so no
// dead letter is kept for it. The caller requeues it.
func TestAuthOutsideTokenEndpointDownFailsBeforeGrantretry(t *testing.T) {
	tokens := newTokenServer(t, 3600)
	tokens.down.Store(true)
	f := newFunder(t, http.StatusCreated)
	client, tr := newAuthedFunderClient(newTokenSource(context.Background(), tokens.url(), "pipeline", "s3cret"), nil)
	defer tr.CloseIdleConnections()

	_, err := post(t, client, grantretry.WithSubmissionID(context.Background(), "GRANT-42"), f.url())
	var re *oauth2.RetrieveError
	var ge *grantretry.Error
	if !errors.As(err, &re) || errors.As(err, &ge) {
		t.Fatalf("error %v: want an *oauth2.RetrieveError and no *grantretry.Error", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("the funder received %d requests without a token, want 0", n)
	}
	if n := tokens.asked.Load(); n != 1 {
		t.Fatalf("the token endpoint was asked %d times, want 1 (no retries of it)", n)
	}
}

// A grantretry client as oauth2.HTTPClient turns each token fetch into a
// funder call: one Token with the token endpoint down sends it five
// requests (grantretry's default budget), each stamped with the same
// Idempotency-Key and correlation id, and writes its attempts and its
// disposition to the funder's audit log. Its own client asks once.
func TestTokenFetchThroughGrantretryIsTreatedAsAFunderCall(t *testing.T) {
	tokens := newTokenServer(t, 3600)
	tokens.down.Store(true)
	core, logs := observer.New(zap.InfoLevel)
	gr := grantretry.New(nil, grantretry.WithLogger(zap.New(core)), grantretry.WithClock(&stepClock{now: testClock}))
	defer gr.CloseIdleConnections()
	cfg := clientcredentials.Config{ClientID: "pipeline", ClientSecret: "s3cret", TokenURL: tokens.url(),
		AuthStyle: oauth2.AuthStyleInHeader}
	if _, err := cfg.Token(context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: gr})); err == nil {
		t.Fatal("a token from an endpoint that is down")
	}
	const want = grantretry.DefaultMaxRetries + 1
	if n := tokens.asked.Load(); n != want {
		t.Fatalf("the token endpoint was asked %d times, want %d", n, want)
	}
	var reqs []http.Header
	for range want {
		reqs = append(reqs, <-tokens.got)
	}
	for _, name := range []string{grantretry.HeaderIdempotencyKey, grantretry.HeaderCorrelationID} {
		if n, all := distinct(reqs, name); n != 1 || !all {
			t.Errorf("%s: %d distinct values (all set: %v), want one on every token request", name, n, all)
		}
	}
	a := 0
	for _, e := range logs.FilterMessage(grantretry.MsgAttempt).All() {
		if e.ContextMap()[grantretry.FieldPath] == "/token" {
			a++
		}
	}
	if d := logs.FilterMessage(grantretry.MsgDisposition).Len(); a != want || d != 1 {
		t.Errorf("%d attempt lines for /token and %d disposition lines, want %d and 1", a, d, want)
	}

	tokens.asked.Store(0)
	if _, err := newTokenSource(context.Background(), tokens.url(), "pipeline", "s3cret").Token(); err == nil {
		t.Fatal("a token from an endpoint that is down")
	}
	if n := tokens.asked.Load(); n != 1 {
		t.Fatalf("through its own client the token endpoint was asked %d times, want 1", n)
	}
	if h := <-tokens.got; h.Get(grantretry.HeaderIdempotencyKey) != "" {
		t.Fatalf("its own client stamped Idempotency-Key %q", h.Get(grantretry.HeaderIdempotencyKey))
	}
}

// Left to auto-detect the AuthStyle, oauth2 sends a failed token fetch a
// second time in the other style: 2 requests through a plain client, and
// 6 through grantretry (a call of 5 attempts, then a call whose retries
// the retry throttle refuses).
func TestTokenAuthStyleAutoDetectionSendsAFailedFetchTwice(t *testing.T) {
	for _, c := range []struct {
		name   string
		client func() *http.Client
		want   int64
	}{
		{"a plain client", func() *http.Client { return &http.Client{} }, 2},
		{"a grantretry client", func() *http.Client {
			return &http.Client{Transport: grantretry.New(nil, grantretry.WithClock(&stepClock{now: testClock}))}
		}, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			tokens := newTokenServer(t, 3600)
			tokens.down.Store(true)
			client := c.client()
			defer client.CloseIdleConnections()
			cfg := clientcredentials.Config{ClientID: "pipeline", ClientSecret: "s3cret", TokenURL: tokens.url()}
			if _, err := cfg.Token(context.WithValue(context.Background(), oauth2.HTTPClient, client)); err == nil {
				t.Fatal("a token from an endpoint that is down")
			}
			if n := tokens.asked.Load(); n != c.want {
				t.Fatalf("the token endpoint was asked %d times, want %d", n, c.want)
			}
		})
	}
}
