package grantretry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
)

// answer is one scripted response: a status and a body.
type answer struct {
	status int
	body   string
}

// funderStub answers each funder host from a script of its own, one answer
// per request, the last repeated. Safe for concurrent use.
type funderStub struct {
	mu      sync.Mutex
	scripts map[string][]answer
}

func (f *funderStub) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	script := f.scripts[req.URL.Hostname()]
	a := script[0]
	if len(script) > 1 {
		f.scripts[req.URL.Hostname()] = script[1:]
	}
	return &http.Response{StatusCode: a.status, Header: http.Header{},
		Body: io.NopCloser(strings.NewReader(a.body)), Request: req}, nil
}

const soapClientFault = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>
<soap:Fault><faultcode>soap:Client</faultcode><faultstring>SF424 is incomplete</faultstring></soap:Fault>
</soap:Body></soap:Envelope>`

// One Transport for a pipeline that submits to three kinds of funder, each
// with the profile docs/choosing-budgets.md works out for it: Grants.gov
// S2S (SOAP faults, large uploads, long maintenance windows), a JSON portal
// with a published ceiling of 10 requests a second, and a state registry
// called about once a minute. Each ForHost applies to its host only, on
// top of the Transport's defaults.
func ExampleForHost() {
	funders := &funderStub{scripts: map[string][]answer{
		"soap.registry.example": {{500, soapClientFault}},
		"portal.example.org":    {{429, ""}, {201, ""}},
		"registry.example.gov":  {{503, ""}, {503, ""}, {200, ""}},
	}}
	tr := grantretry.New(funders,
		grantretry.WithClock(noWait{}), // skips the waits; leave the default clock in production
		grantretry.ForHost("soap.registry.example",
			grantretry.WithClassifier(grantretry.ClassifySOAPFault),
			grantretry.WithAttemptTimeout(5*time.Minute),
			grantretry.WithBackoff(5*time.Second, time.Minute),
			grantretry.WithBudget(3, 25*time.Minute),
			grantretry.WithBreaker(5, 2*time.Minute),
			grantretry.WithBreakerProbe(15*time.Second),
		),
		grantretry.ForHost("portal.example.org",
			grantretry.WithBackoff(time.Second, 30*time.Second),
			grantretry.WithBudget(4, time.Minute),
		),
		grantretry.ForHost("registry.example.gov",
			grantretry.WithBackoff(2*time.Second, 30*time.Second),
			grantretry.WithBudget(4, 2*time.Minute),
			grantretry.WithThrottleRefill(time.Minute),
		),
	)
	client := &http.Client{Transport: tr}

	for _, url := range []string{
		"https://soap.registry.example/services/FilingPort",
		"https://portal.example.org/v1/applications",
		"https://registry.example.gov/filings",
	} {
		ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte("application")))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		resp.Body.Close()
		o, _ := grantretry.OutcomeOf(resp)
		fmt.Println(req.URL.Hostname(), o.Disposition, o.Attempts, o.Reason)
	}
	// Output:
	// soap.registry.example failed_terminal 1 terminal:500;soap:Client
	// portal.example.org succeeded 2 ok:201
	// registry.example.gov succeeded 3 ok:200
}
