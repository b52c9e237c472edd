package stacks

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/jarcoal/httpmock"
	"go.uber.org/zap"
)

// newMockedFunderClient is grantretry over an httpmock transport of its
// own: the responders play the funder, and the retries, keys and outcomes
// are the ones production gets. Pass a fake clock in opts (WithClock) so
// that no test waits out a backoff.
func newMockedFunderClient(opts ...grantretry.Option) (*http.Client, *httpmock.MockTransport) {
	mock := httpmock.NewMockTransport()
	return &http.Client{Transport: grantretry.New(mock, opts...)}, mock
}

const mockURL = "https://funder.example/v1/applications"

// scripted is a responder that answers with each status in turn (the
// last repeats), counting the requests and keeping their keys.
func scripted(statuses ...int) (httpmock.Responder, *atomic.Int64, *[]string) {
	var n atomic.Int64
	var keys []string
	return func(r *http.Request) (*http.Response, error) {
		i := int(n.Add(1)) - 1
		keys = append(keys, r.Header.Get(grantretry.HeaderIdempotencyKey))
		return httpmock.NewStringResponse(statuses[min(i, len(statuses)-1)], `{}`), nil
	}, &n, &keys
}

// httpmock.ActivateNonDefault(client) swaps client.Transport for its mock:
// on a grantretry client that is grantretry itself. The 503 comes back
// after one request, with no key and no outcome.
func TestHTTPMockActivateNonDefaultReplacesGrantretry(t *testing.T) {
	client := newFunderClient(nil, zap.NewNop())
	httpmock.ActivateNonDefault(client)
	defer httpmock.DeactivateAndReset()
	r, asked, keys := scripted(http.StatusServiceUnavailable, http.StatusCreated)
	httpmock.RegisterResponder(http.MethodPost, mockURL, r)

	resp, err := post(t, client, grantretry.WithSubmissionID(context.Background(), "GRANT-42"), mockURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := grantretry.OutcomeOf(resp); ok || resp.StatusCode != http.StatusServiceUnavailable || asked.Load() != 1 || (*keys)[0] != "" {
		t.Fatalf("status %d, outcome %v, %d requests, key %q: want the 503 of one request, no outcome, no key",
			resp.StatusCode, ok, asked.Load(), (*keys)[0])
	}
}

// grantretry.New over httpmock's transport, DefaultTransport with the
// package's RegisterResponder or a MockTransport of the test's own, mocks
// the funder: 503, 503, 201 is three requests under one key, and the
// README's submit succeeds; a 422 is one request, and submit says so.
func TestHTTPMockUnderGrantretryMocksTheFunder(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(opts ...grantretry.Option) (*http.Client, func(httpmock.Responder))
	}{
		{"httpmock.DefaultTransport", func(opts ...grantretry.Option) (*http.Client, func(httpmock.Responder)) {
			t.Cleanup(httpmock.Reset)
			return &http.Client{Transport: grantretry.New(httpmock.DefaultTransport, opts...)},
				func(r httpmock.Responder) { httpmock.RegisterResponder(http.MethodPost, mockURL, r) }
		}},
		{"a MockTransport of its own", func(opts ...grantretry.Option) (*http.Client, func(httpmock.Responder)) {
			client, mock := newMockedFunderClient(opts...)
			return client, func(r httpmock.Responder) { mock.RegisterResponder(http.MethodPost, mockURL, r) }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, register := c.build(grantretry.WithClock(&stepClock{now: testClock}))
			r, asked, keys := scripted(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusCreated)
			register(r)
			body := []byte(`{"applicant":"Example Foundation"}`)
			if err := submit(context.Background(), client, mockURL, "GRANT-42", body); err != nil {
				t.Fatal(err)
			}
			want := grantretry.IdempotencyKey("GRANT-42", body)
			if asked.Load() != 3 || (*keys)[0] != want || (*keys)[1] != want || (*keys)[2] != want {
				t.Fatalf("%d requests with keys %q, want 3 with %q", asked.Load(), *keys, want)
			}
			r, asked, _ = scripted(http.StatusUnprocessableEntity)
			register(r)
			if err := submit(context.Background(), client, mockURL, "GRANT-43", body); err == nil || asked.Load() != 1 {
				t.Fatalf("a 422: error %v after %d requests, want an error after 1", err, asked.Load())
			}
		})
	}
}

// httpmock.Activate replaces http.DefaultTransport, the variable: a
// Transport built over it before Activate holds the real one, and one
// built over nil sends through grantretry's own pooled transport, which
// Activate never touches. Both reach the loopback funder, not the mock.
func TestHTTPMockTransportBuiltBeforeActivateIsNotMocked(t *testing.T) {
	for _, c := range []struct {
		name   string
		before bool // built before Activate
		inner  func() http.RoundTripper
		mocked bool
	}{
		{"over http.DefaultTransport, built before Activate", true, func() http.RoundTripper { return http.DefaultTransport }, false},
		{"over nil, built after Activate", false, func() http.RoundTripper { return nil }, false},
		{"over http.DefaultTransport, built after Activate", false, func() http.RoundTripper { return http.DefaultTransport }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFunder(t, http.StatusCreated)
			var tr *grantretry.Transport
			if c.before {
				tr = grantretry.New(c.inner())
			}
			httpmock.Activate()
			defer httpmock.DeactivateAndReset()
			if !c.before {
				tr = grantretry.New(c.inner())
			}
			defer tr.CloseIdleConnections()
			r, asked, _ := scripted(http.StatusCreated)
			httpmock.RegisterResponder(http.MethodPost, f.url(), r)

			if _, err := post(t, &http.Client{Transport: tr}, context.Background(), f.url()); err != nil {
				t.Fatal(err)
			}
			wantMock, wantFunder := 0, 1
			if c.mocked {
				wantMock, wantFunder = 1, 0
			}
			if int(asked.Load()) != wantMock || len(f.requests()) != wantFunder {
				t.Fatalf("the mock answered %d requests and the funder %d; want %d and %d", asked.Load(), len(f.requests()), wantMock, wantFunder)
			}
		})
	}
}

// copyWrap is the shape that defeats ActivateNonDefault: it wraps a copy
// of the caller's client around the Transport that client had then.
func copyWrap(c *http.Client) *http.Client {
	wrapped := *c
	wrapped.Transport = grantretry.New(c.Transport)
	return &wrapped
}

// httpmock.ActivateNonDefault on the client that was copied mocks the
// original only: the copy still reaches the loopback funder.
func TestHTTPMockActivateNonDefaultMissesACopiedClient(t *testing.T) {
	f := newFunder(t, http.StatusCreated)
	original := &http.Client{}
	wrapped := copyWrap(original)
	defer wrapped.CloseIdleConnections()
	httpmock.ActivateNonDefault(original)
	defer httpmock.DeactivateAndReset()
	r, asked, _ := scripted(http.StatusCreated)
	httpmock.RegisterResponder(http.MethodPost, f.url(), r)

	if _, err := post(t, wrapped, context.Background(), f.url()); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 0 || len(f.requests()) != 1 {
		t.Fatalf("the mock answered %d requests and the funder %d; want 0 and 1", asked.Load(), len(f.requests()))
	}
}
