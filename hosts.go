package grantretry

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
)

// hostState is what one Transport keeps per funder host: its retry policy,
// its circuit breaker and its retry throttle, either nil when turned off.
type hostState struct {
	cfg      *config // the Transport's own, or a copy with ForHost's options
	breaker  *hostBreaker
	throttle *retryThrottle
	fleet    FleetHost // nil without WithFleet
	// attrs name the host on instruments and spans; nil without them.
	attrs []attribute.KeyValue
	sets  measureSets // the attribute sets of its calls' measurements
}

// ForHost applies opts to the calls whose URL host matches host, on top of
// the Transport's own options, whatever their order: a pipeline that talks
// to Grants.gov and three portals through one client gives each funder its
// own policy. host is a host name or IP address, matched without regard to
// case on any port, or host:port, matched on that port only (a URL without
// a port has its scheme's default). Every ForHost that matches applies, in
// the order given, so ForHost("funder.gov:8443", ...) can refine
// ForHost("funder.gov", ...).
//
// Only options of the retry policy may be set per host: WithBackoff,
// WithBudget, WithAttemptTimeout, WithStatusSets, WithClassifier,
// WithBreaker, WithBreakerProbe, WithoutBreaker, WithRetryThrottle,
// WithThrottleRefill and WithoutRetryThrottle. Any other, an invalid one,
// or a host that is not a host name, an IP address or host:port makes the
// Transport invalid like any invalid option.
func ForHost(host string, opts ...Option) Option {
	return optionFunc(func(c *config) {
		r, err := parseHostRule(host)
		if err != nil {
			c.invalid("ForHost(%q): %v", host, err)
			return
		}
		for i, o := range opts {
			if o == nil {
				continue
			}
			if _, ok := o.(policyOption); !ok {
				c.invalid("ForHost(%q): option %d is not part of the retry policy, and cannot be set per host", host, i+1)
				return
			}
			r.opts = append(r.opts, o)
		}
		c.rules = append(c.rules, r)
	})
}

// hostRule is one ForHost: the host it matches, and its options.
type hostRule struct {
	host string // lower case; an IPv6 address without brackets
	port string // "" for any port
	opts []Option
}

