package grantretry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// memLetters is a DeadLetterSink that keeps letters in memory, or fails
// with err.
type memLetters struct {
	mu      sync.Mutex
	letters []*Letter
	err     error
}

func (m *memLetters) PutDeadLetter(ctx context.Context, l *Letter) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.letters = append(m.letters, l)
	return nil
}

func (m *memLetters) all() []*Letter {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Letter(nil), m.letters...)
}

func (m *memLetters) only(t *testing.T) *Letter {
	t.Helper()
	ls := m.all()
	if len(ls) != 1 {
		t.Fatalf("%d letters kept, want 1", len(ls))
	}
	return ls[0]
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// A POST dead-lettered after its retries holds everything needed to send it
// again: method, URL, headers, the body byte for byte, the key and ids, the
// attempts and times, and its ID is on the outcome and the audit line.
func TestDeadLetterHoldsTheCall(t *testing.T) {
	for _, withGetBody := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffered", true: "GetBody"}[withGetBody], func(t *testing.T) {
			sink := &memLetters{}
			h := newHarness(t, WithDeadLetter(sink), WithBudget(2, time.Hour), WithRandSource(maxSource{}))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
			const payload = `{"application":"GRANT-7","amount":1200}`
			req, _ := newPost(t, WithSubmissionID(context.Background(), "GRANT-7"), payload, withGetBody)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Pipeline-Run", "run-42")
			start := h.clock.Now()
			resp, err := h.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			o := mustOutcome(t, resp)
			l := sink.only(t)
			if o.Disposition != DeadLetter || o.DeadLetterID != l.ID || o.RecordErr != nil {
				t.Fatalf("outcome %+v, letter %s: want dead_letter carrying the letter's ID", o, l.ID)
			}
			want := Letter{
				Version: LetterVersion, ID: l.ID, Disposition: DeadLetter, StopReason: StopRetriesSpent,
				Reason: "transient:503", Method: http.MethodPost, URL: funderURL,
				BodySHA256: hexSHA256([]byte(payload)), BodyBytes: int64(len(payload)),
				IdempotencyKey: o.IdempotencyKey, CorrelationID: o.CorrelationID, SubmissionID: "GRANT-7",
				Attempts: 3, LastStatus: 503,
				FirstAttempt: start, LastAttempt: l.LastAttempt, Created: l.Created,
			}
			got := *l
			got.Body, got.Header = nil, nil
			if !equalLetters(got, want) {
				t.Errorf("letter\n%+v\nwant\n%+v", got, want)
			}
			if string(l.Body) != payload {
				t.Errorf("letter body %q, want %q", l.Body, payload)
			}
			if l.Header.Get("Content-Type") != "application/json" || l.Header.Get("X-Pipeline-Run") != "run-42" {
				t.Errorf("letter header %v lost the caller's headers", l.Header)
			}
			if l.Header.Get(HeaderIdempotencyKey) != "" || l.Header.Get(HeaderCorrelationID) != "" {
				t.Errorf("letter header %v repeats the stamped headers", l.Header)
			}
			if !l.LastAttempt.After(l.FirstAttempt) || l.Created.Before(l.LastAttempt) {
				t.Errorf("times first %v last %v created %v out of order", l.FirstAttempt, l.LastAttempt, l.Created)
			}
			lines := h.dispositionLines()
			if len(lines) != 1 || lines[0].ContextMap()[FieldDeadLetterID] != l.ID {
				t.Errorf("disposition lines %v, want one naming letter %s", lines, l.ID)
			}
		})
	}
}

// equalLetters compares two letters field by field, times with Equal.
func equalLetters(a, b Letter) bool {
	ta := [3]time.Time{a.FirstAttempt, a.LastAttempt, a.Created}
	tb := [3]time.Time{b.FirstAttempt, b.LastAttempt, b.Created}
	for i := range ta {
		if !ta[i].Equal(tb[i]) {
			return false
		}
	}
	a.FirstAttempt, a.LastAttempt, a.Created = time.Time{}, time.Time{}, time.Time{}
	b.FirstAttempt, b.LastAttempt, b.Created = time.Time{}, time.Time{}, time.Time{}
	return a.Version == b.Version && a.ID == b.ID && a.Disposition == b.Disposition &&
		a.StopReason == b.StopReason && a.Reason == b.Reason && a.Method == b.Method &&
		a.URL == b.URL && strings.Join(a.Redacted, ",") == strings.Join(b.Redacted, ",") &&
		strings.Join(a.RedactedQuery, ",") == strings.Join(b.RedactedQuery, ",") &&
		bytes.Equal(a.Body, b.Body) && a.BodySHA256 == b.BodySHA256 && a.BodyBytes == b.BodyBytes &&
		a.BodyOmitted == b.BodyOmitted && a.IdempotencyKey == b.IdempotencyKey &&
		a.CorrelationID == b.CorrelationID && a.SubmissionID == b.SubmissionID &&
		a.Attempts == b.Attempts && a.LastStatus == b.LastStatus && a.LastError == b.LastError
}

