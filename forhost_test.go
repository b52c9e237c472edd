package grantretry

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/zap"
)

// attemptsTo makes one GET to url and returns how many attempts it made.
func (h *harness) attemptsTo(t *testing.T, url string) Outcome {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return mustError(t, err).Outcome
	}
	resp.Body.Close()
	return mustOutcome(t, resp)
}

// Each funder gets its own policy through one client; ForHost applies on top
// of the Transport's own options whatever their order.
func TestForHostGivesEachFunderItsPolicy(t *testing.T) {
	h := newHarness(t,
		ForHost("registry.state.test", WithBudget(0, time.Minute)),
		WithBudget(2, time.Hour), // after the ForHost: still the Transport's own
		ForHost("portal.test", WithStatusSets([]int{503}, []int{500})),
	)
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(500, "down"))
	for _, tc := range []struct {
		url      string
		attempts int
	}{
		{"https://registry.state.test/v1/filings", 1},
		{"https://REGISTRY.State.test:443/v1/filings", 1}, // any spelling
		{"https://grants.test/v1/applications", 3},
		{"https://portal.test/v1/apply", 1}, // 500 is terminal there
	} {
		if o := h.attemptsTo(t, tc.url); o.Attempts != tc.attempts {
			t.Errorf("%s: %d attempts, want %d", tc.url, o.Attempts, tc.attempts)
		}
	}
}

// host matches any port, host:port that port only (a URL without one has
// its scheme's default), and every match applies in the order given.
func TestForHostPortMatchingAndOrder(t *testing.T) {
	h := newHarness(t,
		ForHost("funder.test", WithBudget(1, time.Hour)),
		ForHost("FUNDER.test:8443", WithBudget(3, time.Hour)),
		ForHost("funder.test:443", WithBudget(0, time.Hour)),
		ForHost("[::1]", WithBudget(2, time.Hour)),
	)
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	for _, tc := range []struct {
		url      string
		attempts int
	}{
		{"https://funder.test/x", 1},      // :443 by default, the last match
		{"http://funder.test/x", 2},       // :80: the host-only rule
		{"https://funder.test:8443/x", 4}, // both, the later wins
		{"http://[::1]:9000/x", 3},
		{"https://other.test/x", 5},
	} {
		if o := h.attemptsTo(t, tc.url); o.Attempts != tc.attempts {
			t.Errorf("%s: %d attempts, want %d", tc.url, o.Attempts, tc.attempts)
		}
	}
}

// A classifier, a breaker and a throttle can be a host's own.
func TestForHostClassifierAndBreakerAreTheHosts(t *testing.T) {
	m := &markerClassifier{}
	h := newHarness(t, WithBudget(0, time.Hour),
		ForHost("soap.test", WithClassifier(m.classify), WithBreaker(1, time.Hour)))
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(500, "<Client/>"))

	if o := h.attemptsTo(t, "https://soap.test/s2s"); o.Disposition != FailedTerminal || o.Reason != "terminal:500;marker:Client" {
		t.Errorf("soap.test: %s %q, want the classifier's terminal verdict", o.Disposition, o.Reason)
	}
	if o := h.attemptsTo(t, "https://json.test/api"); o.Reason != "transient:500" {
		t.Errorf("json.test: %q, want the status sets alone", o.Reason)
	}
	// soap.test's breaker opens on one failed call; json.test's needs five.
	h.mock.RegisterNoResponder(httpmock.NewStringResponder(503, "busy"))
	h.attemptsTo(t, "https://soap.test/s2s")
	if o := h.attemptsTo(t, "https://soap.test/s2s"); o.Disposition != CircuitOpen {
		t.Errorf("soap.test after a failed call: %s, want circuit_open", o.Disposition)
	}
	for i := 0; i < 3; i++ {
		if o := h.attemptsTo(t, "https://json.test/api"); o.Disposition == CircuitOpen {
			t.Fatalf("json.test call %d: circuit_open, but its threshold is the default", i+1)
		}
	}
}

