package grantretry

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// A funder's own text, taught in a line, turns a real Server fault that
// ClassifySOAPFault retries into a refusal; what the rules do not know
// is still ClassifySOAPFault's.
func TestFunderRulesComeBeforeTheSOAPFault(t *testing.T) {
	fn := ClassifyFirst(ClassifyRules(
		Rule{Status: 500, Contains: "Fault occurred while processing.", Verdict: Classification{Reason: "funder:processing"}},
	), ClassifySOAPFault)
	_, cxf := readSample(t, "savon-cxf-server")
	_, metro := readSample(t, "metro-mustunderstand-12")
	cases := []struct {
		body      []byte
		retryable bool
		reason    string
	}{
		{cxf, false, "funder:processing"},
		{metro, false, "soap:MustUnderstand"},
	}
	for _, c := range cases {
		got, ok := fn(&http.Response{StatusCode: 500, Header: http.Header{}}, c.body)
		if !ok || got.Retryable != c.retryable || got.Reason != c.reason {
			t.Errorf("verdict %+v, %v; want retryable %v, %s", got, ok, c.retryable, c.reason)
		}
	}
}

func TestClassifyRulesFirstMatchWins(t *testing.T) {
	fn := ClassifyRules(
		Rule{Status: 500, Contains: "Concurrent", Verdict: Classification{Retryable: true, Reason: "f:busy"}},
		Rule{Status: 403, Contains: "daily limit", Verdict: Classification{Owed: true, Reason: "f:daily"}},
		Rule{Contains: "Invalid card", Verdict: Classification{Reason: "f:card"}},
		Rule{Status: 409, Verdict: Classification{Applied: true, Reason: "f:duplicate"}},
	)
	cases := []struct {
		status int
		body   string
		want   string // "" declines
	}{
		{500, "Concurrent request limit; Invalid card", "f:busy"},
		{502, "Concurrent", ""},
		{403, "your daily limit is spent", "f:daily"},
		{403, "your Daily Limit is spent", ""}, // case and all
		{422, "Invalid card number", "f:card"},
		{409, "", "f:duplicate"},
		{200, "Invalid card", ""}, // never a success
	}
	for _, c := range cases {
		got, ok := fn(&http.Response{StatusCode: c.status}, []byte(c.body))
		if ok != (c.want != "") || got.Reason != c.want {
			t.Errorf("%d %q: %+v, %v; want %q", c.status, c.body, got, ok, c.want)
		}
	}
}