// Only the calls that still owe work are kept: dead_letter and
// circuit_open, whether or not a response came back; never succeeded,
// failed_terminal or canceled.
func TestDeadLetterKeptOnlyForOwedWork(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		opts     []Option
		cancel   bool
		want     Disposition
		kept     bool
	}{
		{name: "succeeded", statuses: []int{503, 200}, want: Succeeded},
		{name: "terminal", statuses: []int{422}, want: FailedTerminal},
		{name: "retries spent", statuses: []int{503}, want: DeadLetter, kept: true},
		{name: "throttled", statuses: []int{503}, opts: []Option{WithRetryThrottle(2, 1)}, want: DeadLetter, kept: true},
		{name: "breaker opened", statuses: []int{503}, opts: []Option{WithBreaker(1, time.Hour)}, want: CircuitOpen, kept: true},
		{name: "canceled", statuses: []int{503}, cancel: true, want: Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &memLetters{}
			h := newHarness(t, append([]Option{WithDeadLetter(sink), WithBudget(2, time.Hour)}, tc.opts...)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			answer := seq(tc.statuses...)
			h.mock.RegisterResponder(http.MethodPost, funderURL, func(r *http.Request) (*http.Response, error) {
				if tc.cancel {
					cancel() // the caller gives up during the attempt
				}
				return answer(r)
			})
			req, _ := newPost(t, ctx, `{"a":1}`, true)
			var o Outcome
			resp, err := h.tr.RoundTrip(req)
			if err != nil {
				o = mustError(t, err).Outcome
			} else {
				readAll(t, resp)
				o = mustOutcome(t, resp)
			}
			if o.Disposition != tc.want {
				t.Fatalf("disposition %s, want %s", o.Disposition, tc.want)
			}
			if n := len(sink.all()); (n == 1) != tc.kept || n > 1 {
				t.Errorf("%d letters kept, want kept=%v", n, tc.kept)
			}
			if (o.DeadLetterID != "") != tc.kept {
				t.Errorf("outcome DeadLetterID %q, want kept=%v", o.DeadLetterID, tc.kept)
			}
		})
	}
}

// A host whose breaker is already open: the call is refused before any
// attempt and still kept whole, with no attempt times.
func TestDeadLetterOfRefusedCall(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithBreaker(1, time.Hour), WithBudget(0, time.Hour))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	first, _ := newPost(t, context.Background(), `{"first":1}`, true)
	if resp, err := h.tr.RoundTrip(first); err == nil {
		readAll(t, resp)
	}
	req, _ := newPost(t, context.Background(), `{"second":2}`, false)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	ls := sink.all()
	if e.Disposition != CircuitOpen || len(ls) != 2 {
		t.Fatalf("outcome %+v with %d letters, want circuit_open and 2 letters", e.Outcome, len(ls))
	}
	l := ls[1]
	if l.Attempts != 0 || !l.FirstAttempt.IsZero() || string(l.Body) != `{"second":2}` || l.ID != e.DeadLetterID || l.LastError == "" {
		t.Errorf("letter %+v: want 0 attempts, no attempt time, the whole body and the breaker's error", l)
	}
}

// A body that was sent once and could not be kept is named as omitted, and
// the letter is still kept: the work is owed whether or not it can be
// redelivered as it is.
func TestDeadLetterBodyOmittedWhenNotReplayable(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithReplayLimit(4))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	req, _ := newPost(t, context.Background(), `{"too":"long"}`, false)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	l := sink.only(t)
	if l.StopReason != StopNotReplayable || l.Body != nil || l.BodyOmitted == "" {
		t.Errorf("letter %+v: want body_not_replayable with the body omitted and why", l)
	}
}

