package grantretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The request sent carries no GetBody, so net/http cannot send it again on
// its own after writing it, and the caller's own ContentLength: a buffered
// body of unknown length stays unknown, so it is framed as the caller's
// request would be (chunked, with its trailers). Every attempt still
// carries the whole body.
func TestSentRequestCarriesNoGetBodyAndCallersLength(t *testing.T) {
	for _, withGetBody := range []bool{true, false} {
		var bodies []string
		var lengths []int64
		var getBodies int
		inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			bodies, lengths = append(bodies, string(b)), append(lengths, r.ContentLength)
			if r.GetBody != nil {
				getBodies++
			}
			status := 503
			if len(bodies) == 2 {
				status = 200
			}
			return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
		tr := New(inner, WithClock(newFakeClock()))
		req, _ := newPost(t, context.Background(), "payload", withGetBody)
		wantLength := int64(7)
		if !withGetBody {
			req.ContentLength = 0 // unknown, as for an arbitrary io.Reader
			wantLength = 0
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if getBodies != 0 {
			t.Errorf("GetBody %v: %d attempts carried a GetBody, want none", withGetBody, getBodies)
		}
		for i := range bodies {
			if bodies[i] != "payload" || lengths[i] != wantLength {
				t.Errorf("GetBody %v, attempt %d: body %q, ContentLength %d; want the payload, %d", withGetBody, i+1, bodies[i], lengths[i], wantLength)
			}
		}
		if len(bodies) != 2 {
			t.Errorf("GetBody %v: %d attempts, want 2", withGetBody, len(bodies))
		}
	}
}

// A body too large to buffer is still closed when no attempt is made.
func TestUnsentOversizedBodyIsClosed(t *testing.T) {
	h := newHarness(t, WithBudget(0, time.Minute), WithBreaker(1, time.Hour), WithReplayLimit(4))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	req, _ := newPost(t, context.Background(), "x", true)
	resp, err := h.tr.RoundTrip(req) // opens the breaker
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, body := newPost(t, context.Background(), "0123456789", false)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("err = %v, want circuit open", err)
	}
	if !body.closed.Load() {
		t.Error("caller's oversized body left open on circuit_open")
	}
}

// A discarded response body is read (so the connection can be reused), not
// only closed.
func TestDiscardedShortBodyIsReadToTheEnd(t *testing.T) {
	h := newHarness(t, WithBudget(1, time.Minute))
	var bodies []*respBody
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		b := &respBody{r: strings.NewReader("short 503 body")}
		bodies = append(bodies, b)
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: b, Request: r}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if b := bodies[0]; b.read.Load() != int64(len("short 503 body")) || !b.closed.Load() {
		t.Errorf("discarded body: read %d bytes, closed %v; want drained and closed", b.read.Load(), b.closed.Load())
	}
}

type rwcBody struct{ io.Reader }

func (rwcBody) Write(p []byte) (int, error) { return len(p), nil }

func (rwcBody) Close() error { return nil }

// A 101's body is the upgraded connection: it must stay an io.ReadWriteCloser.
func TestSwitchingProtocolsBodyStaysWritable(t *testing.T) {
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 101, Header: http.Header{}, Body: rwcBody{strings.NewReader("")}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
		t.Errorf("101 body is %T, want the io.ReadWriteCloser the inner transport returned", resp.Body)
	}
}
