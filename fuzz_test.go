package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzParseRetryAfter: never panics; a value it accepts is never negative;
// delay-seconds are digits only.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "7", " 120 ", "99999999999999999999999", "-5", "1.5", "",
		"Mon, 30 Nov 2026 09:05:00 GMT", "Monday, 30-Nov-26 09:02:00 GMT", "Mon Nov 30 09:00:30 2026", "soon"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: want 0 when refused", v, d)
		}
		if ok && d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative", v, d)
		}
		if tr := strings.TrimSpace(v); ok && strings.ContainsAny(tr, ".+-") && !strings.ContainsAny(tr, " ,") {
			t.Fatalf("ParseRetryAfter(%q) accepted a signed or fractional delay", v)
		}
	})
}

// fuzzErr builds an error chain from fuzz input: a message, wrapped some
// number of times, optionally around a known sentinel.
func fuzzErr(msg string, depth uint8, sentinel uint8) error {
	sentinels := []error{nil, context.Canceled, context.DeadlineExceeded, io.EOF, io.ErrUnexpectedEOF, ErrInvalidRequest, errNoResponse}
	var err error = errors.New(msg)
	if s := sentinels[int(sentinel)%len(sentinels)]; s != nil {
		err = fmt.Errorf("%s: %w", msg, s)
	}
	for i := 0; i < int(depth%8); i++ {
		err = fmt.Errorf("layer %d: %w", i, err)
	}
	return err
}

// FuzzClassify: never panics; every reason has one of the documented forms;
// the caller's cancellation is never retryable.
func FuzzClassify(f *testing.F) {
	f.Add(503, "", uint8(0), uint8(0), false)
	f.Add(0, "connection reset", uint8(2), uint8(3), true)
	f.Add(422, "x", uint8(1), uint8(1), true)
	f.Add(-7, "", uint8(0), uint8(0), false)
	f.Fuzz(func(t *testing.T, status int, msg string, depth, sentinel uint8, withErr bool) {
		var err error
		if withErr {
			err = fuzzErr(msg, depth, sentinel)
		}
		c := Classify(status, err)
		forms := []string{"ok:", "transient:", "terminal:", "unclassified:", "transport:"}
		okForm := false
		for _, p := range forms {
			okForm = okForm || strings.HasPrefix(c.Reason, p)
		}
		if !okForm {
			t.Fatalf("Classify(%d, %v) reason %q has no documented form", status, err, c.Reason)
		}
		if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && c.Retryable {
			t.Fatalf("Classify(%v) retries the caller's own cancellation", err)
		}
		if err == nil && (status < 100 || status >= 600) && c.Retryable {
			t.Fatalf("Classify(%d) retries a status outside HTTP's range", status)
		}
	})
}

// scriptedInner answers attempt i with step i of a script decoded from fuzz
// bytes: a status (or a transport error), and maybe a Retry-After.
type scriptedInner struct {
	script []byte
	n      atomic.Int32
	keys   []string
	bodies []string
	closed atomic.Int32
	opened atomic.Int32
}

type countedBody struct {
	io.Reader
	closed *atomic.Int32
}

func (b countedBody) Close() error { b.closed.Add(1); return nil }

func (s *scriptedInner) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(s.n.Add(1)) - 1
	s.keys = append(s.keys, r.Header.Get(HeaderIdempotencyKey))
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		s.bodies = append(s.bodies, string(b))
	}
	step := byte(0)
	if len(s.script) > 0 {
		step = s.script[i%len(s.script)]
	}
	statuses := []int{200, 201, 302, 400, 404, 422, 429, 500, 502, 503, 504, 418, 0, 999}
	switch step % 20 {
	case 14:
		return nil, io.ErrUnexpectedEOF
	case 15:
		return nil, errors.New("connection reset by peer")
	}
	h := http.Header{}
	switch step / 20 % 4 {
	case 1:
		h.Set("Retry-After", fmt.Sprint(step%7))
	case 2:
		h.Set("Retry-After", "garbage")
	case 3:
		h.Set("Retry-After", "99999999")
	}
	s.opened.Add(1)
	return &http.Response{StatusCode: statuses[int(step%20)%len(statuses)], Header: h, Request: r,
		Body: countedBody{strings.NewReader("body"), &s.closed}}, nil
}

// FuzzTransport drives the Transport with arbitrary sequences of statuses,
// Retry-After values and transport errors, and checks the invariants:
// attempts <= retries+1, every wait within [0, deadline), the same key and
// the same body on every attempt, every discarded body closed, never both a
// response and an error, and no panic.
func FuzzTransport(f *testing.F) {
	f.Add([]byte{9, 9, 0}, uint8(4), "POST", "payload")
	f.Add([]byte{6 + 20, 0}, uint8(2), "GET", "")
	f.Add([]byte{14, 15, 14}, uint8(3), "PUT", "x")
	f.Add([]byte{5}, uint8(4), "POST", "{}")
	f.Add([]byte{9 + 60}, uint8(4), "PATCH", "p")
	f.Fuzz(func(t *testing.T, script []byte, retries uint8, method, payload string) {
		switch method {
		case "GET", "POST", "PUT", "PATCH", "DELETE":
		default:
			method = "POST"
		}
		maxRetries := int(retries % 6)
		clock := newFakeClock()
		inner := &scriptedInner{script: script}
		tr := New(inner, WithClock(clock), WithBudget(maxRetries, time.Minute), WithoutBreaker())
		ctx := WithSubmissionID(context.Background(), "S-fuzz")
		req, _ := http.NewRequestWithContext(ctx, method, funderURL, strings.NewReader(payload))
		body := newTrackedBody(payload)
		req.Body = body

		resp, err := tr.RoundTrip(req)
		if resp != nil && err != nil {
			t.Fatal("both a response and an error")
		}
		var o Outcome
		if resp != nil {
			o = mustOutcome(t, resp)
			resp.Body.Close()
		} else {
			o = mustError(t, err).Outcome
		}
		if o.Attempts > maxRetries+1 || o.Attempts != len(inner.keys) {
			t.Fatalf("%d attempts (inner saw %d), budget %d retries", o.Attempts, len(inner.keys), maxRetries)
		}
		for i := range inner.keys {
			if inner.keys[i] != inner.keys[0] || inner.bodies[i] != payload {
				t.Fatalf("attempt %d carried key %q body %q; first %q, payload %q", i+1, inner.keys[i], inner.bodies[i], inner.keys[0], payload)
			}
		}
		for _, w := range clock.waits() {
			if w < 0 || w >= time.Minute {
				t.Fatalf("wait %v outside [0, deadline)", w)
			}
		}
		if got, want := inner.closed.Load(), inner.opened.Load(); got != want {
			t.Fatalf("%d of %d response bodies closed", got, want)
		}
		if !body.closed.Load() {
			t.Fatal("caller's body not closed")
		}
	})
}
