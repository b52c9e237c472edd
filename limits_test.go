package grantretry

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// limitSample is a sample kept in testdata/limits and what grantretry
// makes of it: ClassifyLimits' verdict (reason "" means it declines and
// the status decides), and how a call through a Transport with the
// default policy ends.
type limitSample struct {
	name      string
	reason    string        // ClassifyLimits' Reason, "" if not ok
	owed      bool          // ClassifyLimits' Owed
	notBefore time.Duration // after the response's Date; 0: NotBefore zero
	stop      string        // the call's stop reason through a Transport
	attempts  int
}

var limitSamples = []limitSample{
	{"aws-apigateway-quota", "aws:LimitExceededException", true, 0, StopOwedLater, 1},
	{"aws-apigateway-throttle", "aws:TooManyRequestsException", false, 0, StopRetriesSpent, 5},
	{"azure-apim-quota", "azure:quota", true, 8*time.Minute + 24*time.Second, StopOwedLater, 1},
	{"azure-apim-quota-days", "azure:quota", true, 5*24*time.Hour + 3*time.Hour + 23*time.Minute + 11*time.Second, StopOwedLater, 1},
	{"azure-apim-rate-limit", "", false, 0, StopRetriesSpent, 5},
	{"salesforce-rest-total-requests", "salesforce:REQUEST_LIMIT_EXCEEDED", true, 0, StopOwedLater, 1},
	{"salesforce-rest-concurrent", "salesforce:concurrent_limit", false, 0, StopRetriesSpent, 5},
	{"samgov-quota", "", false, 0, StopOwedLater, 1},
	{"simpler-maintenance", "", false, 0, StopOwedLater, 1},
}

// sampleDate is the Date a sample without one is given.
const sampleDate = "Fri, 04 Dec 2026 18:00:00 GMT"

// readLimitSample reads a sample of testdata/limits: its status (the
// .source's first line, which the headers' status line, if any, must
// agree with), headers (with a Date if it has none) and body.
func readLimitSample(t testing.TB, name string) (int, http.Header, []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "limits")
	body, err := os.ReadFile(filepath.Join(dir, name+".body"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, name+".source"))
	if err != nil {
		t.Fatalf("sample %s has no source note: %v", name, err)
	}
	first, _, _ := strings.Cut(string(src), "\n")
	code, _, _ := strings.Cut(strings.TrimPrefix(first, "status: "), " ")
	status, err := strconv.Atoi(code)
	if err != nil {
		t.Fatalf("sample %s: the source's first line %q names no status", name, first)
	}
	h := http.Header{}
	if f, err := os.Open(filepath.Join(dir, name+".headers")); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if line, ok := strings.CutPrefix(s.Text(), "HTTP/"); ok {
				_, code, _ := strings.Cut(line, " ")
				if code, _, _ = strings.Cut(code, " "); code != strconv.Itoa(status) {
					t.Fatalf("sample %s: the headers' status line %q disagrees with the source's %d", name, s.Text(), status)
				}
				continue
			}
			if k, v, ok := strings.Cut(s.Text(), ":"); ok {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
	}
	if h.Get("Date") == "" {
		h.Set("Date", sampleDate)
	}
	return status, h, body
}

func TestClassifyLimitsOnTheSamples(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range limitSamples {
		seen[s.name] = true
		status, h, body := readLimitSample(t, s.name)
		got, ok := ClassifyLimits(&http.Response{StatusCode: status, Header: h, Body: untouchableBody{t}}, body)
		if ok != (s.reason != "") || got.Reason != s.reason || got.Owed != s.owed {
			t.Errorf("%s: ClassifyLimits = %+v, %v; want reason %q, owed %v", s.name, got, ok, s.reason, s.owed)
			continue
		}
		if ok && got.Retryable == s.owed {
			t.Errorf("%s: Retryable = %v, want %v", s.name, got.Retryable, !s.owed)
		}
		date, _ := http.ParseTime(h.Get("Date"))
		switch want := date.Add(s.notBefore); {
		case s.notBefore == 0 && !got.NotBefore.IsZero():
			t.Errorf("%s: NotBefore = %v, want zero", s.name, got.NotBefore)
		case s.notBefore != 0 && !got.NotBefore.Equal(want):
			t.Errorf("%s: NotBefore = %v, want %v", s.name, got.NotBefore, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "limits", "*.body"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".body"); !seen[name] {
			t.Errorf("sample %s has no verdict in limitSamples", name)
		}
	}
}

// Through a Transport with no option but the clock: the limits apply by
// default, and a Retry-After past the deadline makes the call owed.
func TestLimitsApplyWithoutAnOption(t *testing.T) {
	for _, s := range limitSamples {
		t.Run(s.name, func(t *testing.T) {
			status, h, body := readLimitSample(t, s.name)
			hr := newHarness(t)
			hr.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
				resp := httpmock.NewBytesResponse(status, body)
				resp.Header = h.Clone()
				return resp, nil
			})
			o := callOnce(t, hr)
			if o.StopReason != s.stop || o.Attempts != s.attempts {
				t.Errorf("outcome %+v, want %s after %d attempts", o, s.stop, s.attempts)
			}
			if s.reason != "" && !strings.HasSuffix(o.Reason, ";"+s.reason) {
				t.Errorf("Reason = %q, want it to end with %q", o.Reason, s.reason)
			}
		})
	}
}