// No secret reaches a letter: credential headers (built in and named with
// WithRedact), user info, secret query parameters, nor the last error, which
// here quotes the whole URL and every header. What was left out is named,
// and the rest of the URL and headers is kept as it was.
func TestDeadLetterLeavesSecretsOut(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithBudget(0, time.Hour), WithRedact("X-Portal-Pin"))
	h.mock.RegisterNoResponder(func(r *http.Request) (*http.Response, error) {
		return nil, fmt.Errorf("dial %s with headers %v: connection refused", r.URL, r.Header)
	})
	const secretURL = "https://pipeline:hunter2hunter2@funder.test/v1/applications?cycle=2026&api_key=AKIA-SECRET-1&token=tok-SECRET-2#frag"
	req, err := http.NewRequest(http.MethodPost, secretURL, strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"Authorization":       "Bearer SECRET-bearer-3",
		"Proxy-Authorization": "Basic SECRET-proxy-4",
		"Cookie":              "session=SECRET-cookie-5",
		"X-Api-Key":           "SECRET-apikey-6",
		"X-Auth-Token":        "SECRET-authtoken-7",
		"X-Portal-Pin":        "SECRET-pin-8",
	}
	for k, v := range secrets {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "application/json")
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrDeadLetter) {
		t.Fatalf("error %v, want a dead letter", err)
	}
	l := sink.only(t)
	if !strings.Contains(l.LastError, "connection refused") {
		t.Errorf("letter LastError %q, want the transport error", l.LastError)
	}
	if l.URL != "https://funder.test/v1/applications?cycle=2026" {
		t.Errorf("letter URL %q, want no user info, secret parameters or fragment", l.URL)
	}
	if l.Header.Get("Accept") != "application/json" || len(l.Header) != 1 {
		t.Errorf("letter header %v, want only Accept", l.Header)
	}
	want := "Authorization,Cookie,Proxy-Authorization,X-Api-Key,X-Auth-Token,X-Portal-Pin"
	if got := strings.Join(l.Redacted, ","); got != want {
		t.Errorf("letter Redacted %q, want %q", got, want)
	}
	if got := strings.Join(l.RedactedQuery, ","); got != "api_key,token" {
		t.Errorf("letter RedactedQuery %q, want api_key,token", got)
	}
	dump := letterText(l)
	for _, s := range append(mapValues(secrets), "hunter2hunter2", "AKIA-SECRET-1", "tok-SECRET-2") {
		if strings.Contains(dump, strings.TrimPrefix(strings.TrimPrefix(s, "Bearer "), "Basic ")) {
			t.Errorf("letter holds secret %q", s)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// letterText is everything a letter says, as text.
func letterText(l *Letter) string {
	var b strings.Builder
	b.WriteString(l.URL + " " + l.LastError + " " + string(l.Body) + " " + strings.Join(l.Redacted, " ") + " " + strings.Join(l.RedactedQuery, " "))
	for k, vs := range l.Header {
		b.WriteString(" " + k + ": " + strings.Join(vs, ","))
	}
	return b.String()
}

// A sink that fails does not hide the call's disposition, and does not
// fail silently either: the outcome's RecordErr says the letter was not
// kept, so does the error's message and the audit line.
func TestDeadLetterSinkFailureIsReported(t *testing.T) {
	diskFull := errors.New("no space left on device")
	sink := &memLetters{err: diskFull}
	h := newHarness(t, WithDeadLetter(sink), WithBudget(1, time.Hour))
	h.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection reset by peer")
	})
	req, _ := newPost(t, context.Background(), `{"a":1}`, true)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Disposition != DeadLetter || e.DeadLetterID != "" || !errors.Is(e.RecordErr, diskFull) {
		t.Fatalf("outcome %+v, want dead_letter with RecordErr wrapping the sink's error", e.Outcome)
	}
	if !strings.Contains(err.Error(), "not recorded") || !strings.Contains(err.Error(), diskFull.Error()) {
		t.Errorf("error %q does not say the letter was not kept", err)
	}
	if !errors.Is(err, ErrDeadLetter) {
		t.Errorf("error %v no longer matches ErrDeadLetter", err)
	}
	lines := h.dispositionLines()
	if len(lines) != 1 || !strings.Contains(lines[0].ContextMap()[FieldRecordError].(string), diskFull.Error()) {
		t.Errorf("disposition lines %v, want one with the record error", lines)
	}
}

// keptAtError is a sink's error for a letter it kept in a fallback place.
type keptAtError struct{ at string }

