package stacks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/go-resty/resty/v2"
	"github.com/grantretry/grantretry"
	"github.com/hashicorp/go-retryablehttp"
)

// newRetryableFunderClient keeps go-retryablehttp (an SDK may build one)
// but leaves the retrying to grantretry: CheckRetry never retries (with
// RetryMax 0 alone a 503 still makes it give up and drop the response),
// PassthroughErrorHandler hands grantretry's *Error back, and the
// Transport goes in without its CloseIdleConnections, which
// go-retryablehttp calls after every call that ends in an error. Close
// the pool with tr.CloseIdleConnections at shutdown.
func newRetryableFunderClient(tr *grantretry.Transport) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.RetryMax = 0
	c.CheckRetry = func(context.Context, *http.Response, error) (bool, error) { return false, nil }
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	c.HTTPClient = &http.Client{Transport: struct{ http.RoundTripper }{tr}}
	c.Logger = nil
	return c
}

// newRestyFunderClient sends through grantretry and turns resty's own
// retries off: resty retries every error, its own timeout included, as a
// new call with a new correlation id.
func newRestyFunderClient(tr *grantretry.Transport) *resty.Client {
	return resty.New().SetTransport(tr).SetRetryCount(0)
}

// retryableDefaults is go-retryablehttp's default client over client,
// with its waits taken out: the test counts requests, it does not wait.
func retryableDefaults(client *http.Client) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient = client
	c.Logger = nil
	c.Backoff = func(min, max time.Duration, attempt int, resp *http.Response) time.Duration { return 0 }
	return c
}

