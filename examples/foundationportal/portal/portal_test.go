package portal

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func respond(status int, body string) *http.Response {
	h := http.Header{"Content-Type": {"application/json"}, HeaderRequestID: {"req_0042"}}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func newTestClient(t *testing.T, rt roundTripFunc) *Client {
	t.Helper()
	c, err := NewClient("http://portal.test/api/", &http.Client{Transport: rt}, WithAPIKey("k-secret"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewClientRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, url string
		opts      []Option
	}{
		{"unparsable URL", "http://[::1", []Option{WithAPIKey("k")}},
		{"no scheme", "portal.test", []Option{WithAPIKey("k")}},
		{"other scheme", "ftp://portal.test", []Option{WithAPIKey("k")}},
		{"no host", "https://", []Option{WithAPIKey("k")}},
		{"no API key", "https://portal.test", nil},
		{"empty API key", "https://portal.test", []Option{WithAPIKey("")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := NewClient(tc.url, nil, tc.opts...); err == nil {
				t.Errorf("NewClient(%q) = %+v, want an error", tc.url, c)
			}
		})
	}
}

type ctxKey struct{}

// What a retrying transport below the SDK relies on: the caller's context
// on the request, and a body it can read again.
func TestSubmitSendsReplayableRequestWithCallersContext(t *testing.T) {
	t.Parallel()
	var got *http.Request
	c := newTestClient(t, func(r *http.Request) (*http.Response, error) {
		got = r
		return respond(http.StatusCreated, `{"application_id":"APP-1","external_id":"X-1"}`), nil
	})
	ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
	rcpt, err := c.SubmitApplication(ctx, Application{ExternalID: "X-1", AmountRequested: 10})
	if err != nil || rcpt.ApplicationID != "APP-1" {
		t.Fatalf("SubmitApplication = %+v, %v", rcpt, err)
	}
	if got.Context().Value(ctxKey{}) != "mine" {
		t.Error("the request does not carry the caller's context")
	}
	if got.GetBody == nil {
		t.Fatal("the request has no GetBody: a transport could not replay it")
	}
	b1, _ := io.ReadAll(got.Body)
	again, _ := got.GetBody()
	b2, _ := io.ReadAll(again)
	if len(b1) == 0 || string(b1) != string(b2) {
		t.Errorf("body %q, GetBody gives %q; want the same non-empty bytes", b1, b2)
	}
	if got.Header.Get(HeaderAPIKey) != "k-secret" || got.URL.Path != "/api/v1/applications" {
		t.Errorf("request %s %s with key %q", got.Method, got.URL.Path, got.Header.Get(HeaderAPIKey))
	}
}

func TestNon2xxIsAPIError(t *testing.T) {
	t.Parallel()
	c := newTestClient(t, func(*http.Request) (*http.Response, error) {
		return respond(http.StatusUnprocessableEntity, `{"error":{"code":"invalid_amount","message":"too much"}}`), nil
	})
	_, err := c.SubmitApplication(context.Background(), Application{ExternalID: "X-1"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *APIError", err)
	}
	want := APIError{StatusCode: 422, Code: "invalid_amount", Message: "too much", RequestID: "req_0042"}
	if *apiErr != want {
		t.Errorf("APIError %+v, want %+v", *apiErr, want)
	}
}

func TestTransportErrorIsWrapped(t *testing.T) {
	t.Parallel()
	errDown := errors.New("down")
	c := newTestClient(t, func(*http.Request) (*http.Response, error) { return nil, errDown })
	_, err := c.GetApplicationStatus(context.Background(), "X-1")
	if !errors.Is(err, errDown) {
		t.Errorf("err = %v, want it to wrap the transport's error", err)
	}
}
