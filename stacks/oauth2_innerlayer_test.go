package stacks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// stepClock is a grantretry.Clock whose Sleep returns at once, moving the
// time on: no test waits out a real backoff.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

// tokenServer is a client-credentials token endpoint on 127.0.0.1 that can
// answer 503, or be closed and opened again on the same address. Its n-th
// token is "tok-n", and lasts lifetime seconds: oauth2 takes a token due
// within 10 s as expired, so with a lifetime of 1 every call asks it
// again, as calls do once a long-lived token runs out in an outage. It
// keeps the headers of the requests it received (the first 64).
type tokenServer struct {
	t        *testing.T
	addr     string
	lifetime int
	srv      *httptest.Server
	down     atomic.Bool // answer 503
	asked    atomic.Int64
	got      chan http.Header
}

func newTokenServer(t *testing.T, lifetime int) *tokenServer {
	ts := &tokenServer{t: t, lifetime: lifetime, got: make(chan http.Header, 64)}
	ts.start(nil)
	ts.addr = ts.srv.Listener.Addr().String()
	t.Cleanup(func() { ts.srv.Close() })
	return ts
}

func (ts *tokenServer) url() string { return "http://" + ts.addr + "/token" }

func (ts *tokenServer) start(l net.Listener) {
	ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ts.asked.Add(1)
		select {
		case ts.got <- r.Header.Clone():
		default:
		}
		if ts.down.Load() {
			http.Error(w, "token service unavailable", http.StatusServiceUnavailable)
			return
		}
		if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n, ts.lifetime)
	}))
	if l != nil {
		ts.srv.Listener.Close()
		ts.srv.Listener = l
	}
	ts.srv.Start()
}

// reopen serves again on the address a closed server had.
func (ts *tokenServer) reopen() {
	l, err := net.Listen("tcp", ts.addr)
	if err != nil {
		ts.t.Fatalf("listen again on %s: %v", ts.addr, err)
	}
	ts.start(l)
}

// With golang.org/x/oauth2's Transport inside grantretry, as a user wires
// a funder that wants a bearer token, and the token endpoint down, every
// attempt fails in oauth2 before anything is sent to the funder. Once
// grantretry has seen the net/http Transport beneath report a connection
// on an earlier call, those failures are no fault of the funder: not
// ambiguous (the letters may be sent again as they are), not counted by
// the funder's breaker or retry throttle (every call spends its whole
// budget, and the first call after the outage reaches the funder), and
// reported as transport:not_sent.
func TestOAuth2TokenEndpointDownIsNotChargedToTheFunder(t *testing.T) {
	for _, outage := range []struct {
		name       string
		start, end func(*tokenServer)
	}{
		{"token endpoint answers 503", func(ts *tokenServer) { ts.down.Store(true) }, func(ts *tokenServer) { ts.down.Store(false) }},
		{"token endpoint closed", func(ts *tokenServer) { ts.srv.Close() }, (*tokenServer).reopen},
	} {
		t.Run(outage.name, func(t *testing.T) {
			var funderGot atomic.Int64
			funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				funderGot.Add(1)
				io.Copy(io.Discard, r.Body)
				if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer tok-") {
					http.Error(w, "no token", http.StatusUnauthorized)
					return
				}
				io.WriteString(w, `{"status":"received"}`)
			}))
			defer funder.Close()
			tokens := newTokenServer(t, 1)

			tokenClient := &http.Client{Transport: &http.Transport{}}
			defer tokenClient.CloseIdleConnections()
			cfg := clientcredentials.Config{ClientID: "id", ClientSecret: "s3cret-value", TokenURL: tokens.url()}
			source := cfg.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, tokenClient))
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			letters, err := deadletter.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			const threshold = 3
			client := &http.Client{Transport: grantretry.New(
				&oauth2.Transport{Source: source, Base: base},
				grantretry.WithBreaker(threshold, time.Minute),
				grantretry.WithClock(&stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}),
				grantretry.WithDeadLetter(letters),
			)}
			submit := func(id string) (*http.Response, error) {
				ctx := grantretry.WithSubmissionID(context.Background(), id)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, funder.URL+"/v1/applications", strings.NewReader(`{"applicant":"Example Foundation"}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				return client.Do(req)
			}

			resp, err := submit("GRANT-0")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || funderGot.Load() != 1 {
				t.Fatalf("before the outage: status %d, funder received %d requests, want 200 and 1", resp.StatusCode, funderGot.Load())
			}

			outage.start(tokens)
			asked := tokens.asked.Load()
			const calls = threshold + 2
			for i := range calls {
				id := "GRANT-" + string(rune('1'+i))
				resp, err := submit(id)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("%s: status %d in the outage, want an error", id, resp.StatusCode)
				}
				var e *grantretry.Error
				if !errors.As(err, &e) {
					t.Fatalf("%s: %v, want a *grantretry.Error", id, err)
				}
				if e.Disposition != grantretry.DeadLetter || e.StopReason != grantretry.StopRetriesSpent ||
					e.Reason != "transport:not_sent" || e.Ambiguous || e.Attempts != grantretry.DefaultMaxRetries+1 {
					t.Fatalf("%s: %s (%s), reason %s, ambiguous %v, %d attempts; want dead_letter (%s), transport:not_sent, not ambiguous, %d attempts",
						id, e.Disposition, e.StopReason, e.Reason, e.Ambiguous, e.Attempts, grantretry.StopRetriesSpent, grantretry.DefaultMaxRetries+1)
				}
			}
			if n := funderGot.Load(); n != 1 {
				t.Fatalf("the funder received %d requests in the outage, want 0", n-1)
			}
			if outage.name == "token endpoint answers 503" && tokens.asked.Load()-asked != calls*(grantretry.DefaultMaxRetries+1) {
				t.Fatalf("the token endpoint was asked %d times, want one per attempt", tokens.asked.Load()-asked)
			}
			kept, err := letters.List()
			if err != nil {
				t.Fatal(err)
			}
			if len(kept) != calls {
				t.Fatalf("%d letters kept, want %d", len(kept), calls)
			}
			for _, l := range kept {
				if l.Ambiguous || l.Reason != "transport:not_sent" {
					t.Errorf("letter %s: ambiguous %v, reason %s; want not ambiguous, transport:not_sent", l.SubmissionID, l.Ambiguous, l.Reason)
				}
			}

			// More calls failed than the breaker's threshold: had they been
			// charged to the funder, its breaker would refuse this one.
			outage.end(tokens)
			resp, err = submit("GRANT-after")
			if err != nil {
				t.Fatalf("after the outage: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if o, _ := grantretry.OutcomeOf(resp); resp.StatusCode != http.StatusOK || o.Disposition != grantretry.Succeeded || funderGot.Load() != 2 {
				t.Fatalf("after the outage: status %d, %s (%s), funder received %d requests; want 200, succeeded, 2",
					resp.StatusCode, o.Disposition, o.StopReason, funderGot.Load())
			}
		})
	}
}
