package grantretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// markerClassifier says terminal for a body holding "<Client/>", transient
// for "<Server/>", and nothing otherwise; it keeps the length of every body
// it was shown and the status it was shown with.
type markerClassifier struct {
	mu       sync.Mutex
	lengths  []int
	statuses []int
}

func (m *markerClassifier) classify(resp *http.Response, body []byte) (Classification, bool) {
	m.mu.Lock()
	m.lengths = append(m.lengths, len(body))
	m.statuses = append(m.statuses, resp.StatusCode)
	m.mu.Unlock()
	switch {
	case bytes.Contains(body, []byte("<Client/>")):
		return Classification{Retryable: false, Reason: "marker:Client"}, true
	case bytes.Contains(body, []byte("<Server/>")):
		return Classification{Retryable: true, Reason: "marker:Server"}, true
	}
	return Classification{}, false
}

func (m *markerClassifier) shown() ([]int, []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.lengths...), append([]int(nil), m.statuses...)
}

// A refusal hidden in a 500 is terminal by the classifier's word: one
// attempt, failed_terminal, the breaker untouched, and the caller gets the
// whole body.
func TestClassifierMakesA500Terminal(t *testing.T) {
	m := &markerClassifier{}
	h := newHarness(t, WithClassifier(m.classify), WithBreaker(1, time.Hour))
	const fault = "<Envelope><Client/>the application is missing form SF-424</Envelope>"
	h.mock.RegisterResponder(http.MethodGet, funderURL, httpmock.NewStringResponder(500, fault))
	h.mock.RegisterResponder(http.MethodGet, funderURL+"/next", httpmock.NewStringResponder(200, "ok"))

	resp, err := h.client().Get(funderURL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != fault {
		t.Fatalf("body %q, %v; want the whole fault", body, err)
	}
	o := mustOutcome(t, resp)
	if o.Disposition != FailedTerminal || o.Attempts != 1 || o.Reason != "terminal:500;marker:Client" {
		t.Errorf("outcome %s after %d attempts, reason %q; want failed_terminal after 1, terminal:500;marker:Client", o.Disposition, o.Attempts, o.Reason)
	}
	if got := h.attemptLines()[0].ContextMap()[FieldReason]; got != "terminal:500;marker:Client" {
		t.Errorf("attempt line reason %v", got)
	}
	// WithBreaker(1, ...) would have opened on a transient 500.
	resp, err = h.client().Get(funderURL + "/next")
	if err != nil {
		t.Fatalf("the next call: %v, want it sent at once", err)
	}
	resp.Body.Close()
}

// The classifier's transient verdict is retried as a transient status is.
func TestClassifierTransientVerdictIsRetried(t *testing.T) {
	m := &markerClassifier{}
	h := newHarness(t, WithClassifier(m.classify))
	responses := []string{"<Server/>", "<Server/>", "done"}
	var n int
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(*http.Request) (*http.Response, error) {
		n++
		status := 500
		if n == 3 {
			status = 200
		}
		return httpmock.NewStringResponse(status, responses[n-1]), nil
	})
	resp, err := h.client().Get(funderURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o := mustOutcome(t, resp)
	if o.Disposition != Succeeded || o.Attempts != 3 {
		t.Errorf("%s after %d attempts, want succeeded after 3", o.Disposition, o.Attempts)
	}
	if got := h.attemptLines()[0].ContextMap()[FieldReason]; got != "transient:500;marker:Server" {
		t.Errorf("first attempt's reason %v", got)
	}
	if _, statuses := m.shown(); len(statuses) != 2 {
		t.Errorf("classifier shown statuses %v, want the two 500s only (never a 2xx)", statuses)
	}
}

// What the classifier is shown, and when: nothing for 1xx-3xx, at most
// MaxClassifyPeek bytes of a longer body, and a verdict it declines falls
// back to the status sets. The caller gets every byte in every case.
func TestClassifierPeekRule(t *testing.T) {
	long := strings.Repeat("x", MaxClassifyPeek+1000) + "<Client/>"
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		wantShown  []int
		wantDisp   Disposition
		wantReason string
	}{
		{"2xx is never read", 200, "<Client/>", nil, Succeeded, "ok:200"},
		{"3xx is never read", 304, "", nil, Succeeded, "ok:304"},
		{"declined falls back", 404, "not found", []int{9}, FailedTerminal, "terminal:404"},
		{"declined 503 stays transient", 503, "busy", []int{4, 4, 4, 4, 4}, DeadLetter, "transient:503"},
		{"a long body is cut at the peek", 500, long, []int{MaxClassifyPeek, MaxClassifyPeek, MaxClassifyPeek, MaxClassifyPeek, MaxClassifyPeek}, DeadLetter, "transient:500"},
		{"an empty body", 400, "", []int{0}, FailedTerminal, "terminal:400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &markerClassifier{}
			h := newHarness(t, WithClassifier(m.classify))
			h.mock.RegisterResponder(http.MethodGet, funderURL, httpmock.NewStringResponder(tc.status, tc.body))
			resp, err := h.tr.RoundTrip(newGet(t))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != tc.body {
				t.Errorf("caller got %d bytes, %v; want all %d", len(body), err, len(tc.body))
			}
			o := mustOutcome(t, resp)
			if o.Disposition != tc.wantDisp || o.Reason != tc.wantReason {
				t.Errorf("%s, %q; want %s, %q", o.Disposition, o.Reason, tc.wantDisp, tc.wantReason)
			}
			if lengths, _ := m.shown(); !equalInts(lengths, tc.wantShown) {
				t.Errorf("classifier shown %v bytes, want %v", lengths, tc.wantShown)
			}
		})
	}
}

