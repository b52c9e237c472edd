package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	tnoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// textTP records every text a span is given: its status, attributes and
// events.
type textTP struct {
	embedded.TracerProvider
	mu    sync.Mutex
	texts []string
}

type textTracer struct {
	embedded.Tracer
	p *textTP
}

type textSpan struct {
	tnoop.Span
	p *textTP
}

func (p *textTP) Tracer(string, ...trace.TracerOption) trace.Tracer { return &textTracer{p: p} }

func (t *textTracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &textSpan{p: t.p}
	return trace.ContextWithSpan(ctx, s), s
}

func (p *textTP) add(texts ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.texts = append(p.texts, texts...)
}

func (p *textTP) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.texts...)
}

func (s *textSpan) SetStatus(_ codes.Code, desc string) { s.p.add(desc) }
func (s *textSpan) SetAttributes(kv ...attribute.KeyValue) {
	for _, a := range kv {
		s.p.add(a.Value.String())
	}
}
func (s *textSpan) AddEvent(name string, o ...trace.EventOption) {
	s.p.add(name)
	cfg := trace.NewEventConfig(o...)
	for _, a := range cfg.Attributes() {
		s.p.add(a.Value.String())
	}
}
func (s *textSpan) RecordError(err error, _ ...trace.EventOption) { s.p.add(err.Error()) }

// quotingSink is a dead-letter sink that fails with an error quoting the
// letter it was given.
type quotingSink struct{}

func (quotingSink) PutDeadLetter(_ context.Context, l *Letter) error {
	return fmt.Errorf("letter store refused %s %v with body %s", l.URL, l.Header, l.Body)
}

// requestLeaks returns what of r's header values (4 bytes or more) and of
// body (runs of 8 bytes or more) text holds.
func requestLeaks(text string, h http.Header, body string) []string {
	var leaks []string
	for _, vs := range h {
		for _, v := range vs {
			if len(v) >= 4 && strings.Contains(text, v) {
				leaks = append(leaks, v)
			}
		}
	}
	for i := 0; i+8 <= len(body); i++ {
		if strings.Contains(text, body[i:i+8]) {
			leaks = append(leaks, body[i:i+8])
		}
	}
	return leaks
}

// An inner layer whose error quotes the request it was given (its
// headers, an applicant's SSN among them, and its JSON body, as it is and
// quoted), a dead-letter sink whose error quotes the letter, and a
// reconciler whose error quotes its request: no text grantretry returns or
// records holds a request header value of 4 bytes or more, or a run of 8
// bytes or more of the body. The texts are those of the error RoundTrip
// returns, and of http.Client's around it, of Outcome.RecordErr, of every
// audit line, of the letter's error and of the call's span.
func TestErrorTextCarriesNoRequestHeaderValueOrBodyRun(t *testing.T) {
	const body = `{"applicant":"Riverside Arts","ssn":"123-45-6789","pin":"4410872","amount":1200}`
	for _, tc := range []struct {
		name    string
		getBody bool
		limit   int64 // WithReplayLimit; 0 for the default
	}{
		{"buffered body", false, 0},
		{"body through GetBody", true, 0},
		{"body sent once as a stream", false, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				return nil, fmt.Errorf("gateway refused %s %s: headers %v, body %s (as quoted: %q)", r.Method, r.URL, r.Header, b, b)
			})
			tp := &textTP{}
			core, logs := observer.New(zapcore.DebugLevel)
			limit := tc.limit
			if limit == 0 {
				limit = DefaultReplayLimit
			}
			tr := New(inner, WithClock(newFakeClock()), WithLogger(zap.New(core)), WithBudget(2, time.Hour),
				WithDeadLetter(quotingSink{}), WithTracerProvider(tp), WithReplayLimit(limit),
				WithReconciler(func(_ context.Context, q ReconcileQuery) (*http.Response, error) {
					var b []byte
					if q.Request.Body != nil && q.Request.Body != http.NoBody {
						b, _ = io.ReadAll(q.Request.Body)
					}
					return nil, fmt.Errorf("status lookup for %v %s failed", q.Request.Header, b)
				}))
			mk := func() *http.Request {
				req, _ := newPost(t, WithSubmissionID(context.Background(), "S-77"), body, tc.getBody)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Applicant-Ssn", "123-45-6789")
				req.Header.Set("X-Program", "arts-2026")
				return req
			}
			req := mk()
			_, err := tr.RoundTrip(req)
			e := mustError(t, err)
			if e.RecordErr == nil {
				t.Fatal("want the sink's failure in RecordErr")
			}
			_, cerr := (&http.Client{Transport: tr}).Do(mk())
			if cerr == nil {
				t.Fatal("want an error through http.Client")
			}
			texts := map[string]string{"Error()": err.Error(), "http.Client's error": cerr.Error(), "RecordErr": e.RecordErr.Error()}
			for i, l := range logs.AllUntimed() {
				for k, v := range l.ContextMap() {
					texts[fmt.Sprintf("line %d (%s) %s", i, l.Message, k)] = fmt.Sprint(v)
				}
			}
			for i, s := range tp.all() {
				texts[fmt.Sprintf("span text %d", i)] = s
			}
			if want := "gateway refused"; tc.limit != 0 {
				// A streamed body is not held: nothing of the text can be
				// checked against it, and it is withheld.
				if !strings.Contains(err.Error(), "cannot be checked") || !strings.Contains(e.RecordErr.Error(), "not kept") {
					t.Errorf("Error() = %q, RecordErr %q: want the cause withheld, and the letter's failure named", err, e.RecordErr)
				}
			} else if !strings.Contains(err.Error(), want) {
				t.Errorf("Error() = %q: the cause is gone, not scrubbed", err)
			}
			for where, text := range texts {
				if leaks := requestLeaks(text, req.Header, body); leaks != nil {
					t.Errorf("%s holds %q:\n%s", where, leaks, text)
				}
			}
		})
	}
}

