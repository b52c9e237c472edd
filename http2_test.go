package grantretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-cleanhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// These tests run the default policy over real loopback HTTP/2
// connections, through the inner transport grantretry uses by default
// (cleanhttp's pooled transport, which attempts HTTP/2 over TLS), set up to
// trust the test certificate, or to speak cleartext HTTP/2 with prior
// knowledge (http.Protocols).

// statusFunder answers, in order, with these statuses, repeating the
// last, and record the protocol and Idempotency-Key of every request.
type statusFunder struct {
	statuses []int

	mu     sync.Mutex
	protos []string
	keys   []string
}

func (f *statusFunder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.protos = append(f.protos, r.Proto)
	f.keys = append(f.keys, r.Header.Get(HeaderIdempotencyKey))
	status := f.statuses[min(len(f.protos), len(f.statuses))-1]
	f.mu.Unlock()
	w.WriteHeader(status)
}

func (f *statusFunder) seen() (protos, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.protos...), append([]string(nil), f.keys...)
}

// observedTransport is New over inner with a fake clock and an observed
// audit log.
func observedTransport(inner http.RoundTripper, opts ...Option) (*Transport, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	all := append([]Option{WithClock(newFakeClock()), WithLogger(zap.New(core))}, opts...)
	return New(inner, all...), logs
}

// postSubmission is a POST of a submission, with a body or without one.
func postSubmission(t *testing.T, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	ctx := WithSubmissionID(context.Background(), "GRANT-42")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// checkTransientRetry checks a call that a funder answered 503 and then
// 201 over HTTP/2: retried once, with the same key, and not ambiguous.
func checkTransientRetry(t *testing.T, f *statusFunder, resp *http.Response, logs *observer.ObservedLogs) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Proto != "HTTP/2.0" {
		t.Fatalf("got %d over %s, want 201 over HTTP/2.0", resp.StatusCode, resp.Proto)
	}
	o := mustOutcome(t, resp)
	if o.Attempts != 2 || o.Disposition != Succeeded || o.Ambiguous {
		t.Errorf("outcome %+v: want 2 attempts, succeeded, not ambiguous", o)
	}
	protos, keys := f.seen()
	if len(protos) != 2 || protos[0] != "HTTP/2.0" || protos[1] != "HTTP/2.0" {
		t.Errorf("the funder saw %v, want two HTTP/2.0 requests", protos)
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] || keys[0] != o.IdempotencyKey {
		t.Errorf("keys on the wire %q, outcome's %q: want the outcome's on both", keys, o.IdempotencyKey)
	}
	var reasons []string
	for _, l := range logs.FilterMessage(MsgAttempt).AllUntimed() {
		reasons = append(reasons, l.ContextMap()[FieldReason].(string))
	}
	if strings.Join(reasons, " ") != "transient:503 ok:201" {
		t.Errorf("attempt lines' reasons %q, want transient:503 then ok:201", reasons)
	}
}

