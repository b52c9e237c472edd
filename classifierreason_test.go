package grantretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A ClassifyFunc's Reason is its own text, and may echo the request (a
// funder's fault that quotes what it was sent): it is scrubbed by the
// rules error text is, wherever it goes (Outcome.Reason, the audit lines'
// reason, the letter, the span), while the status's form before it stays
// as the Transport wrote it.
func TestClassifierReasonIsScrubbedOfTheRequest(t *testing.T) {
	const body = `{"applicant":"Riverside Arts","ssn":"123-45-6789"}`
	tp := &textTP{}
	core, logs := observer.New(zapcore.DebugLevel)
	sink := &memLetters{}
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return &http.Response{StatusCode: 500, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}), WithClock(newFakeClock()), WithBudget(1, time.Hour), WithLogger(zap.New(core)),
		WithDeadLetter(sink), WithTracerProvider(tp),
		WithClassifier(func(resp *http.Response, _ []byte) (Classification, bool) {
			return Classification{Retryable: true, Reason: fmt.Sprintf("fault:refused for %s, got %s", resp.Request.Header.Get("X-Applicant-Ssn"), body)}, true
		}))
	req, _ := newPost(t, context.Background(), body, true)
	req.Header.Set("X-Applicant-Ssn", "123-45-6789")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	o := mustOutcome(t, resp)
	texts := map[string]string{"Outcome.Reason": o.Reason, "the letter's reason": sink.only(t).Reason}
	for i, l := range logs.AllUntimed() {
		texts[fmt.Sprintf("line %d (%s) reason", i, l.Message)] = fmt.Sprint(l.ContextMap()[FieldReason])
	}
	for i, s := range tp.all() {
		texts[fmt.Sprintf("span text %d", i)] = s
	}
	for where, text := range texts {
		if leaks := requestLeaks(text, req.Header, body); leaks != nil {
			t.Errorf("%s holds %q: %s", where, leaks, text)
		}
	}
	if !strings.HasPrefix(o.Reason, "transient:500;fault:refused for ") {
		t.Errorf("Outcome.Reason = %q: want the status's form and the classifier's words kept", o.Reason)
	}
}