func retryablePost(t *testing.T, c *retryablehttp.Client, url, id string) (*http.Response, error) {
	t.Helper()
	ctx := grantretry.WithSubmissionID(context.Background(), id)
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, url, []byte(`{"applicant":"Example Foundation"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// go-retryablehttp with its defaults outside grantretry, against a funder
// that always answers 503: one call sends 9 requests (5 from grantretry's
// first call, then one from each of the next four, whose retries the
// retry throttle refuses), and 25 with the throttle and breaker off (5
// times 5). It hands back no response, so no outcome, and an error that
// is no *grantretry.Error; its next call retries grantretry's
// circuit_open; and each call that ends in an error closes the pool's
// connections.
func TestRetryableHTTPOutsideMultiplies(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		f := newFunder(t, http.StatusServiceUnavailable)
		base, _ := dialCounting(t)
		tr := grantretry.New(base, grantretry.WithClock(&stepClock{now: testClock}))
		c := retryableDefaults(&http.Client{Transport: tr})

		resp, err := retryablePost(t, c, f.url(), "GRANT-42")
		var ge *grantretry.Error
		if resp != nil || err == nil || errors.As(err, &ge) {
			t.Fatalf("response %v, error %v: want no response and an error that is no *grantretry.Error", resp, err)
		}
		if n := len(f.requests()); n != 9 {
			t.Fatalf("one call sent %d requests, want 9", n)
		}
		// grantretry's breaker opened on the fifth failed call: the next
		// call is refused five times over, sending nothing.
		var tries int
		c.RequestLogHook = func(retryablehttp.Logger, *http.Request, int) { tries++ }
		_, err = retryablePost(t, c, f.url(), "GRANT-43")
		if !errors.Is(err, grantretry.ErrCircuitOpen) || tries != 5 || len(f.requests()) != 9 {
			t.Fatalf("second call: %v after %d tries, %d requests in all; want circuit_open after 5 and still 9", err, tries, len(f.requests()))
		}
	})
	t.Run("throttle and breaker off", func(t *testing.T) {
		f := newFunder(t, http.StatusServiceUnavailable)
		tr := grantretry.New(nil, grantretry.WithClock(&stepClock{now: testClock}),
			grantretry.WithoutRetryThrottle(), grantretry.WithoutBreaker())
		defer tr.CloseIdleConnections()
		if _, err := retryablePost(t, retryableDefaults(&http.Client{Transport: tr}), f.url(), "GRANT-42"); err == nil {
			t.Fatal("no error from a funder that always answers 503")
		}
		if n := len(f.requests()); n != 25 {
			t.Fatalf("one call sent %d requests, want 25", n)
		}
	})
	t.Run("the pool", func(t *testing.T) {
		f := newFunder(t, http.StatusServiceUnavailable, http.StatusCreated)
		base, dials := dialCounting(t)
		tr := grantretry.New(base, grantretry.WithClock(&stepClock{now: testClock}), grantretry.WithBudget(0, time.Minute))
		c := retryableDefaults(&http.Client{Transport: tr})
		c.RetryMax = 0
		if _, err := retryablePost(t, c, f.url(), "GRANT-42"); err == nil {
			t.Fatal("no error for a 503")
		}
		if _, err := retryablePost(t, c, f.url(), "GRANT-43"); err != nil {
			t.Fatal(err)
		}
		if d := dials.Load(); d != 2 {
			t.Fatalf("%d connections dialed for two requests, want 2: the first call's pool closed when it gave up", d)
		}
	})
}

// With its retries off as newRetryableFunderClient turns them, calls to
// an always-503 funder send grantretry's requests only (5, then one per
// call once the retry throttle refuses retries), and hand back the last
// 503 with its outcome, then grantretry's circuit_open *Error once five
// calls in a row have failed. All of it goes over one connection; with
// the Transport's CloseIdleConnections left visible, go-retryablehttp
// closes the pool on that error, and the breaker's probe dials again.
func TestRetryableHTTPWithRetriesOff(t *testing.T) {
	for _, c := range []struct {
		name  string
		hide  bool
		dials int64
	}{
		{"CloseIdleConnections hidden", true, 1},
		{"CloseIdleConnections visible", false, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFunder(t, http.StatusServiceUnavailable)
			base, dials := dialCounting(t)
			clk := &stepClock{now: testClock}
			tr := grantretry.New(base, grantretry.WithClock(clk))
			rc := newRetryableFunderClient(tr)
			if !c.hide {
				rc.HTTPClient = &http.Client{Transport: tr}
			}

			resp, err := retryablePost(t, rc, f.url(), "GRANT-1")
			if err != nil {
				t.Fatal(err)
			}
			out, ok := grantretry.OutcomeOf(resp)
			if !ok || resp.StatusCode != http.StatusServiceUnavailable || out.Disposition != grantretry.DeadLetter || out.Attempts != grantretry.DefaultMaxRetries+1 {
				t.Fatalf("status %d, outcome %+v (%v); want the last 503, dead_letter after %d attempts", resp.StatusCode, out, ok, grantretry.DefaultMaxRetries+1)
			}
			for i := 2; i <= int(grantretry.DefaultBreakerThreshold); i++ {
				resp, err := retryablePost(t, rc, f.url(), fmt.Sprintf("GRANT-%d", i))
				if out, _ := grantretry.OutcomeOf(resp); err != nil || out.Attempts != 1 {
					t.Fatalf("call %d: %v, %d attempts; want the 503 after one attempt", i, err, out.Attempts)
				}
			}
			if n := len(f.requests()); n != 9 {
				t.Fatalf("%d requests in five calls, want 9", n)
			}
			_, err = retryablePost(t, rc, f.url(), "GRANT-6")
			var ge *grantretry.Error
			if !errors.As(err, &ge) || ge.Disposition != grantretry.CircuitOpen || len(f.requests()) != 9 {
				t.Fatalf("sixth call: %v, %d requests in all; want grantretry's circuit_open *Error and still 9", err, len(f.requests()))
			}
			clk.Sleep(context.Background(), time.Minute) // the breaker's probe is due
			if _, err := retryablePost(t, rc, f.url(), "GRANT-7"); err != nil || len(f.requests()) != 10 {
				t.Fatalf("the probe: %v, %d requests in all; want its 503 and 10", err, len(f.requests()))
			}
			if d := dials.Load(); d != c.dials {
				t.Fatalf("%d connections dialed, want %d", d, c.dials)
			}
		})
	}
}

// resty's SetRetryCount retries its own timeout (SetTimeout, which is
// http.Client.Timeout): each retry is a new grantretry call, with a new
// correlation id. The Idempotency-Key is the same, as the submission id
// and the body are; with SetRetryCount(0) the call is sent once.
func TestRestyRetryCountRetriesItsOwnTimeout(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	f := newFunder(t, http.StatusCreated)
	f.srv.Config.Handler = hanging(f, hang)
	for _, c := range []struct {
		name  string
		retry int
		want  int
	}{
		{"SetRetryCount(3)", 3, 4},
		{"SetRetryCount(0)", 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.requests())
			tr := grantretry.New(nil)
			defer tr.CloseIdleConnections()
			client := newRestyFunderClient(tr).SetRetryCount(c.retry).SetLogger(quiet{}).
				SetRetryWaitTime(time.Millisecond).SetRetryMaxWaitTime(time.Millisecond).
				SetTimeout(50 * time.Millisecond)
			_, err := client.R().SetContext(grantretry.WithSubmissionID(context.Background(), "GRANT-42")).
				SetBody(`{"applicant":"Example Foundation"}`).Post(f.url())
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want the client's timeout", err)
			}
			reqs := f.requests()[before:]
			corr, _ := distinct(reqs, grantretry.HeaderCorrelationID)
			keys, _ := distinct(reqs, grantretry.HeaderIdempotencyKey)
			if len(reqs) != c.want || corr != c.want || keys != 1 {
				t.Fatalf("%d requests, %d correlation ids, %d keys; want %d, %d, 1", len(reqs), corr, keys, c.want, c.want)
			}
		})
	}
}

// hanging records each request as f does, then answers none of them: it
// waits until the client gives up or the test ends.
func hanging(f *funder, done <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.got = append(f.got, r.Header.Clone())
		f.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
}

// quiet is a resty.Logger that drops resty's own log lines.
type quiet struct{}

func (quiet) Errorf(string, ...any) {}
func (quiet) Warnf(string, ...any)  {}
func (quiet) Debugf(string, ...any) {}
