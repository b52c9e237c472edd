package main

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// dispositionTable reads docs/policy.md's table of dispositions: for each
// disposition, the stop reasons the page says it ends with.
func dispositionTable(t *testing.T) map[string]map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| [^|]+ \\| (.+) \\|$")
	name := regexp.MustCompile("`([a-z_]+)`")
	table := map[string]map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		reasons := map[string]bool{}
		for _, r := range name.FindAllStringSubmatch(m[2], -1) {
			reasons[r[1]] = true
		}
		table[m[1]] = reasons
	}
	if len(table) == 0 {
		t.Fatal("docs/policy.md has no table of dispositions")
	}
	return table
}

type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("spool gone") }

// A call ends with a disposition and a stop reason the page's table puts
// together: a pipeline that routes calls by the table (owed work to a
// queue, refusals to a person) routes each as its disposition says.
func TestDispositionTableListsEachStopReasonWhereCallsEndWithIt(t *testing.T) {
	table := dispositionTable(t)
	funder := func(statuses ...int) roundTripperFunc {
		n := 0
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			s := statuses[min(n, len(statuses)-1)]
			n++
			return &http.Response{StatusCode: s, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
	}
	sent := 0
	retryFunder := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return funder(503)(r)
	})
	put := func(body io.Reader) *http.Request {
		req, err := http.NewRequest(http.MethodPut, "https://funder.example/applications/1", body)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	for _, c := range []struct {
		name    string
		inner   http.RoundTripper
		req     func() *http.Request
		endedAs string // the disposition and stop reason, as "disposition/reason"
	}{
		{"success", funder(200), func() *http.Request { return put(strings.NewReader("x")) }, "succeeded/success"},
		{"refusal", funder(422), func() *http.Request { return put(strings.NewReader("x")) }, "failed_terminal/terminal"},
		{"outage", funder(503), func() *http.Request { return put(strings.NewReader("x")) }, "dead_letter/retries_exhausted"},
		{"applied, after an ambiguous attempt", funder(502, 403), func() *http.Request { return put(strings.NewReader("x")) }, "succeeded/already_applied"},
		{"body failing before the first attempt", funder(200), func() *http.Request {
			req := put(io.MultiReader(strings.NewReader("x"), failingBody{}))
			req.ContentLength = -1
			return req
		}, "failed_terminal/body_read_failed"},
		{"GetBody failing for a retry", retryFunder, func() *http.Request {
			req := put(strings.NewReader("x"))
			req.GetBody = func() (io.ReadCloser, error) {
				if sent > 0 { // the first attempt is out: a retry needs the body again
					return nil, errors.New("spool gone")
				}
				return io.NopCloser(strings.NewReader("x")), nil
			}
			return req
		}, "dead_letter/body_read_failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A 403 says an earlier attempt was applied, as a funder's
			// refusal of a duplicate does.
			applied := grantretry.ClassifyRules(grantretry.Rule{Status: 403,
				Verdict: grantretry.Classification{Applied: true, Reason: "applied:duplicate"}})
			tr := grantretry.New(c.inner, grantretry.WithClock(frozenClock{}), grantretry.WithBudget(2, time.Hour),
				grantretry.WithClassifier(applied))
			resp, err := tr.RoundTrip(c.req())
			var o grantretry.Outcome
			if err != nil {
				var e *grantretry.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v is not an *Error", err)
				}
				o = e.Outcome
			} else {
				resp.Body.Close()
				o, _ = grantretry.OutcomeOf(resp)
			}
			if got := string(o.Disposition) + "/" + o.StopReason; got != c.endedAs {
				t.Fatalf("the call ended %s, want %s", got, c.endedAs)
			}
			if !table[string(o.Disposition)][o.StopReason] {
				t.Errorf("a call ends %s with stop reason %s, and docs/policy.md's table does not list it there", o.Disposition, o.StopReason)
			}
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
