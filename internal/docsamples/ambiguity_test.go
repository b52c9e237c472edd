package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// The pages give the rule for an ambiguous answer as the Transport applies
// it: every status of 500 or more but 501 and 503, 600 to 999 included.
func TestAmbiguousStatusRuleOnThePagesIsTheTransports(t *testing.T) {
	const rule = "any other status of 500 or more but 501 and 503"
	for status := 100; status <= 999; status++ {
		tr := grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		}), grantretry.WithClock(frozenClock{}), grantretry.WithBudget(0, time.Hour))
		req, _ := http.NewRequest(http.MethodPost, "https://funder.example/applications", strings.NewReader("x"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o, _ := grantretry.OutcomeOf(resp)
		if want := status >= 500 && status != 501 && status != 503; o.Ambiguous != want {
			t.Errorf("status %d: Ambiguous %v; the pages' rule (%s) says %v", status, o.Ambiguous, rule, want)
		}
	}
	for _, page := range []string{"docs/policy.md", "docs/audit-trail.md"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(oneLine(string(data)), rule) {
			t.Errorf("%s does not give the rule for an ambiguous status as %q", page, rule)
		}
	}
}