// parseHostRule reads a ForHost pattern: host, host:port, [ipv6] or
// [ipv6]:port.
func parseHostRule(s string) (hostRule, error) {
	if s == "" {
		return hostRule{}, errors.New("empty host")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ \t*") {
		return hostRule{}, errors.New("want a host or host:port, not a URL or a pattern")
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		host = s[1 : len(s)-1]
	case strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1:
		var err error
		if host, port, err = net.SplitHostPort(s); err != nil {
			return hostRule{}, err
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return hostRule{}, fmt.Errorf("port %q: want 1 to 65535", port)
		}
	}
	if host == "" || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
		return hostRule{}, fmt.Errorf("%q is not a host name or an IP address", host)
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),;<=>[]{}|^`%", c) >= 0 {
			return hostRule{}, fmt.Errorf("%q is not a host name or an IP address", host)
		}
	}
	return hostRule{host: canonHost(host), port: port}, nil
}

// matches reports whether the rule applies to host and port, each spelled
// as a URL may spell it.
func (r *hostRule) matches(host, port string) bool {
	if r.host != canonHost(host) {
		return false
	}
	if r.port == "" {
		return true
	}
	want, _ := strconv.Atoi(r.port)
	got, err := strconv.Atoi(port)
	return err == nil && got == want // "0443" is 443
}

// canonHost is one spelling of a host: lower case, without a trailing dot,
// and an IP address in its shortest form (an IPv4-mapped IPv6 address as
// IPv4), so that 2001:DB8::1 and [2001:db8:0:0::1] are one host.
func canonHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// checkRules applies each ForHost's options once, on a copy, so that an
// invalid one fails the Transport at New, not at the first call to its
// host.
func (c *config) checkRules() {
	for _, r := range c.rules {
		rc := c.withRule(&r)
		c.errs = append(c.errs, rc.errs...)
	}
}

// forHost is the policy of calls to host and port: c itself when no
// ForHost matches, else a copy with every matching ForHost's options.
func (c *config) forHost(host, port string) *config {
	out := c
	for i := range c.rules {
		if r := &c.rules[i]; r.matches(host, port) {
			out = out.withRule(r)
		}
	}
	return out
}

// withRule returns a copy of c with r's options applied.
func (c *config) withRule(r *hostRule) *config {
	rc := *c
	rc.errs, rc.rules = nil, nil
	for _, o := range r.opts {
		o.apply(&rc)
	}
	return &rc
}

// hosts maps a host to its state, created lazily. Safe for concurrent use:
// state built by a goroutine that loses the LoadOrStore race is dropped (it
// holds no goroutine or timer). The maps grow with the number of distinct
// hosts, and spellings of them, a Transport calls: for a grant pipeline,
// its handful of funders.
//
// Every call looks its URL's spelling up in aliases, a map that is copied
// on write: read with one atomic load and a lookup that hashes two
// strings, where a sync.Map hashed an interface and walked a trie (about
// 450 instructions a call, against about 250). A spelling is added once;
// past maxAliases of them, the rest go to moreAliases, a sync.Map, so that
// a Transport calling thousands of hosts does not copy thousands of
// entries per new one.
type hosts struct {
	byKey       sync.Map // hostKey -> *hostState
	aliases     atomic.Pointer[map[rawHost]*hostState]
	aliasMu     sync.Mutex // serialises the writers of aliases
	moreAliases sync.Map   // rawHost -> *hostState, once aliases is full
	cfg         *config
}

// maxAliases is how many spellings aliases holds.
const maxAliases = 64

// rawHost is a URL's scheme and host as written: a map key that costs no
// allocation to build, unlike the normalised hostKey.
type rawHost struct{ scheme, host string }

// forURL returns the state of u's host.
func (h *hosts) forURL(u *url.URL) *hostState {
	raw := rawHost{u.Scheme, u.Host}
	m := h.aliases.Load()
	if m != nil {
		if hs, ok := (*m)[raw]; ok {
			return hs
		}
		if len(*m) >= maxAliases {
			if v, ok := h.moreAliases.Load(raw); ok {
				return v.(*hostState)
			}
		}
	}
	hs := h.get(hostKey(u))
	h.addAlias(raw, hs)
	return hs
}

// addAlias records that raw spells the host whose state is hs.
func (h *hosts) addAlias(raw rawHost, hs *hostState) {
	h.aliasMu.Lock()
	defer h.aliasMu.Unlock()
	var old map[rawHost]*hostState
	if m := h.aliases.Load(); m != nil {
		old = *m
	}
	if _, ok := old[raw]; ok {
		return
	}
	if len(old) >= maxAliases {
		h.moreAliases.Store(raw, hs)
		return
	}
	m := make(map[rawHost]*hostState, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[raw] = hs
	h.aliases.Store(&m)
}

// get returns the state of the host with the given key.
func (h *hosts) get(key string) *hostState {
	if v, ok := h.byKey.Load(key); ok {
		return v.(*hostState)
	}
	cfg := h.cfg
	if len(cfg.rules) > 0 {
		host, port, _ := net.SplitHostPort(key[strings.Index(key, "://")+3:])
		cfg = cfg.forHost(host, port)
	}
	hs := &hostState{cfg: cfg}
	if cfg.breakerOn {
		hs.breaker = newHostBreaker(key, cfg)
	}
	if cfg.throttleOn {
		hs.throttle = newRetryThrottle(cfg.maxTokens, cfg.tokenRatio, cfg.refill, cfg.clock)
	}
	if cfg.fleet != nil && (cfg.breakerOn || cfg.throttleOn) {
		hs.fleet = cfg.fleet.Host(key, cfg.fleetPolicy())
	}
	if cfg.meterProvider != nil || cfg.tracerProvider != nil {
		hs.attrs = hostAttrs(key)
	}
	v, _ := h.byKey.LoadOrStore(key, hs)
	return v.(*hostState)
}

// hostKey names a funder host: lower-case scheme and host (see canonHost),
// with the scheme's default port made explicit, so https://Funder.gov,
// https://funder.gov.:443 and https://funder.gov:0443 share one breaker
// and one throttle.
func hostKey(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := canonHost(u.Hostname())
	port := u.Port()
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n) // "0443" is 443
	}
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
