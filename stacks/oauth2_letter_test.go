package stacks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// TestOAuth2ClientSecretIsNeverKeptInADeadLetter wires grantretry under
// golang.org/x/oauth2's client credentials as a user would (a grantretry
// client as oauth2.HTTPClient, letters kept in a deadletter.Dir) with the
// token endpoint down: no file under the letter directory holds the
// client secret, the letter says why its body is missing, and Redeliver
// refuses it.
func TestOAuth2ClientSecretIsNeverKeptInADeadLetter(t *testing.T) {
	const secret = "cs-7f3a9d2e-never-on-disk"
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "token service unavailable", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	path := t.TempDir()
	dir, err := deadletter.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	inner := &http.Transport{}
	defer inner.CloseIdleConnections()
	client := &http.Client{Transport: grantretry.New(inner, grantretry.WithDeadLetter(dir),
		grantretry.WithBudget(1, time.Minute), grantretry.WithBackoff(time.Millisecond, time.Millisecond))}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	cfg := clientcredentials.Config{ClientID: "pipeline", ClientSecret: secret, TokenURL: srv.URL + "/token",
		AuthStyle: oauth2.AuthStyleInParams}
	if _, err := cfg.Token(ctx); err == nil {
		t.Fatal("a token from a token endpoint that is down")
	}
	if asked.Load() == 0 {
		t.Fatal("the token endpoint was never asked")
	}

	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if holds(data, []byte(secret)) {
			t.Errorf("%s holds the client secret:\n%s", p, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	letters, err := dir.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) == 0 {
		t.Fatal("no letter kept: the token request is work still owed, and its record must say why its body is missing")
	}
	for _, l := range letters {
		if l.Body != nil || !strings.Contains(l.BodyOmitted, `"client_secret"`) {
			t.Errorf("letter %s: body %d bytes, body_omitted %q: want it omitted, naming client_secret", l.ID, len(l.Body), l.BodyOmitted)
		}
		if _, err := deadletter.Redeliver(context.Background(), client, l, nil); !errors.Is(err, deadletter.ErrBadLetter) {
			t.Errorf("letter %s: Redeliver: %v, want ErrBadLetter", l.ID, err)
		}
	}
}

// holds reports whether data holds secret as it is, or in any of its JSON
// strings once decoded from base64, as a letter's body would be.
func holds(data, secret []byte) bool {
	if bytes.Contains(data, secret) {
		return true
	}
	var v any
	if json.Unmarshal(data, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			b, err := base64.StdEncoding.DecodeString(v)
			return err == nil && bytes.Contains(b, secret)
		case []any:
			return slices.ContainsFunc(v, walk)
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
