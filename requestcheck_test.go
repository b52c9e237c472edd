package grantretry

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A request net/http would refuse (a method that is not an RFC 9110
// token, a trailer value with CR or LF, a trailer net/http will not
// announce) is refused before any attempt, with ErrInvalidRequest: the
// funder saw nothing, so no letter is kept and the host's breaker, which
// one failed call would open, stays closed.
func TestRequestsNetHTTPRefusesAreRefusedBeforeAnyAttempt(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	sink := &memLetters{}
	tr := New(nil, WithBreaker(1, time.Hour), WithDeadLetter(sink), WithBudget(4, time.Minute))
	defer tr.CloseIdleConnections()

	chunked := func(method string, trailer http.Header) *http.Request {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("<Application/>"))
		if err != nil {
			t.Fatal(err)
		}
		req.Method = method
		req.ContentLength = -1 // chunked, so the trailers go out
		req.GetBody = nil
		req.Trailer = trailer
		req.Header.Set(HeaderIdempotencyKey, "key-1")
		return req
	}
	cases := map[string]*http.Request{
		"non-ASCII method":         chunked("CAFÉ", nil),
		"method with a DEL":        chunked("PO\x7fST", nil),
		"trailer value with CR LF": chunked(http.MethodPost, http.Header{"X-Checksum": {"abc\r\nX-Injected: 1"}}),
		"trailer value with LF":    chunked(http.MethodPost, http.Header{"X-Checksum": {"abc\ndef"}}),
		"Content-Length trailer":   chunked(http.MethodPost, http.Header{"Content-Length": nil}),
	}
	for name, req := range cases {
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
			t.Errorf("%s: got a response, want a refusal", name)
			continue
		}
		e := mustError(t, err)
		if !errors.Is(err, ErrInvalidRequest) || e.Disposition != FailedTerminal || e.StopReason != StopInvalidRequest || e.Attempts != 0 {
			t.Errorf("%s: %v (%+v), want ErrInvalidRequest, failed_terminal (invalid_request) after 0 attempts", name, err, e.Outcome)
		}
	}
	if n := got.Load(); n != 0 {
		t.Errorf("the funder received %d requests, want 0", n)
	}
	if ls := sink.all(); len(ls) != 0 {
		t.Errorf("%d letters kept for requests never sent, want none (first: %s)", len(ls), ls[0].StopReason)
	}
	// The breaker opens on one failed call: had any of them counted, this
	// one would be refused.
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("a sound request after the refused ones: %v", err)
	}
	readAll(t, resp)
	if o := mustOutcome(t, resp); o.Disposition != Succeeded || got.Load() != 1 {
		t.Errorf("outcome %+v, funder saw %d, want succeeded after 1", o, got.Load())
	}
}
