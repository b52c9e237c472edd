package simplergrants

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/grantretry/grantretry"
)

// sampleVerdict is what ClassifyFault must say of one sample of testdata.
type sampleVerdict struct {
	name   string
	reason string // "": ClassifyFault declines
	kind   verdictKind
}

var samples = []sampleVerdict{
	{"submit-not-in-progress", "simplergrants:already_submitted", kindApplied},
	{"modify-not-in-progress", "simplergrants:not_in_progress", kindTerminal},
	{"submit-competition-not-open", "simplergrants:competition_not_open", kindTerminal},
	{"start-competition-not-open", "simplergrants:competition_not_open", kindTerminal},
	{"pending-file-upload-limit", "simplergrants:pending_file_upload_limit_exceeded", kindOwed},
	{"maintenance", "simplergrants:maintenance", kindOwed},
	{"gateway-forbidden", "simplergrants:gateway_forbidden", kindTerminal},
	{"gateway-timeout", "simplergrants:gateway_timeout", kindTransient},
	{"gateway-throttle", "aws:TooManyRequestsException", kindTransient},
	{"gateway-quota", "aws:LimitExceededException", kindOwed},
	{"app-forbidden", "", 0},
	{"token-expired", "", 0},
	{"commongrants-submit-invalid", "", 0},
}

// readSample reads a sample of testdata: its status (the .source's first
// line), headers and body.
func readSample(t testing.TB, name string) (int, http.Header, []byte) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name+".body"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("testdata", name+".source"))
	if err != nil {
		t.Fatalf("sample %s has no source note: %v", name, err)
	}
	first, _, _ := strings.Cut(string(src), "\n")
	status, err := strconv.Atoi(strings.TrimPrefix(first, "status: "))
	if err != nil {
		t.Fatalf("sample %s: the source's first line %q names no status", name, first)
	}
	if !strings.Contains(string(src), "\ncaptured: ") || !strings.Contains(string(src), "\nservice: ") {
		t.Errorf("sample %s: the source note says neither what was captured nor what service answered", name)
	}
	h := http.Header{}
	if f, err := os.Open(filepath.Join("testdata", name+".headers")); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
	}
	return status, h, body
}

func checkVerdict(t *testing.T, what string, got grantretry.Classification, ok bool, want sampleVerdict) {
	t.Helper()
	if ok != (want.reason != "") || got.Reason != want.reason {
		t.Errorf("%s: ClassifyFault = %+v, %v; want reason %q", what, got, ok, want.reason)
		return
	}
	if !ok {
		return
	}
	if got.Retryable != (want.kind == kindTransient) || got.Owed != (want.kind == kindOwed) ||
		got.Applied != (want.kind == kindApplied) || !got.NotBefore.IsZero() {
		t.Errorf("%s: ClassifyFault = %+v; want kind %d and no NotBefore", what, got, want.kind)
	}
}

func TestClassifyFaultOnTheSamples(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range samples {
		seen[s.name] = true
		status, h, body := readSample(t, s.name)
		orig := bytes.Clone(body)
		got, ok := ClassifyFault(&http.Response{StatusCode: status, Header: h}, body)
		checkVerdict(t, s.name, got, ok, s)
		if !bytes.Equal(body, orig) {
			t.Errorf("%s: ClassifyFault wrote to the body", s.name)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.body"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".body"); !seen[name] {
			t.Errorf("sample %s has no verdict in samples", name)
		}
	}
}

// Every rule is met by a sample of a real answer, and names the file and
// line it comes from.
func TestEveryRuleHasASampleAndASource(t *testing.T) {
	line := regexp.MustCompile(`[a-z_./]+\.(py|tf|yml):[0-9]+`)
	for _, r := range rules {
		found := false
		for _, s := range samples {
			found = found || s.reason == r.name
		}
		if !found {
			t.Errorf("rule %s is met by no sample", r.name)
		}
		if !line.MatchString(r.source) {
			t.Errorf("rule %s names no file and line: %q", r.name, r.source)
		}
	}
}

