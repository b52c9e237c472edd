package stacks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/grantretry/grantretry"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestOAuth2TokenThroughAGrantretryClient wires grantretry as a user
// would under golang.org/x/oauth2: a grantretry client as the
// oauth2.HTTPClient that fetches the token.
func TestOAuth2TokenThroughAGrantretryClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":3600}`))
	}))
	defer srv.Close()
	client := &http.Client{Transport: grantretry.New(nil)}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	cfg := clientcredentials.Config{ClientID: "id", ClientSecret: "s3cret-value", TokenURL: srv.URL + "/token"}
	tok, err := cfg.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "tok" {
		t.Fatalf("access token %q, want tok", tok.AccessToken)
	}
}
