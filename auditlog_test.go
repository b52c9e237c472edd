package grantretry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// One line per attempt and one per disposition, with the documented fields.
func TestAuditLinesPerAttemptAndDisposition(t *testing.T) {
	h := newHarness(t, WithRandSource(maxSource{}), WithBackoff(100*time.Millisecond, time.Second))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 429, 201))
	const payload = `{"applicant":"Harbor Arts Council"}`
	req, _ := newPost(t, WithSubmissionID(context.Background(), "GRANT-7"), payload, true)

	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)

	attempts := h.attemptLines()
	if len(attempts) != 3 {
		t.Fatalf("%d attempt lines, want 3", len(attempts))
	}
	wantStatus := []int64{503, 429, 201}
	wantReason := []string{"transient:503", "transient:429", "ok:201"}
	wantWait := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 0}
	wantSource := []string{"backoff", "backoff", ""}
	for i, l := range attempts {
		m := l.ContextMap()
		if l.Level != zapcore.InfoLevel {
			t.Errorf("attempt %d at %v, want INFO", i+1, l.Level)
		}
		checks := map[string]any{
			FieldCorrelationID:  o.CorrelationID,
			FieldIdempotencyKey: IdempotencyKey("GRANT-7", []byte(payload)),
			FieldSubmissionID:   "GRANT-7",
			FieldMethod:         "POST",
			FieldHost:           "funder.test",
			FieldPath:           "/v1/applications",
			FieldAttempt:        int64(i + 1),
			FieldStatus:         wantStatus[i],
			FieldReason:         wantReason[i],
			FieldRetryable:      i < 2,
			FieldWait:           wantWait[i],
			FieldWaitSource:     wantSource[i],
			FieldError:          "",
		}
		for k, want := range checks {
			if got := m[k]; got != want {
				t.Errorf("attempt %d: %s = %v (%T), want %v (%T)", i+1, k, got, got, want, want)
			}
		}
		for _, k := range []string{FieldLatency, FieldElapsed} {
			if _, ok := m[k]; !ok {
				t.Errorf("attempt %d: no %s field", i+1, k)
			}
		}
	}
	if got := attempts[2].ContextMap()[FieldElapsed]; got != 300*time.Millisecond {
		t.Errorf("elapsed at the third attempt = %v, want the 300ms waited", got)
	}

	disp := h.dispositionLines()
	if len(disp) != 1 {
		t.Fatalf("%d disposition lines, want 1", len(disp))
	}
	m := disp[0].ContextMap()
	sum := sha256.Sum256([]byte(payload))
	checks := map[string]any{
		FieldDisposition:   "succeeded",
		FieldAttempts:      int64(3),
		FieldStopReason:    StopSuccess,
		FieldStatus:        int64(201),
		FieldPayloadSHA256: hex.EncodeToString(sum[:]),
		FieldPayloadBytes:  int64(len(payload)),
		FieldNotReplayable: "",
	}
	for k, want := range checks {
		if got := m[k]; got != want {
			t.Errorf("disposition: %s = %v, want %v", k, got, want)
		}
	}
	if disp[0].Level != zapcore.InfoLevel {
		t.Errorf("succeeded disposition at %v, want INFO", disp[0].Level)
	}
}

func TestAuditDispositionLevels(t *testing.T) {
	cases := []struct {
		resp  []int
		disp  Disposition
		level zapcore.Level
	}{
		{[]int{200}, Succeeded, zapcore.InfoLevel},
		{[]int{422}, FailedTerminal, zapcore.WarnLevel},
		{[]int{503}, DeadLetter, zapcore.WarnLevel},
	}
	for _, c := range cases {
		h := newHarness(t, WithBudget(1, time.Minute))
		h.mock.RegisterResponder(http.MethodGet, funderURL, seq(c.resp...))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		d := h.dispositionLines()
		if len(d) != 1 || d[0].ContextMap()[FieldDisposition] != string(c.disp) || d[0].Level != c.level {
			t.Errorf("%v: disposition lines %+v, want one %s at %v", c.resp, d, c.disp, c.level)
		}
	}
}

// No secret reaches an audit line or a returned error: not the body, not
// credentials in headers, not URL user info, not the query, not even when
// the inner transport's error quotes the full URL.
func TestAuditAndErrorsCarryNoSecrets(t *testing.T) {
	secrets := []string{"BODY-SECRET-42", "Bearer-tok3n-xyz", "cookie-val-99", "proxy-cred-77",
		"apikey-55555", "hunter2pass", "qs-token-abcdef", "alice-user"}
	h := newHarness(t, WithBudget(1, time.Minute))
	rawURL := "https://alice-user:hunter2pass@funder.test/v1/applications?token=qs-token-abcdef&x=1"
	h.mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		return nil, &url.Error{Op: "Post", URL: r.URL.String(), Err: fmt.Errorf("connection reset for %s", r.URL.String())}
	})
	req, _ := http.NewRequestWithContext(WithSubmissionID(context.Background(), "S-1"), http.MethodPost, rawURL,
		strings.NewReader(`{"ssn":"BODY-SECRET-42"}`))
	req.Header.Set("Authorization", "Bearer Bearer-tok3n-xyz")
	req.Header.Set("Cookie", "session=cookie-val-99")
	req.Header.Set("Proxy-Authorization", "Basic proxy-cred-77")
	req.Header.Set("X-Api-Key", "apikey-55555")

	_, err := h.tr.RoundTrip(req)
	if err == nil {
		t.Fatal("want an error")
	}
	var everything []string
	everything = append(everything, err.Error())
	for _, l := range h.logs.AllUntimed() {
		everything = append(everything, l.Message)
		for k, v := range l.ContextMap() {
			everything = append(everything, k, fmt.Sprint(v))
		}
	}
	if len(h.logs.AllUntimed()) < 3 {
		t.Fatalf("only %d audit lines", len(h.logs.AllUntimed()))
	}
	joined := strings.Join(everything, "\n")
	for _, s := range secrets {
		if strings.Contains(joined, s) {
			t.Errorf("secret %q leaked into an audit line or error:\n%s", s, joined)
		}
	}
	if !strings.Contains(err.Error(), string(DeadLetter)) {
		t.Errorf("error %q does not say how the call ended", err)
	}
}

// With the default no-op logger nothing is built for the audit trail.
func TestNopLoggerSkipsPayloadHash(t *testing.T) {
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}), WithClock(newFakeClock()))
	req, _ := http.NewRequest(http.MethodPut, funderURL, strings.NewReader("x"))
	c := &call{t: tr, req: req}
	if err := c.prepare(); err != nil {
		t.Fatal(err)
	}
	defer c.stopContexts(true)
	if c.p.sum != "" {
		t.Error("payload hashed for a logger that writes nothing")
	}
}

// An empty body's digest is logged without hashing it, and is the real one.
func TestEmptyBodyDigestIsLogged(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sum := sha256.Sum256(nil)
	d := h.dispositionLines()
	if len(d) != 1 || d[0].ContextMap()[FieldPayloadSHA256] != hex.EncodeToString(sum[:]) || d[0].ContextMap()[FieldPayloadBytes] != int64(0) {
		t.Errorf("disposition lines %+v, want the empty body's SHA-256 and 0 bytes", d)
	}
}