func TestCheckRulesRefusesRulesThatCannotWork(t *testing.T) {
	ok := Classification{Reason: "f:ok"}
	cases := []struct {
		name  string
		rules []Rule
		says  string
	}{
		{"matches everything", []Rule{{Verdict: ok}}, "rule 0: neither a Status nor a Contains"},
		{"a success status", []Rule{{Status: 200, Contains: "x", Verdict: ok}}, "rule 0: Status 200"},
		{"no reason", []Rule{{Status: 500, Contains: "x"}}, "rule 0: Verdict.Reason"},
		{"reason with a space", []Rule{{Status: 500, Contains: "x", Verdict: Classification{Reason: "f: x"}}}, "rule 0: Verdict.Reason"},
		{"reason with a separator", []Rule{{Status: 500, Contains: "x", Verdict: Classification{Reason: "f;x"}}}, "rule 0: Verdict.Reason"},
		{"owed and retryable", []Rule{{Status: 403, Contains: "x", Verdict: Classification{Owed: true, Retryable: true, Reason: "f"}}}, "rule 0: Verdict is both Owed and Retryable"},
		{"a fixed time", []Rule{{Status: 403, Contains: "x", Verdict: Classification{Owed: true, NotBefore: time.Unix(1, 0), Reason: "f"}}}, "rule 0: Verdict has a NotBefore"},
		{"hidden by an earlier one", []Rule{
			{Status: 500, Contains: "Fault", Verdict: ok},
			{Status: 500, Contains: "Fault occurred", Verdict: ok},
		}, "rule 1: rule 0 (\"Fault\" in a 500) matches every answer it does"},
		{"hidden by any status", []Rule{
			{Contains: "limit", Verdict: ok},
			{Status: 403, Contains: "daily limit", Verdict: ok},
		}, "rule 1: rule 0"},
		{"hidden by a whole status", []Rule{
			{Status: 409, Verdict: ok},
			{Status: 409, Contains: "duplicate", Verdict: ok},
		}, "rule 1: rule 0 (any 409)"},
		{"two at fault", []Rule{{Verdict: ok}, {Status: 99, Contains: "x", Verdict: ok}}, "rule 0: neither a Status nor a Contains: it would match every answer; rule 1: Status 99"},
	}
	for _, c := range cases {
		err := CheckRules(c.rules...)
		if !errors.Is(err, ErrInvalidRule) || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "grantretry: ") {
			t.Errorf("%s: CheckRules = %v, want ErrInvalidRule saying %q", c.name, err, c.says)
		}
	}
	good := []Rule{
		{Status: 500, Contains: "Fault occurred", Verdict: ok},
		{Status: 500, Contains: "Fault", Verdict: ok},
		{Status: 409, Contains: "duplicate", Verdict: ok},
		{Status: 409, Verdict: ok},
		{Status: 403, Contains: "daily limit", Verdict: ok},
		{Contains: "limit", Verdict: ok},
	}
	if err := CheckRules(good...); err != nil {
		t.Errorf("CheckRules(good) = %v, want nil: the narrower rule comes first", err)
	}
}

// A rule set CheckRules refuses is not used; every answer shows it, and
// is judged as if there were no rules.
func TestInvalidRulesShowOnEveryAnswer(t *testing.T) {
	h := newHarness(t, WithClassifier(ClassifyRules(Rule{Verdict: Classification{Reason: "f:all"}})))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201))
	o := callOnce(t, h)
	if o.Disposition != Succeeded || o.Attempts != 2 {
		t.Errorf("outcome %+v, want the 503 retried as the status sets say", o)
	}
	lines := h.attemptLines()
	if len(lines) == 0 || lines[0].ContextMap()[FieldReason] != "transient:503;rules:invalid" {
		t.Errorf("first attempt line %v, want reason transient:503;rules:invalid", lines)
	}
	h.mock.RegisterResponder(http.MethodPost, funderURL, func(*http.Request) (*http.Response, error) {
		resp := httpmock.NewStringResponse(429, `{"message":"Limit Exceeded"}`)
		resp.Header.Set("X-Amzn-Errortype", "LimitExceededException")
		return resp, nil
	})
	if o := callOnce(t, h); o.StopReason != StopOwedLater || o.Reason != "owed:429;aws:LimitExceededException;rules:invalid" {
		t.Errorf("outcome %+v, want the limits' verdict, marked", o)
	}
}

func TestClassifyFirstAsksInOrder(t *testing.T) {
	decline := func(*http.Response, []byte) (Classification, bool) { return Classification{}, false }
	answer := func(r string) ClassifyFunc {
		return func(*http.Response, []byte) (Classification, bool) { return Classification{Reason: r}, true }
	}
	resp := &http.Response{StatusCode: 500}
	if got, ok := ClassifyFirst(decline, answer("b"), answer("c"))(resp, nil); !ok || got.Reason != "b" {
		t.Errorf("got %+v, %v; want b", got, ok)
	}
	if _, ok := ClassifyFirst(decline, decline)(resp, nil); ok {
		t.Error("all declined, but ClassifyFirst answered")
	}
	if _, ok := ClassifyFirst()(resp, nil); ok {
		t.Error("no functions, but ClassifyFirst answered")
	}
	if got, ok := ClassifyFirst(answer("b"), nil)(resp, nil); !ok || got.Reason != "classify_first:nil" {
		t.Errorf("with a nil: %+v, %v; want the reason classify_first:nil on every answer", got, ok)
	}
}