func (e *keptAtError) Error() string  { return "kept at " + e.at + " instead" }
func (e *keptAtError) KeptAt() string { return e.at }

// A sink whose error says where it kept the letter instead (KeptAt) is
// not reported as having lost it; one whose KeptAt is "" is.
func TestDeadLetterKeptElsewhereIsNotReportedAsLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      string
		notKept bool
	}{
		{"kept in a fallback", "/var/letters/x.json", false},
		{"kept nowhere", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sinkErr := &keptAtError{at: tc.at}
			h := newHarness(t, WithDeadLetter(&memLetters{err: sinkErr}), WithBudget(1, time.Hour))
			h.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
				return nil, errors.New("connection reset by peer")
			})
			req, _ := newPost(t, context.Background(), `{"a":1}`, true)
			_, err := h.tr.RoundTrip(req)
			e := mustError(t, err)
			var got *keptAtError
			if !errors.As(e.RecordErr, &got) || got != sinkErr {
				t.Fatalf("RecordErr %v does not wrap the sink's error", e.RecordErr)
			}
			msg := e.RecordErr.Error()
			if strings.Contains(msg, "not kept") != tc.notKept {
				t.Errorf("RecordErr %q: says \"not kept\" = %v, want %v", msg, !tc.notKept, tc.notKept)
			}
			if !strings.Contains(msg, sinkErr.Error()) {
				t.Errorf("RecordErr %q does not carry the sink's own account %q", msg, sinkErr.Error())
			}
			if kept := e.Outcome.DeadLetterID != ""; kept == tc.notKept {
				t.Errorf("DeadLetterID %q for a letter kept=%v", e.Outcome.DeadLetterID, !tc.notKept)
			}
		})
	}
}

// The caller giving up as the call ends dead_letter does not stop the
// letter: the sink gets a context detached from the caller's cancellation.
func TestDeadLetterSurvivesCallerCancel(t *testing.T) {
	sink := &memLetters{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An inner transport that answers after the caller gave up (httpmock
	// races its responder against the context, so it would not always).
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		cancel()
		resp := httpmock.NewStringResponse(503, "down")
		resp.Request = r
		return resp, nil
	})
	tr := New(inner, WithDeadLetter(sink), WithBudget(0, time.Hour), WithClock(newFakeClock()))
	req, _ := newPost(t, ctx, `{"a":1}`, true)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if o := mustOutcome(t, resp); o.Disposition != DeadLetter || o.DeadLetterID == "" || o.RecordErr != nil {
		t.Errorf("outcome %+v, want dead_letter with its letter kept", o)
	}
}

// A typed nil sink is refused like a nil one, before it could panic on
// the first dead letter.
func TestWithDeadLetterRefusesTypedNil(t *testing.T) {
	var sink *memLetters
	tr := New(httpmock.NewMockTransport(), WithDeadLetter(sink))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("error %v, want ErrInvalidOption", err)
	}
}

// A buffered body larger than MaxLetterBody (a replay limit set above it)
// is left out of the letter, which says why, like one read through
// GetBody: a letter never holds more than MaxLetterBody.
func TestDeadLetterOmitsBufferedBodyAboveMax(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithReplayLimit(MaxLetterBody+10), WithBudget(0, time.Hour))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	req, _ := newPost(t, context.Background(), strings.Repeat("b", MaxLetterBody+1), false)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	l := sink.only(t)
	if l.Body != nil || !strings.Contains(l.BodyOmitted, "MaxLetterBody") || l.BodyBytes != MaxLetterBody+1 {
		t.Errorf("letter holds %d bytes, omitted %q, body_bytes %d: want the body left out and its size", len(l.Body), l.BodyOmitted, l.BodyBytes)
	}
}

// A request sent with a Host of its own (to an address, or through a
// gateway) keeps it in its letter, and only then.
func TestDeadLetterKeepsAHostOverride(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithBudget(0, time.Hour))
	h.mock.RegisterNoResponder(seq(503))
	for _, host := range []string{"portal.funder.test", ""} {
		req, _ := http.NewRequest(http.MethodPost, "https://10.0.0.7/v1/applications", strings.NewReader(`{"a":1}`))
		req.Host = host
		resp, err := h.tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	ls := sink.all()
	if len(ls) != 2 || ls[0].Host != "portal.funder.test" || ls[1].Host != "" {
		t.Errorf("letters' hosts %q, want the override and then none", []string{ls[0].Host, ls[1].Host})
	}
}
