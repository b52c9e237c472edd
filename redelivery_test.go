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

// The lines of a redelivery name its letter in FieldRedelivers; the lines
// of any other call have no such field.
func TestRedeliveryLinesNameTheLetter(t *testing.T) {
	h := newHarness(t, WithBudget(1, time.Hour))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201, 503, 201, 503, 201))
	for _, ctx := range []context.Context{
		WithRedeliveryOf(context.Background(), "L-1"),
		context.Background(),
		WithRedelivery(context.Background()),
	} {
		req, _ := newPost(t, ctx, `{"a":1}`, true)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	var got []string
	for _, e := range h.logs.All() {
		v, ok := e.ContextMap()[FieldRedelivers]
		if !ok {
			v = "-"
		}
		got = append(got, strings.TrimPrefix(e.Message, "grantretry.")+"="+v.(string))
	}
	want := "attempt=L-1 attempt=L-1 disposition=L-1 attempt=- attempt=- disposition=- attempt=- attempt=- disposition=-"
	if strings.Join(got, " ") != want {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// WithReconcileFirst asks before the first attempt, about the letter's
// last attempt, and only for a request that carries its own key, as a
// redelivery does; with a nil letter or function such a request is
// refused before anything is sent.
func TestWithReconcileFirstAsksBeforeTheFirstAttempt(t *testing.T) {
	l := &Letter{ID: "L-2", Attempts: 4, LastStatus: 502, LastError: "reset"}
	var asked []ReconcileQuery
	has := func(_ context.Context, q ReconcileQuery) (*http.Response, error) {
		asked = append(asked, q)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("on file"))}, nil
	}
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(201))
	keyed := func(ctx context.Context) *http.Request {
		req, _ := newPost(t, ctx, `{"a":1}`, true)
		req.Header.Set(HeaderIdempotencyKey, "grant-letter-key")
		return req
	}
	resp, err := h.tr.RoundTrip(keyed(WithReconcileFirst(context.Background(), l, has)))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "on file" {
		t.Errorf("body %q, want the reconciler's", body)
	}
	o := mustOutcome(t, resp)
	if o.Attempts != 0 || o.StopReason != StopReconciled || h.mock.GetTotalCallCount() != 0 {
		t.Errorf("outcome %+v after %d requests: want reconciled, nothing sent", o, h.mock.GetTotalCallCount())
	}
	if len(asked) != 1 || asked[0].Attempt != 4 || asked[0].Status != 502 || asked[0].Err == nil || asked[0].Err.Error() != "reset" {
		t.Errorf("asked %+v, want one question about the letter's last attempt", asked)
	}

	get, _ := http.NewRequestWithContext(WithReconcileFirst(context.Background(), l, has), http.MethodGet, funderURL, nil)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
	derived, _ := newPost(t, WithReconcileFirst(context.Background(), l, has), `{"a":1}`, true)
	for _, req := range []*http.Request{get, derived} {
		resp, err = h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	if len(asked) != 1 {
		t.Errorf("a request without a key of its own was asked about")
	}

	for _, ctx := range []context.Context{WithReconcileFirst(context.Background(), nil, has), WithReconcileFirst(context.Background(), l, nil)} {
		before := h.mock.GetTotalCallCount()
		_, err := h.tr.RoundTrip(keyed(ctx))
		if !errors.Is(err, ErrInvalidRequest) || h.mock.GetTotalCallCount() != before {
			t.Errorf("WithReconcileFirst with a nil: %v, want ErrInvalidRequest and nothing sent", err)
		}
	}
}

// Under WithReconcileFirst, a letter that has no FirstAttempt (it was
// never sent) is asked about with none before the redelivery's first
// attempt; after that attempt, every question carries the redelivery's
// start, as any call's questions carry its own.
func TestWithReconcileFirstAsksLaterQuestionsWithTheCallsStart(t *testing.T) {
	l := &Letter{ID: "L-3", Attempts: 0}
	var asked []ReconcileQuery
	notThere := func(_ context.Context, q ReconcileQuery) (*http.Response, error) {
		asked = append(asked, q)
		return nil, nil
	}
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(502, 201))
	start := h.clock.Now()
	req, _ := newPost(t, WithReconcileFirst(context.Background(), l, notThere), `{"a":1}`, true)
	req.Header.Set(HeaderIdempotencyKey, "grant-letter-key")
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if len(asked) != 2 {
		t.Fatalf("asked %d times, want before the first attempt and after the 502", len(asked))
	}
	if !asked[0].FirstAttempt.IsZero() {
		t.Errorf("before the first attempt: FirstAttempt %v, want zero: the letter has none", asked[0].FirstAttempt)
	}
	if !asked[1].FirstAttempt.Equal(start) {
		t.Errorf("after the redelivery's first attempt: FirstAttempt %v, want its start %v", asked[1].FirstAttempt, start)
	}
}