// A failed letter's error is scrubbed as every other text is.
func TestLetterLastErrorCarriesNoRequestHeaderValueOrBodyRun(t *testing.T) {
	const body = `{"applicant":"Riverside Arts","ssn":"123-45-6789"}`
	sink := &memLetters{}
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		return nil, fmt.Errorf("refused %v %s", r.Header, b)
	}), WithClock(newFakeClock()), WithBudget(1, time.Hour), WithDeadLetter(sink))
	req, _ := newPost(t, context.Background(), body, false)
	req.Header.Set("X-Applicant-Ssn", "123-45-6789")
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrDeadLetter) {
		t.Fatalf("RoundTrip = %v, want a dead letter", err)
	}
	l := sink.only(t)
	if l.LastError == "" || requestLeaks(l.LastError, req.Header, body) != nil {
		t.Errorf("last_error %q holds the request", l.LastError)
	}
}

// A body that holds the marker itself ("REDACTED", as in a record scrubbed
// before) could make the scrubbed text a run of the body again: the
// result is checked, and such a text is withheld whole.
func TestScrubbedTextIsCheckedAgainstTheBodyAgain(t *testing.T) {
	for _, tc := range []struct {
		name, body, msg string
	}{
		{"body holds the marker", `{"ssn":"REDACTED","name":"Jane Applicant"}`, `refused {"ssn":"REDACTED","name":"Jane Applicant"} at the gateway`},
		{"body holds neither", `{"name":"Jane Applicant"}`, `refused {"name":"Jane Applicant"} at the gateway`},
	} {
		p := &payload{orig: io.NopCloser(strings.NewReader(tc.body)), buf: []byte(tc.body)}
		got := p.scrubRuns(newErrorText(tc.msg))
		if leaks := requestLeaks(got, nil, tc.body); leaks != nil {
			t.Errorf("%s: %q holds %q", tc.name, got, leaks)
		}
		if !strings.Contains(tc.body, redacted) && !strings.Contains(got, "at the gateway") {
			t.Errorf("%s: %q lost the text that is not the body's", tc.name, got)
		}
	}
}

// BenchmarkScrubErrorText is what scrubbing one error text costs on the
// error path (it never runs on the success path): a 300-byte error that
// quotes nothing of the request, and one that quotes it, against a body of
// 1 KiB and of 1 MiB; an error that quotes a whole body of 8 MiB of
// text that repeats nothing (randomText); and a whole call of 3 attempts whose inner layer quotes its 8 MiB body (sent
// through GetBody) in every error, with audit lines and a dead letter,
// reporting how many times GetBody was called per call.
func BenchmarkScrubErrorText(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20, 8 << 20} {
		body := []byte(strings.Repeat(`{"applicant":"Riverside Arts","ssn":"123-45-6789"},`, size/51+1)[:size])
		if size == 8<<20 {
			body = []byte(randomText(size))
		}
		req, _ := http.NewRequest(http.MethodPost, funderURL, nil)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Applicant-Ssn", "123-45-6789")
		c := &call{t: New(nil), req: req, p: payload{orig: http.NoBody, buf: body}}
		c.p.orig = io.NopCloser(nil)
		cases := []struct {
			name string
			err  error
		}{
			{"quotes nothing", errors.New(strings.Repeat("dial tcp 192.0.2.7:443: connect: connection refused; ", 6))},
			{"quotes the request", fmt.Errorf("gateway refused %v with %s", req.Header, body[:200])},
		}
		if size == 8<<20 {
			cases = []struct {
				name string
				err  error
			}{{"quotes the whole body", fmt.Errorf("validation failed for request body %s", body)}}
		}
		for _, q := range cases {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, q.name), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					c.auditShared = nil // a fresh call's first scrub of the text
					_ = c.scrub(q.err)
				}
			})
		}
	}
	b.Run("call/8MiB body quoted by 3 attempts", func(b *testing.B) {
		body := randomText(8 << 20)
		logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
		tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			bb, _ := io.ReadAll(r.Body)
			r.Body.Close()
			return nil, fmt.Errorf("connection reset by peer after request body %s", bb)
		}), WithClock(newFakeClock()), WithBudget(2, time.Hour), WithLogger(logger), WithDeadLetter(&memLetters{}))
		b.ReportAllocs()
		getBodies := 0
		for i := 0; i < b.N; i++ {
			req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader(body))
			gb := req.GetBody
			req.GetBody = func() (io.ReadCloser, error) { getBodies++; return gb() }
			if _, err := tr.RoundTrip(req); !errors.Is(err, ErrDeadLetter) {
				b.Fatalf("error %.200v, want a dead letter", err)
			}
		}
		b.ReportMetric(float64(getBodies)/float64(b.N), "GetBody/op")
	})
}

// randomText is n bytes of letters, digits, spaces and punctuation in an
// order that repeats nothing, the same every time.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz ,.0123456789"
	r := rand.New(rand.NewSource(1))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return string(b)
}