func TestHTTP2OverTLSRetriesATransientStatus(t *testing.T) {
	f := &statusFunder{statuses: []int{http.StatusServiceUnavailable, http.StatusCreated}}
	srv := httptest.NewUnstartedServer(f)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	inner := cleanhttp.DefaultPooledTransport()
	inner.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	defer inner.CloseIdleConnections()
	tr, logs := observedTransport(inner)

	resp, err := tr.RoundTrip(postSubmission(t, srv.URL+"/v1/applications", `{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	checkTransientRetry(t, f, resp, logs)
}

func TestHTTP2UnencryptedRetriesATransientStatus(t *testing.T) {
	f := &statusFunder{statuses: []int{http.StatusServiceUnavailable, http.StatusCreated}}
	srv := httptest.NewUnstartedServer(f)
	var sp http.Protocols
	sp.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &sp
	srv.Start()
	defer srv.Close()
	var cp http.Protocols
	cp.SetUnencryptedHTTP2(true)
	inner := cleanhttp.DefaultPooledTransport()
	inner.Protocols = &cp
	defer inner.CloseIdleConnections()
	tr, logs := observedTransport(inner)

	resp, err := tr.RoundTrip(postSubmission(t, srv.URL+"/v1/applications", `{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	checkTransientRetry(t, f, resp, logs)
}

// h2Setup is an h2Funder and an inner transport that reaches it: over TLS,
// or over cleartext HTTP/2 with prior knowledge.
type h2Setup struct {
	f     *h2Funder
	inner *http.Transport
	url   string
}

func newH2Setup(t *testing.T, overTLS bool, script ...h2Reply) h2Setup {
	t.Helper()
	inner := cleanhttp.DefaultPooledTransport()
	t.Cleanup(inner.CloseIdleConnections)
	if overTLS {
		f, cfg := newH2TLSFunder(t, script...)
		inner.TLSClientConfig = cfg
		return h2Setup{f: f, inner: inner, url: f.url("https")}
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	inner.Protocols = &p
	f := newH2CFunder(t, script...)
	return h2Setup{f: f, inner: inner, url: f.url("http")}
}

// h2Cases are the connections and requests each refusal is tried with: a
// keyed POST with a body (the inner transport has no GetBody, so net/http
// cannot resend it) and one without (net/http would resend it itself: the
// resend guard stops it), over TLS and over cleartext HTTP/2.
var h2Cases = []struct {
	name    string
	overTLS bool
	body    string
}{
	{"TLS, body", true, `{"amount":1}`},
	{"TLS, no body", true, ""},
	{"cleartext, body", false, `{"amount":1}`},
	{"cleartext, no body", false, ""},
}

// attemptReasons returns the reasons of the observed attempt lines.
func attemptReasons(logs *observer.ObservedLogs) []string {
	var reasons []string
	for _, l := range logs.FilterMessage(MsgAttempt).AllUntimed() {
		reasons = append(reasons, l.ContextMap()[FieldReason].(string))
	}
	return reasons
}

// A stream the funder refused before processing it (REFUSED_STREAM), or
// one above the last stream id of its GOAWAY, reached the funder but was
// not processed. The Transport sends it again, keyed, and the call
// succeeds: the funder received one stream per attempt and processed one
// request. net/http reports the refusal to the Transport only in an
// error's text, the same way it reports a stream the funder reset with
// PROTOCOL_ERROR, which may have been processed: so the attempt is taken
// as a drop after the request was written: the call stays ambiguous, and
// a reconciler is asked before the resend.
func TestHTTP2RefusedStreamIsSentAgainAndProcessedOnce(t *testing.T) {
	for _, refusal := range []struct {
		name string
		step h2Step
	}{
		{"REFUSED_STREAM", h2Refuse},
		{"GOAWAY below the stream", h2GoawayBefore},
	} {
		for _, tc := range h2Cases {
			for _, reconciled := range []bool{false, true} {
				name := refusal.name + ", " + tc.name
				if reconciled {
					name += ", reconciler"
				}
				t.Run(name, func(t *testing.T) {
					s := newH2Setup(t, tc.overTLS, h2Reply{step: refusal.step}, h2Reply{step: h2Answer, status: http.StatusCreated})
					var asked atomic.Int32
					var opts []Option
					if reconciled {
						opts = append(opts, WithReconciler(func(context.Context, ReconcileQuery) (*http.Response, error) {
							asked.Add(1)
							return nil, nil // not recorded
						}))
					}
					tr, logs := observedTransport(s.inner, opts...)
					resp, err := tr.RoundTrip(postSubmission(t, s.url, tc.body))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					o := mustOutcome(t, resp)
					streams, processed, _ := s.f.counts()
					if resp.StatusCode != http.StatusCreated || resp.Proto != "HTTP/2.0" || o.Attempts != 2 {
						t.Fatalf("%d over %s after %d attempts, want 201 over HTTP/2.0 after 2", resp.StatusCode, resp.Proto, o.Attempts)
					}
					if streams != o.Attempts || processed != 1 {
						t.Errorf("the funder received %d streams and processed %d requests, want one stream per attempt (%d) and 1 processed", streams, processed, o.Attempts)
					}
					if r := attemptReasons(logs); len(r) != 2 || r[1] != "ok:201" {
						t.Errorf("attempt lines' reasons %q, want two, the last ok:201", r)
					}
					switch {
					case reconciled && (o.Reconciles != 1 || asked.Load() != 1 || o.Ambiguous):
						t.Errorf("%d reconciles, asked %d times, ambiguous %v: want 1, 1 and false after its answer", o.Reconciles, asked.Load(), o.Ambiguous)
					case !reconciled && !o.Ambiguous:
						t.Errorf("not ambiguous: a Transport that tells a refusal from a PROTOCOL_ERROR reset must say how, here and in docs/exactly-once.md")
					}
				})
			}
		}
	}
}

// A GOAWAY whose last stream id is the request's own says the funder may
// have processed it: a connection closed after it is ambiguous, as any
// drop after the request was written, and the keyed request is sent again.
func TestHTTP2GoawayAfterTheStreamIsAmbiguous(t *testing.T) {
	for _, tc := range h2Cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newH2Setup(t, tc.overTLS, h2Reply{step: h2GoawayAfter}, h2Reply{step: h2Answer, status: http.StatusCreated})
			tr, logs := observedTransport(s.inner)
			resp, err := tr.RoundTrip(postSubmission(t, s.url, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			o := mustOutcome(t, resp)
			streams, processed, _ := s.f.counts()
			if resp.StatusCode != http.StatusCreated || o.Attempts != 2 || !o.Ambiguous {
				t.Errorf("%d after %d attempts, ambiguous %v: want 201 after 2, ambiguous", resp.StatusCode, o.Attempts, o.Ambiguous)
			}
			if streams != 2 || processed != 2 {
				t.Errorf("the funder received %d streams and processed %d, want 2 and 2: the key is what makes the second harmless", streams, processed)
			}
			if r := attemptReasons(logs); len(r) != 2 || r[0] != "transport:network" {
				t.Errorf("attempt lines' reasons %q, want two, the first transport:network", r)
			}
		})
	}
}

// A stream reset with PROTOCOL_ERROR says nothing of whether the funder
// processed it. net/http resends it on its own when it can, as it resends
// a refused one: a keyed POST it cannot resend is ambiguous and sent again
// by the Transport; an unkeyed GET it resends within the attempt, and the
// funder processes it twice for one attempt.
func TestHTTP2ProtocolErrorResetIsAmbiguous(t *testing.T) {
	for _, overTLS := range []bool{true, false} {
		s := newH2Setup(t, overTLS, h2Reply{step: h2ProtocolError}, h2Reply{step: h2Answer, status: http.StatusCreated})
		tr, _ := observedTransport(s.inner)
		resp, err := tr.RoundTrip(postSubmission(t, s.url, `{"amount":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o := mustOutcome(t, resp)
		if _, processed, _ := s.f.counts(); o.Attempts != 2 || !o.Ambiguous || processed != 2 {
			t.Errorf("TLS %v, POST: %d attempts, ambiguous %v, %d processed: want 2, true, 2", overTLS, o.Attempts, o.Ambiguous, processed)
		}

		s = newH2Setup(t, overTLS, h2Reply{step: h2ProtocolError}, h2Reply{step: h2Answer, status: http.StatusOK})
		tr, _ = observedTransport(s.inner)
		req, _ := http.NewRequest(http.MethodGet, s.url, nil)
		resp, err = tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o = mustOutcome(t, resp)
		if _, processed, _ := s.f.counts(); o.Attempts != 1 || processed != 2 {
			t.Errorf("TLS %v, GET: %d attempts, %d processed: want 1 and 2 (net/http's resend)", overTLS, o.Attempts, processed)
		}
	}
}

// net/http resends a refused GET within the attempt, on its own: the
// Transport sees one attempt that succeeded, writes one attempt line, and
// the funder processed the request once.
func TestHTTP2NetHTTPResendsARefusedGETWithinTheAttempt(t *testing.T) {
	for _, refusal := range []struct {
		name string
		step h2Step
	}{
		{"REFUSED_STREAM", h2Refuse},
		{"GOAWAY below the stream", h2GoawayBefore},
	} {
		for _, overTLS := range []bool{true, false} {
			s := newH2Setup(t, overTLS, h2Reply{step: refusal.step}, h2Reply{step: h2Answer, status: http.StatusOK})
			tr, logs := observedTransport(s.inner)
			req, _ := http.NewRequest(http.MethodGet, s.url, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("%s, TLS %v: %v", refusal.name, overTLS, err)
			}
			resp.Body.Close()
			o := mustOutcome(t, resp)
			streams, processed, _ := s.f.counts()
			if o.Attempts != 1 || o.Ambiguous || len(logs.FilterMessage(MsgAttempt).All()) != 1 {
				t.Errorf("%s, TLS %v: %d attempts, ambiguous %v, %d attempt lines: want 1, false, 1", refusal.name, overTLS, o.Attempts, o.Ambiguous, len(logs.FilterMessage(MsgAttempt).All()))
			}
			if streams != 2 || processed != 1 {
				t.Errorf("%s, TLS %v: the funder received %d streams and processed %d, want 2 and 1", refusal.name, overTLS, streams, processed)
			}
		}
	}
}
