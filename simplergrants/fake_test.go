package simplergrants_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

// The fake API's answers read as the samples of the real ones do: the
// fake and the classifier were built from the same sources, and a
// difference is a mistake in one of them.
func TestClassifyFaultReadsTheFakesAnswersAsTheSamples(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	a := fakesimpler.New(fakesimpler.Config{
		APIKeys: []string{apiKey}, Users: map[string]string{userToken: userID},
		Now: clk.Now, Sleep: clk.Sleep, MonthlyQuota: 40,
	})
	t.Cleanup(a.Close)
	const closed = "99999999-8888-4777-8666-555555555555"
	a.AddCompetition(fakesimpler.Competition{ID: competition, OpportunityNumber: "HHS-2026-ACF-0001"})
	a.AddCompetition(fakesimpler.Competition{ID: closed, OpportunityNumber: "HHS-2026-ACF-0002", Closes: clk.Now()})
	client := &http.Client{Transport: credentials{a.Client().Transport}}
	id := startDirect(t, a, client, "sub-1")
	submitDirect(t, a, client, id)

	classify := func(c *http.Client, method, path, body string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, a.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		v, ok := simplergrants.ClassifyFault(resp, raw)
		if !ok {
			return ""
		}
		return v.Reason
	}
	steps := []struct {
		name string
		do   func() string
		want string
	}{
		{"a resent submit", func() string { return classify(client, http.MethodPost, "/alpha/applications/"+id+"/submit", "") }, "simplergrants:already_submitted"},
		{"a start in a closed competition", func() string {
			return classify(client, http.MethodPost, "/alpha/applications/start", `{"competition_id": "`+closed+`"}`)
		}, "simplergrants:competition_not_open"},
		{"an unknown application", func() string {
			return classify(client, http.MethodGet, "/alpha/applications/00000000-0000-4000-8000-000000000000", "")
		}, ""},
		{"no key", func() string { return classify(a.Client(), http.MethodGet, "/alpha/applications/"+id, "") }, "simplergrants:gateway_forbidden"},
		{"a slow API", func() string {
			a.SetWork(time.Minute)
			defer a.SetWork(0)
			return classify(client, http.MethodGet, "/alpha/applications/"+id, "")
		}, "simplergrants:gateway_timeout"},
		{"maintenance", func() string {
			a.SetMaintenance(time.Minute)
			defer a.SetMaintenance(0)
			return classify(client, http.MethodGet, "/alpha/applications/"+id, "")
		}, "simplergrants:maintenance"},
		{"past the burst", func() string {
			last := ""
			for range fakesimpler.DefaultBurstLimit + 1 {
				last = classify(client, http.MethodGet, "/alpha/applications/"+id, "")
			}
			return last
		}, "aws:TooManyRequestsException"},
		{"past the quota", func() string {
			last := ""
			for range 40 {
				_ = clk.Sleep(context.Background(), time.Second)
				last = classify(client, http.MethodGet, "/alpha/applications/"+id, "")
			}
			return last
		}, "aws:LimitExceededException"},
	}
	for _, s := range steps {
		if got := s.do(); got != s.want {
			t.Errorf("%s: ClassifyFault reads the fake's answer as %q, want %q", s.name, got, s.want)
		}
	}
}
