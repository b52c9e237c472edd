package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/grantretry/grantretry"
)

// outcomeSlot receives the Outcome of the calls made under one context.
// It is written by outcomeRecorder on the goroutine that called
// http.Client.Do, and read by the same goroutine after the SDK returns, so
// it needs no lock.
type outcomeSlot struct {
	outcome grantretry.Outcome
	ok      bool // a call under the context ended through grantretry
}

type slotKey struct{}

// withOutcomeSlot returns a copy of ctx whose calls report their Outcome
// to s. The last call wins: for an SDK method that makes one call, that is
// its call.
func withOutcomeSlot(ctx context.Context, s *outcomeSlot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// outcomeRecorder is how a pipeline sees the Outcome of calls an SDK makes
// and hides: the SDK consumes the *http.Response and returns its own types,
// so grantretry.OutcomeOf cannot be called on it. But the pipeline built the
// *http.Client, so it can stack one more RoundTripper over grantretry's,
// which sees every response and error before the SDK does. It changes
// nothing it passes on. Safe for concurrent use.
type outcomeRecorder struct {
	next http.RoundTripper
}

// RoundTrip sends req through next and copies the call's Outcome into the
// slot on req's context, if there is one.
func (r outcomeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	s, _ := req.Context().Value(slotKey{}).(*outcomeSlot)
	if s == nil {
		return resp, err
	}
	var gerr *grantretry.Error
	switch {
	case err == nil:
		s.outcome, s.ok = grantretry.OutcomeOf(resp)
	case errors.As(err, &gerr):
		s.outcome, s.ok = gerr.Outcome, true
	}
	return resp, err
}
