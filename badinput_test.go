package grantretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An inner transport that never reads or closes the request body it is
// handed: the caller's body is still closed, on success and on retry.
func TestBodyReadByNobodyIsStillClosed(t *testing.T) {
	for _, status := range []int{201, 503} {
		inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
		tr := New(inner, WithClock(newFakeClock()), WithBudget(1, time.Minute))
		for _, withGetBody := range []bool{true, false} {
			req, body := newPost(t, context.Background(), "never read", withGetBody)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !body.closed.Load() {
				t.Errorf("status %d, GetBody %v: the caller's body was left open", status, withGetBody)
			}
		}
	}
}

// A Transport whose inner transport dropped its pool, or whose funder went
// away, keeps working: the pool is rebuilt, and a vanished funder is a
// refused connection, dead-lettered within the budget.
func TestTransportAfterInnerIsClosed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	inner := &http.Transport{}
	tr := New(inner, WithClock(newFakeClock()), WithBudget(2, time.Minute))
	post := func() (Outcome, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return mustError(t, err).Outcome, err
		}
		resp.Body.Close()
		return mustOutcome(t, resp), nil
	}
	if o, err := post(); err != nil || o.Disposition != Succeeded {
		t.Fatalf("first call: %+v %v", o, err)
	}
	tr.CloseIdleConnections()
	if o, err := post(); err != nil || o.Disposition != Succeeded {
		t.Fatalf("after CloseIdleConnections: %+v %v", o, err)
	}
	srv.Close()
	o, err := post()
	if err == nil || o.Disposition != DeadLetter || o.Attempts != 3 || o.Reason != "transport:refused" {
		t.Errorf("after the funder went away: %+v %v, want dead_letter after 3 refused attempts", o, err)
	}
	inner.CloseIdleConnections()
}

// TestHeaderNameTableIsTheTokenRule checks validHeaderName's table against
// RFC 9110's tchar, byte by byte, in the middle of a name and alone.
func TestHeaderNameTableIsTheTokenRule(t *testing.T) {
	for b := 0; b < 256; b++ {
		c := byte(b)
		want := c > ' ' && c < 0x7f && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
		for _, name := range []string{string([]byte{c}), "X-" + string([]byte{c}) + "-Y"} {
			if got := validHeaderName(name); got != want {
				t.Errorf("validHeaderName(%q) = %v, want %v", name, got, want)
			}
		}
	}
}

// An invalid method is quoted in the error's message: a CR or LF in it
// must not split the line that logs the error.
func TestInvalidMethodIsQuotedInTheErrorMessage(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://funder.example/x", nil)
	req.Method = "POST\r\nX-Injected: 1"
	_, err := New(roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Fatal("an invalid method reached the inner transport")
		return nil, nil
	})).RoundTrip(req)
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("err %v, want ErrInvalidRequest", err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("the message holds a CR or LF: %q", msg)
	}
}