func TestRetryAfterDateOfDailyQuotaIsTheNotBefore(t *testing.T) {
	status, h, body := readLimitSample(t, "samgov-quota")
	hr := newHarness(t)
	hr.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		resp := httpmock.NewBytesResponse(status, body)
		resp.Header = h.Clone()
		return resp, nil
	})
	o := callOnce(t, hr)
	midnight := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	if o.StopReason != StopOwedLater || !o.NotBefore.Equal(midnight) {
		t.Errorf("outcome %+v, want owed_later until %v", o, midnight)
	}
}

func TestClassifierVerdictComesBeforeTheLimits(t *testing.T) {
	status, h, body := readLimitSample(t, "aws-apigateway-quota")
	hr := newHarness(t, WithClassifier(func(*http.Response, []byte) (Classification, bool) {
		return Classification{Retryable: false, Reason: "mine"}, true
	}))
	hr.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		resp := httpmock.NewBytesResponse(status, body)
		resp.Header = h.Clone()
		return resp, nil
	})
	if o := callOnce(t, hr); o.StopReason != StopTerminal || o.Reason != "terminal:429;mine" {
		t.Errorf("outcome %+v, want the classifier's terminal verdict", o)
	}
}

func TestLimitsRunWhenTheClassifierDeclines(t *testing.T) {
	status, h, body := readLimitSample(t, "salesforce-rest-total-requests")
	hr := newHarness(t, WithClassifier(ClassifySOAPFault))
	hr.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		resp := httpmock.NewBytesResponse(status, body)
		resp.Header = h.Clone()
		return resp, nil
	})
	o := callOnce(t, hr)
	if o.StopReason != StopOwedLater || o.Reason != "owed:403;salesforce:REQUEST_LIMIT_EXCEEDED" {
		t.Errorf("outcome %+v, want owed_later by the Salesforce limit", o)
	}
}

// unreadBody fails the test if it is read.
type unreadBody struct{ t *testing.T }

func (b unreadBody) Read([]byte) (int, error) {
	b.t.Error("the body of a response no limit reads was read")
	return 0, io.EOF
}
func (unreadBody) Close() error { return nil }

func TestLimitsReadTheBodyOfA403Only(t *testing.T) {
	for _, status := range []int{400, 404, 429, 500, 503} {
		hr := newHarness(t, WithBudget(0, time.Minute))
		hr.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: unreadBody{t}}, nil
		})
		callOnce(t, hr)
	}
	body := "Quota will be replenished in 01:00:00."
	hr := newHarness(t)
	hr.mock.RegisterResponder(http.MethodPost, funderURL, httpmock.NewStringResponder(403, body))
	req, _ := newPost(t, context.Background(), "x", true)
	resp, err := hr.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.StopReason != StopOwedLater || !bytes.Equal(got, []byte(body)) {
		t.Errorf("outcome %+v, body %q: want owed_later and the body whole", o, got)
	}
}

func TestQuotaAnswerWithRetryAfterIsOwedUntilThen(t *testing.T) {
	hr := newHarness(t)
	hr.mock.RegisterResponder(http.MethodPost, funderURL,
		httpmock.NewStringResponder(403, `{"message":"quota"}`).HeaderSet(http.Header{"Retry-After": {"600"}}))
	o := callOnce(t, hr)
	if want := hr.clock.Now().Add(10 * time.Minute); o.StopReason != StopOwedLater || o.Reason != "owed:403;quota:retry_after" || !o.NotBefore.Equal(want) {
		t.Errorf("outcome %+v, want owed_later (quota:retry_after) until %v", o, want)
	}
	// A Transport of its own: the first one holds the host until then.
	hr = newHarness(t)
	hr.mock.RegisterResponder(http.MethodPost, funderURL, httpmock.NewStringResponder(403, `{"message":"Forbidden"}`))
	if o := callOnce(t, hr); o.StopReason != StopTerminal {
		t.Errorf("a 403 without a Retry-After or a known text: outcome %+v, want terminal", o)
	}
}

func TestClassifyLimitsReadsOnly4xxAnd5xx(t *testing.T) {
	h := http.Header{"X-Amzn-Errortype": {"LimitExceededException"}, "Retry-After": {"60"}}
	for _, status := range []int{200, 304, 399, 600, 999} {
		if c, ok := ClassifyLimits(&http.Response{StatusCode: status, Header: h}, []byte("REQUEST_LIMIT_EXCEEDED")); ok {
			t.Errorf("status %d: %+v, want no verdict", status, c)
		}
	}
	if _, ok := ClassifyLimits(nil, nil); ok {
		t.Error("a nil response got a verdict")
	}
}

func TestParseTimeSpan(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"00:08:24.", 8*time.Minute + 24*time.Second, true},
		{"22.14:18:12", 22*24*time.Hour + 14*time.Hour + 18*time.Minute + 12*time.Second, true},
		{"00:00:05.5000000.", 6 * time.Second, true},
		{"23:59:59", 23*time.Hour + 59*time.Minute + 59*time.Second, true},
		{"24:00:00", 0, false},
		{"00:60:00", 0, false},
		{"-00:00:05", 0, false},
		{"2 days.", 0, false},
		{"2.12 days.", 0, false},
		{"", 0, false},
		{"999999999.00:00:00", 0, false},
	}
	for _, c := range cases {
		got, ok := parseTimeSpan([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseTimeSpan(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