func newGet(t *testing.T) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, funderURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// failingBody gives its bytes, then fails.
type failingBody struct {
	r   io.Reader
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, b.err
	}
	return n, err
}

func (b *failingBody) Close() error { return nil }

// A body that fails while it is peeked at gives the classifier what arrived,
// and the caller those bytes and then the same error.
func TestClassifierBodyFailingMidPeek(t *testing.T) {
	m := &markerClassifier{}
	cut := errors.New("connection reset mid-body")
	h := newHarness(t, WithClassifier(m.classify))
	h.mock.RegisterResponder(http.MethodGet, funderURL, func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 422, Header: http.Header{}, Request: r,
			Body: &failingBody{r: strings.NewReader("<Client/> partial"), err: cut}}, nil
	})
	resp, err := h.tr.RoundTrip(newGet(t))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if string(body) != "<Client/> partial" || !errors.Is(err, cut) {
		t.Errorf("caller got %q, %v; want the bytes that arrived, then the cut", body, err)
	}
	if o := mustOutcome(t, resp); o.Reason != "terminal:422;marker:Client" {
		t.Errorf("reason %q", o.Reason)
	}
}

func TestWithClassifierNilIsInvalid(t *testing.T) {
	tr := New(httpmock.NewMockTransport(), WithClassifier(nil))
	_, err := tr.RoundTrip(newGet(t))
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("RoundTrip = %v, want ErrInvalidOption", err)
	}
}

// Issue 11's SOAP target, over a real loopback connection: a validation
// fault (soap:Client in a 500) through ClassifySOAPFault is one attempt,
// failed_terminal, with the breaker closed and the next good submission
// sent at once; a soap:Server fault is retried as transient.
func TestSOAPFaultsThroughTheTransport(t *testing.T) {
	var mu sync.Mutex
	var answers []string // what the funder answers next, "" for a receipt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		next := ""
		if len(answers) > 0 {
			next, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		if next == "" {
			io.WriteString(w, "<receipt>GRANT00012345</receipt>")
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, next)
	}))
	defer srv.Close()
	clock := newFakeClock()
	tr := New(nil, WithClock(clock), WithClassifier(ClassifySOAPFault), WithBreaker(1, time.Hour))
	defer tr.CloseIdleConnections()
	submit := func() Outcome {
		t.Helper()
		ctx := WithSubmissionID(context.Background(), "GRANT-42")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort", strings.NewReader("<submit/>"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || len(body) == 0 {
			t.Fatalf("body %q, %v", body, err)
		}
		return mustOutcome(t, resp)
	}

	mu.Lock()
	answers = []string{grantsGovClientFault}
	mu.Unlock()
	if o := submit(); o.Attempts != 1 || o.Disposition != FailedTerminal || o.Reason != "terminal:500;soap:Client" {
		t.Errorf("validation fault: %s after %d attempts, %q; want failed_terminal after 1, terminal:500;soap:Client", o.Disposition, o.Attempts, o.Reason)
	}
	// WithBreaker(1, ...): one transient failure would have opened it.
	if o := submit(); o.Disposition != Succeeded || o.Attempts != 1 || len(clock.waits()) != 0 {
		t.Errorf("the next good submission: %s after %d attempts, waits %v; want sent at once", o.Disposition, o.Attempts, clock.waits())
	}

	tr = New(nil, WithClock(clock), WithClassifier(ClassifySOAPFault))
	defer tr.CloseIdleConnections()
	mu.Lock()
	answers = []string{grantsGovServerFault, grantsGovServerFault}
	mu.Unlock()
	if o := submit(); o.Attempts != 3 || o.Disposition != Succeeded {
		t.Errorf("server faults: %s after %d attempts, want succeeded after 3 (two retried)", o.Disposition, o.Attempts)
	}
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeRecorder) Close() error { b.closed.Store(true); return nil }

// R1: a panicking ClassifyFunc leaves the attempt's response body open.
func TestClassifierPanicClosesTheResponseBody(t *testing.T) {
	body := &closeRecorder{Reader: strings.NewReader("<fault/>")}
	inner := rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 500, Body: body, Header: http.Header{}, Request: r}, nil
	})
	tr := New(inner, WithClock(newFakeClock()), WithClassifier(func(*http.Response, []byte) (Classification, bool) {
		panic("classifier bug")
	}))
	func() {
		defer func() {
			if v := recover(); v == nil {
				t.Fatal("no panic")
			}
		}()
		tr.RoundTrip(postReq(t, "https://funder.test/x"))
	}()
	if !body.closed.Load() {
		t.Fatal("the response body the inner transport returned was never closed after the classifier panicked")
	}
}
