package stacks

import (
	"context"
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
)

// Behind oauth2.Transport, client.CloseIdleConnections leaves the pool
// as it is (the next call reuses its connection), and the
// *grantretry.Transport's closes it (the next call dials again).
func TestCloseIdleConnectionsThroughAWrapper(t *testing.T) {
	tokens := newTokenServer(t, 3600)
	f := newFunder(t, http.StatusCreated)
	base, dials := dialCounting(t)
	ctx, tokenURL, secret := context.Background(), tokens.url(), "s3cret"

	src := newTokenSource(ctx, tokenURL, "pipeline", secret)
	client, tr := newAuthedFunderClient(src, base)
	defer tr.CloseIdleConnections() // client.CloseIdleConnections stops at oauth2.Transport

	call := func() {
		t.Helper()
		if _, err := post(t, client, grantretry.WithSubmissionID(ctx, "GRANT-42"), f.url()); err != nil {
			t.Fatal(err)
		}
	}
	call()
	if _, ok := client.Transport.(interface{ CloseIdleConnections() }); ok {
		t.Fatal("oauth2.Transport has CloseIdleConnections: this test no longer shows the gap")
	}
	client.CloseIdleConnections()
	call()
	if d := dials.Load(); d != 1 {
		t.Fatalf("%d dials after client.CloseIdleConnections, want 1: it closed nothing", d)
	}
	tr.CloseIdleConnections()
	call()
	if d := dials.Load(); d != 2 {
		t.Fatalf("%d dials after the Transport's CloseIdleConnections, want 2", d)
	}
}