func TestClassifyFaultEdges(t *testing.T) {
	app := func(status int, msg, typ string) string {
		return `{"data": {}, "errors": [{"type": "` + typ + `", "message": "x"}], "message": "` + msg + `", "status_code": ` + strconv.Itoa(status) + `}`
	}
	cases := []struct {
		name   string
		status int
		header string // x-amzn-ErrorType
		body   string
		want   sampleVerdict
	}{
		{"not_in_progress among other errors", 403, "", `{"message": "Cannot submit application. It is currently in status: accepted", "status_code": 403, "errors": [{"type": "other"}, {"type": "not_in_progress"}]}`, sampleVerdict{reason: "simplergrants:already_submitted", kind: kindApplied}},
		{"not_in_progress on a status other than 403", 422, "", app(422, "Cannot submit application. It is currently in status: submitted", "not_in_progress"), sampleVerdict{}},
		{"submit message without the error type", 403, "", app(403, "Cannot submit application. It is currently in status: submitted", "other"), sampleVerdict{}},
		{"competition_not_open on a 403", 403, "", app(403, "Cannot submit application - competition is not open", "competition_not_open"), sampleVerdict{}},
		{"the gateway's Forbidden with a status_code is the application's", 403, "", `{"message": "Forbidden", "status_code": 403, "errors": []}`, sampleVerdict{}},
		{"the gateway's Forbidden with more text", 403, "", `{"message":"Forbidden: no key"}`, sampleVerdict{}},
		{"Missing Authentication Token", 403, "", `{"message":"Missing Authentication Token"}`, sampleVerdict{}},
		{"the timeout text on a 502", 502, "", `{"message": "Endpoint request timed out"}`, sampleVerdict{}},
		{"the application's 504", 504, "", `{"message": "Endpoint request timed out", "status_code": 504, "errors": []}`, sampleVerdict{}},
		{"maintenance body on a 500", 500, "", `{"message": "API is undergoing scheduled maintenance", "status_code": 500, "errors": []}`, sampleVerdict{}},
		{"maintenance without errors", 503, "", `{"message": "API is undergoing scheduled maintenance", "status_code": 503}`, sampleVerdict{reason: "simplergrants:maintenance", kind: kindOwed}},
		{"an unknown error type", 422, "", app(422, "The application has issues in its form responses.", "required"), sampleVerdict{}},
		{"quota header with a suffix", 429, "LimitExceededException:http://internal.amazon.com/coral/com.amazon.coral.availability/", `{"message":"Limit Exceeded"}`, sampleVerdict{reason: "aws:LimitExceededException", kind: kindOwed}},
		{"quota header on a body of the application", 429, "LimitExceededException", app(429, "Forbidden", "x"), sampleVerdict{reason: "aws:LimitExceededException", kind: kindOwed}},
		{"throttle header without a body", 429, "TooManyRequestsException", ``, sampleVerdict{reason: "aws:TooManyRequestsException", kind: kindTransient}},
		{"another error type header", 429, "TooManyRequestsExceptionX", `{"message":"Too Many Requests"}`, sampleVerdict{}},
		{"cut off", 403, "", app(403, "Cannot submit application. It is currently in status: submitted", "not_in_progress")[:60], sampleVerdict{}},
		{"a JSON array", 403, "", `[{"message":"Forbidden"}]`, sampleVerdict{}},
		{"HTML", 504, "", `<html><body>504 Gateway Time-out</body></html>`, sampleVerdict{}},
		{"empty", 503, "", ``, sampleVerdict{}},
		{"a success", 200, "", `{"message": "Success", "data": {}, "status_code": 200}`, sampleVerdict{}},
		{"a status past 599", 600, "LimitExceededException", `{"message":"Limit Exceeded"}`, sampleVerdict{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("x-amzn-ErrorType", tc.header)
			}
			got, ok := ClassifyFault(&http.Response{StatusCode: tc.status, Header: h}, []byte(tc.body))
			checkVerdict(t, tc.name, got, ok, tc.want)
		})
	}
}

func TestClassifyFaultDeclinesANilResponse(t *testing.T) {
	if c, ok := ClassifyFault(nil, []byte(`{"message":"Forbidden"}`)); ok {
		t.Errorf("ClassifyFault(nil) = %+v, true; want it to decline", c)
	}
}

// Only the first MaxClassifyPeek bytes are read: a known answer padded
// past them is a body cut off, and declined.
func TestClassifyFaultReadsOnlyThePeek(t *testing.T) {
	body := []byte(`{"message": "API is undergoing scheduled maintenance", "status_code": 503, "errors": [], "pad": "` +
		strings.Repeat("x", grantretry.MaxClassifyPeek) + `"}`)
	if c, ok := ClassifyFault(&http.Response{StatusCode: 503, Header: http.Header{}}, body); ok {
		t.Errorf("ClassifyFault read past the peek: %+v", c)
	}
	short := []byte(`{"message": "API is undergoing scheduled maintenance", "status_code": 503, "errors": []}`)
	if _, ok := ClassifyFault(&http.Response{StatusCode: 503, Header: http.Header{}}, short); !ok {
		t.Error("ClassifyFault declined the maintenance answer itself")
	}
}

// The gateway's x-amzn-ErrorType answers are 429s; another status with
// the header is not the usage plan's.
func TestClassifyFaultReadsTheGatewaysErrorTypeOnA429Only(t *testing.T) {
	for _, tc := range []struct {
		status int
		value  string
		want   string
	}{
		{429, "LimitExceededException", "aws:LimitExceededException"},
		{429, "TooManyRequestsException", "aws:TooManyRequestsException"},
		{400, "LimitExceededException", ""},
		{500, "TooManyRequestsException", ""},
	} {
		h := http.Header{"X-Amzn-Errortype": {tc.value}}
		c, ok := ClassifyFault(&http.Response{StatusCode: tc.status, Header: h}, []byte(`{"message":"Rate exceeded"}`))
		if got := map[bool]string{true: c.Reason}[ok]; got != tc.want {
			t.Errorf("%d %s: %+v %v, want %q", tc.status, tc.value, c, ok, tc.want)
		}
	}
}

// not_in_progress with the submit's text says "already submitted" only
// in the answer to a submit.
func TestClassifyFaultReadsAlreadySubmittedOnASubmitOnly(t *testing.T) {
	const id = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	body := []byte(`{"message":"Cannot submit application. It is currently in status: submitted","status_code":403,"errors":[{"type":"not_in_progress"}]}`)
	for _, tc := range []struct {
		method, path string
		applied      bool
	}{
		{http.MethodPost, "/alpha/applications/" + id + "/submit", true},
		{http.MethodPost, "/api/alpha/applications/" + id + "/submit", true},
		{http.MethodPut, "/alpha/applications/" + id + "/forms/" + id, false},
		{http.MethodGet, "/alpha/applications/" + id + "/submit", false},
		{"", "", true}, // no request: the body alone
	} {
		resp := &http.Response{StatusCode: 403, Header: http.Header{}}
		if tc.path != "" {
			resp.Request = httptest.NewRequest(tc.method, "https://api.simpler.grants.gov"+tc.path, nil)
		}
		c, ok := ClassifyFault(resp, body)
		if !ok || c.Applied != tc.applied || (!tc.applied && (c.Retryable || c.Owed)) {
			t.Errorf("%s %s: %+v %v, want applied %v (else terminal)", tc.method, tc.path, c, ok, tc.applied)
		}
	}
}
