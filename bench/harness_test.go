package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/grantretry/grantretry"
	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// okBody is what the funder answers: small, like a submission receipt.
var okBody = []byte(`{"status":"received","tracking":"GRANT-2026-0042-R1"}`)

// postBody is a small JSON submission, the body of every POST benchmark.
var postBody = []byte(`{"opportunity":"HHS-2026-ACF-0042","applicant":"Example Foundation","amount":250000,"period_months":24}`)

// submissionID names the submission of the POST benchmarks. It is set on
// the context once, outside the timed loop: making the context is the
// caller's cost, not the middleware's.
const submissionID = "GRANT-2026-0042"

// cannedTransport is the in-memory inner transport: it reads and closes the
// request body, as a real transport does, and answers every request with a
// 200 and a fresh small body. A request whose path is failPath gets a 503
// instead.
type cannedTransport struct{}

const failPath = "/fail"

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	code := http.StatusOK
	if r.URL.Path == failPath {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{
		StatusCode:    code,
		Status:        http.StatusText(code),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(okBody)),
		ContentLength: int64(len(okBody)),
		Request:       r,
	}, nil
}

// newLoopbackServer starts a funder on 127.0.0.1 that reads the request
// body and answers 200 with okBody.
func newLoopbackServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(okBody)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// newLoopbackTransport is the inner transport over loopback: a pooled
// net/http Transport of its own, so no variant inherits another's
// connections.
func newLoopbackTransport(tb testing.TB) *http.Transport {
	tr := &http.Transport{
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return tr
}

// A variant is one RoundTripper under test, built around an inner one.
type variant struct {
	name string
	wrap func(inner http.RoundTripper) http.RoundTripper
}

// variants are the RoundTrippers the success path compares, each in its
// default retry configuration, around the same inner transport. "bare" is
// the inner transport alone: the others' added cost is measured against it.
var variants = []variant{
	{"bare", func(inner http.RoundTripper) http.RoundTripper { return inner }},
	{"grantretry", func(inner http.RoundTripper) http.RoundTripper {
		return grantretry.New(inner) // audit log off: the default nop logger
	}},
	{"grantretry-audit", func(inner http.RoundTripper) http.RoundTripper {
		return grantretry.New(inner, grantretry.WithLogger(jsonDiscardLogger()))
	}},
	{"retryablehttp", newRetryableHTTP},
	{"failsafe", newFailsafe},
}

// jsonDiscardLogger writes production JSON audit lines to io.Discard: the
// full cost of encoding them, none of the cost of a disk.
func jsonDiscardLogger() *zap.Logger {
	return zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(io.Discard),
		zap.InfoLevel,
	))
}

// newRetryableHTTP is go-retryablehttp's RoundTripper in its default retry
// policy (RetryMax 4), logging nothing.
func newRetryableHTTP(inner http.RoundTripper) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.HTTPClient.Transport = inner
	c.Logger = nil
	return &retryablehttp.RoundTripper{Client: c}
}

// newFailsafe is failsafe-go's failsafehttp RoundTripper with a retry policy
// and a circuit breaker set like grantretry's defaults: 4 retries with
// backoff from 500ms to 30s, and a breaker that opens on the 5th
// consecutive transient failure for 60s. The retry policy wraps the
// breaker, so the breaker sees every attempt, as grantretry's does.
func newFailsafe(inner http.RoundTripper) http.RoundTripper {
	retry := failsafehttp.NewRetryPolicyBuilder().
		WithBackoff(500*time.Millisecond, 30*time.Second).
		WithMaxRetries(4).
		Build()
	breaker := circuitbreaker.NewBuilder[*http.Response]().
		HandleIf(func(resp *http.Response, err error) bool {
			return err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		}).
		WithFailureThreshold(5).
		WithDelay(60 * time.Second).
		Build()
	return failsafehttp.NewRoundTripper(inner, retry, breaker)
}

// newRequest builds one call's request. POST carries postBody through a
// *bytes.Reader, so http.NewRequest sets GetBody, and the submission id
// on its context: the way a grant pipeline sends an application.
func newRequest(ctx context.Context, method, url string) (*http.Request, error) {
	if method == http.MethodPost {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(postBody))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return req, nil
	}
	return http.NewRequestWithContext(ctx, method, url, nil)
}

// contextFor is the context a call of the method is made with.
func contextFor(method string) context.Context {
	if method == http.MethodPost {
		return grantretry.WithSubmissionID(context.Background(), submissionID)
	}
	return context.Background()
}

// do makes one call through c and reads and closes the response, as a
// caller does. It returns the status.
func do(c *http.Client, ctx context.Context, method, url string) (int, error) {
	req, err := newRequest(ctx, method, url)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Sinks keep benchmark results alive. Only pointer-shaped results go into
// sink: boxing anything else in an interface allocates, and that allocation
// would be counted against the code under test; the typed sinks take the
// rest.
var (
	sink       any
	byteSink   []byte
	stringSink string
	sumSink    [sha256.Size]byte
)
