package grantretry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A header value comes back in error text quoted as often as bare: as
// fmt's %q and %+q and strconv.Quote write it, as encoding/json writes it
// (with and without its HTML escapes), and trimmed of the spaces around
// it. Each of these is scrubbed.
func TestHeaderValuesAreScrubbedAsGoAndJSONQuoteThem(t *testing.T) {
	vals := map[string]string{
		"If-Match":      `"v7-applic-991"`,
		"X-Remote-User": `CORP\jsmith`,
		"X-Applicant":   "Smith & Sons <Trust>",
		"X-Contact":     "Zoë Müller-Strauß",
		"X-Padded":      "  padded-value-7731 ",
	}
	jsonOf := func(v string, html bool) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(v)
		return strings.TrimSpace(b.String())
	}
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		var parts []string
		for k := range vals {
			v := r.Header.Get(k)
			parts = append(parts, fmt.Sprintf("%s %q %+q %s %s %s", k, v, v, strconv.Quote(v), jsonOf(v, true), jsonOf(v, false)), fmt.Sprintf("%q", strings.TrimSpace(v)))
		}
		return nil, fmt.Errorf("proxy refused %s", strings.Join(parts, "; "))
	}), WithClock(newFakeClock()), WithBudget(0, time.Hour))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	for k, v := range vals {
		req.Header[k] = []string{v}
	}
	_, err := tr.RoundTrip(req)
	if err == nil {
		t.Fatal("the call succeeded")
	}
	msg := err.Error()
	for k, v := range vals {
		for _, q := range []string{fmt.Sprintf("%q", v), fmt.Sprintf("%+q", v), jsonOf(v, true), jsonOf(v, false), fmt.Sprintf("%q", strings.TrimSpace(v))} {
			if inner := strings.Trim(q, `"`); strings.Contains(msg, inner) {
				t.Errorf("Error() holds %s's value as %s", k, inner)
			}
		}
		if !strings.Contains(msg, k) {
			t.Errorf("Error() lost the header name %s: %s", k, msg)
		}
	}
}

// jsonQuotingSink's error quotes the letter as JSON, as a store that
// echoes what it refused may.
type jsonQuotingSink struct{}

func (jsonQuotingSink) PutDeadLetter(_ context.Context, l *Letter) error {
	b, _ := json.Marshal(l)
	return fmt.Errorf("letter store refused %s", b)
}

// A sink's error that quotes the letter as JSON holds its header values
// JSON-escaped; the recorded error holds none of them.
func TestSinkErrorQuotingTheLetterAsJSONIsScrubbedOfHeaderValues(t *testing.T) {
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}), WithClock(newFakeClock()), WithBudget(1, time.Hour), WithDeadLetter(jsonQuotingSink{}))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	req.Header.Set("X-Applicant", "Smith & Sons <Trust>")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	o := mustOutcome(t, resp)
	if o.RecordErr == nil {
		t.Fatal("the sink's refusal was not recorded")
	}
	if s := o.RecordErr.Error(); strings.Contains(s, `Smith \u0026 Sons \u003cTrust\u003e`) || strings.Contains(s, "Smith & Sons") {
		t.Errorf("RecordErr holds X-Applicant's value: %s", s)
	}
}