func TestForHostRefusesWhatIsNotAHostOrNotPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"empty", ForHost("", WithBudget(1, time.Second))},
		{"a URL", ForHost("https://funder.test", WithBudget(1, time.Second))},
		{"a path", ForHost("funder.test/api", WithBudget(1, time.Second))},
		{"a wildcard", ForHost("*.funder.test", WithBudget(1, time.Second))},
		{"port zero", ForHost("funder.test:0", WithBudget(1, time.Second))},
		{"port not a number", ForHost("funder.test:https", WithBudget(1, time.Second))},
		{"user info", ForHost("me@funder.test", WithBudget(1, time.Second))},
		{"bad IPv6", ForHost("[::zz]", WithBudget(1, time.Second))},
		{"empty port", ForHost("funder.test:", WithBudget(1, time.Second))},
		{"not a policy option", ForHost("funder.test", WithLogger(zap.NewNop()))},
		{"an invalid policy option", ForHost("funder.test", WithBudget(-1, time.Second))},
		{"ForHost inside ForHost", ForHost("funder.test", ForHost("other.test"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(httpmock.NewMockTransport(), tc.opt)
			// Any host: the Transport as a whole is invalid.
			req, _ := http.NewRequest(http.MethodGet, "https://unrelated.test/", nil)
			if _, err := tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
				t.Errorf("RoundTrip = %v, want ErrInvalidOption", err)
			}
		})
	}
}

// A ForHost matches every spelling of its host a URL may use: case, a
// trailing dot, an IPv6 address written long or short, an IPv4-mapped
// address, a port with a leading zero.
func TestForHostMatchesEverySpellingOfItsHost(t *testing.T) {
	for _, tc := range []struct{ rule, url string }{
		{"[::1]", "http://[::1]:8080/x"},
		{"::1", "http://[::1]/x"},
		{"0:0:0:0:0:0:0:1", "http://[::1]/x"},
		{"[::1]:443", "https://[::1]/x"},
		{"FUNDER.test:443", "https://Funder.TEST/x"},
		{"funder.test", "https://funder.test./x"},
		{"funder.test:443", "https://funder.test:0443/x"},
		{"2001:DB8::1", "http://[2001:db8:0:0::1]/x"},
		{"127.0.0.1", "http://[::ffff:127.0.0.1]/x"},
	} {
		tr := New(nil, ForHost(tc.rule, WithBudget(7, time.Second)))
		if tr.err != nil {
			t.Errorf("ForHost(%q): %v", tc.rule, tr.err)
			continue
		}
		if hs := tr.hosts.forURL(mustURL(t, tc.url)); hs.cfg.maxRetries != 7 {
			t.Errorf("ForHost(%q) does not match %s", tc.rule, tc.url)
		}
	}
}

// TestHostSpellingsPastTheCopiedMap looks up more spellings than the
// copied-on-write aliases hold, from several goroutines at once (run it
// with -race): every spelling finds its host's one state, in the copied
// map or past it, and only maxAliases spellings are copied.
func TestHostSpellingsPastTheCopiedMap(t *testing.T) {
	tr := New(nil, ForHost("host7.test", WithBudget(7, time.Second)))
	const hostsN = 3 * maxAliases
	spell := func(i, v int) string {
		host := "host" + strconv.Itoa(i) + ".test"
		switch v {
		case 1:
			host = strings.ToUpper(host)
		case 2:
			host += ".:443"
		}
		return "https://" + host + "/x"
	}
	states := make([][3]*hostState, hostsN)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range hostsN {
				for v := range 3 {
					u, _ := url.Parse(spell(i, v))
					hs := tr.hosts.forURL(u)
					if g == 0 {
						states[i][v] = hs
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range hostsN {
		for v := range 3 {
			u, _ := url.Parse(spell(i, v))
			if got := tr.hosts.forURL(u); got != states[i][0] || states[i][v] != states[i][0] {
				t.Fatalf("%s has a state of its own, not its host's", spell(i, v))
			}
		}
		if i > 0 && states[i][0] == states[i-1][0] {
			t.Fatalf("host%d and host%d share a state", i, i-1)
		}
	}
	if got := states[7][1].cfg.maxRetries; got != 7 {
		t.Errorf("HOST7.TEST got %d retries, want ForHost's 7", got)
	}
	if n := len(*tr.hosts.aliases.Load()); n != maxAliases {
		t.Errorf("the copied map holds %d spellings, want %d", n, maxAliases)
	}
}
