package grantretry

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// hostState is what one Transport keeps per funder host: its retry policy,
// its circuit breaker and its retry throttle, either nil when turned off.
type hostState struct {
	cfg      *config // the Transport's own, or a copy with ForHost's options
	breaker  *hostBreaker
	throttle *retryThrottle
	fleet    FleetHost // nil without WithFleet
	// heard is the fleet's state of the host as its calls last heard it
	// (FleetOpen or FleetClosed; FleetUnknown if never), with the bit
	// heardCarried once carried into the local breaker after the fleet
	// was lost (see call.carryFleet).
	heard atomic.Int32
	// fleetLog is fleet as a FleetChangeLog, nil if it is not one;
	// fleetQuota as a FleetQuota.
	fleetLog   FleetChangeLog
	fleetQuota FleetQuota
	// quota is the host's quota: whether its calls are held (quota.go).
	quota hostQuota
	// attrs name the host on instruments, spanAttrs on spans; nil
	// without them. attrs say OtherHost for a host past MaxHostSeries.
	attrs, spanAttrs []attribute.KeyValue
	sets             *measureSets // its calls' attribute sets
	other            *otherSeries // the series it shares, nil for a host named on instruments
	key              string
	raws             []rawHost // its spellings in aliases or moreAliases; under hosts.mu
	// events is what the attempts to the host have shown of the inner
	// stack beneath them, for safe methods and for the others apart (see
	// call.evidence).
	events [2]traceEvidence

	// inflight counts the calls that hold the state, from forURL to the
	// end of RoundTrip; evictedMark once it is dropped, so that a call
	// that finds it in a copy of aliases made before goes to the slow
	// path. used is the Clock time, in Unix ns, of the start of the
	// latest call to end, or of the state's making. Both are written by
	// every call: they sit on a cache line of their own, away from the
	// fields every call only reads.
	_        [64]byte
	inflight atomic.Int64
	used     atomic.Int64
	_        [48]byte
}

// evictedMark is inflight once the state is dropped: far enough below 0
// that no number of calls adding 1 brings it back up.
const evictedMark = math.MinInt64 / 2

// hold counts a call in; false if the state has been dropped.
func (hs *hostState) hold() bool {
	if hs.inflight.Add(1) > 0 {
		return true
	}
	hs.inflight.Add(-1)
	return false
}

// releaseHost counts the call out of its host's state, and notes when it
// started: the Clock reading the call made already, so that marking the
// host used costs no reading of its own.
func (c *call) releaseHost() {
	hs := c.host
	if hs == nil {
		return
	}
	c.quotaGiveBack()
	if !c.start.IsZero() {
		if ns := c.start.UnixNano(); ns > hs.used.Load() {
			hs.used.Store(ns)
		}
	}
	hs.inflight.Add(-1)
}

// atRest reports whether the state is as a new one would be at now: not
// in quota, no fleet breaker known open, no breaker, or one closed with no failure
// counted and no change left to log, and no throttle, or a full one. Dropping such a state changes no
// decision: the host's next call makes one just like it.
func (hs *hostState) atRest(now time.Time) bool {
	if hs.fleet != nil && hs.fleet.State() == FleetOpen {
		// The fleet's breaker is open: a state made anew would not
		// know it until its Coordinator heard, and would let a call
		// through to a funder the fleet knows is down.
		return false
	}
	if hs.quota.holdsAt(now) {
		// A state made anew would send the calls the quota holds.
		return false
	}
	if hb := hs.breaker; hb != nil {
		s := hb.spell.Load()
		if hb.gate.Load() != 0 || s == nil || s.failing.Load() || hb.hasPending.Load() {
			return false
		}
	}
	return hs.throttle.fullAt(now)
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
// Transport invalid like any invalid option. [WithCallOptions] sets the
// policy of one call, over its host's.
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
			switch o.(type) {
			case policyOption, hostOption:
			default:
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

// Bounds of the state a Transport keeps per host (docs/policy.md,
// "Per-host state"). A pipeline calls a handful of funders; these bound
// what a funder that sends each call to a new host (a redirect to
// 127.a.b.c, a host name per tenant) can make a Transport hold.
const (
	// MaxHosts is the most hosts whose state (policy, breaker, throttle,
	// spellings) one Transport keeps, besides those with a call in
	// flight, which it never drops. Past it, the insert of a new host
	// drops the least recently used hosts, at rest first (see HostIdle),
	// down to three quarters of MaxHosts: a host dropped with an open
	// breaker or a drained bucket starts again closed and full at its
	// next call, and one dropped in quota (possible only when more than
	// three quarters of MaxHosts are not at rest) forgets its hold and
	// sends its next call, unless its [FleetQuota] still holds it.
	MaxHosts = 4096
	// HostIdle is how long, on the Transport's Clock, the state of a host
	// at rest is kept with no call: a breaker closed with no failure
	// counted and a full retry throttle, which a new state would match.
	// A host whose breaker is open or counting failures, whose bucket is
	// not full, or which is in quota (a funder's NotBefore that has
	// passed no longer counts), is kept whatever its idleness, below
	// MaxHosts.
	HostIdle = 10 * time.Minute
	// MaxHostSeries is how many hosts (host keys) a Transport names on
	// its instruments: the first it meets. The others are reported
	// together, as server.address OtherHost with no server.port, so that
	// a metrics backend holds a bounded number of series. Spans name
	// every host.
	MaxHostSeries = 256
	// OtherHost is the server.address of the hosts past MaxHostSeries.
	OtherHost = "_other"
)

// hosts maps a host to its state, created lazily. Safe for concurrent use.
//
// Every call looks its URL's spelling up in aliases, a map that is copied
// on write: read with one atomic load and a lookup that hashes two
// strings, where a sync.Map hashed an interface and walked a trie (about
// 450 instructions a call, against about 250). A spelling is added once;
// past maxAliases of them, the rest go to moreAliases, a sync.Map, so that
// a Transport calling thousands of hosts does not copy thousands of
// entries per new one. Each state keeps at most maxSpellings spellings; a
// host spelled more ways than that takes the slow path for the rest.
//
// The states are bounded (MaxHosts, HostIdle): the insert of a new host
// sweeps them once their number has doubled since the last sweep, so the
// cost is amortised over the inserts, and a call to a known host takes no
// lock. A call holds its host's state from forURL to the end of
// RoundTrip (hostState.inflight), and a state held is never dropped: no
// call reports to a state its host no longer has.
type hosts struct {
	aliases     atomic.Pointer[map[rawHost]*hostState]
	moreAliases sync.Map // rawHost -> *hostState, once aliases is full

	// mu guards the fields below and serialises the writers of aliases
	// and moreAliases. It is never held while calling the Clock or the
	// Fleet, which are the caller's code.
	mu      sync.Mutex
	byKey   map[string]*hostState
	named   map[string]bool         // host keys with series of their own
	other   map[string]*otherSeries // by scheme: the OtherHost series
	sweepAt int                     // the number of states at which an insert sweeps
	max     int                     // MaxHosts; tests lower it
	cfg     *config
}

// otherSeries is what the hosts past MaxHostSeries share on instruments.
type otherSeries struct {
	attrs []attribute.KeyValue
	sets  *measureSets
}

const (
	// maxAliases is how many spellings aliases holds.
	maxAliases = 64
	// maxSpellings is how many spellings one state is found by.
	maxSpellings = 8
	// minSweep is the fewest states at which an insert sweeps.
	minSweep = 64
)

// rawHost is a URL's scheme and host as written: a map key that costs no
// allocation to build, unlike the normalised hostKey.
type rawHost struct{ scheme, host string }

// forURL returns the state of u's host, held for the call (see
// call.releaseHost).
func (h *hosts) forURL(u *url.URL) *hostState {
	raw := rawHost{u.Scheme, u.Host}
	if m := h.aliases.Load(); m != nil {
		if hs, ok := (*m)[raw]; ok && hs.hold() {
			return hs
		}
	}
	if v, ok := h.moreAliases.Load(raw); ok {
		if hs := v.(*hostState); hs.hold() {
			return hs
		}
	}
	key := hostKey(u)
	if hs := h.adopt(key, raw, nil, time.Time{}, true); hs != nil {
		return hs
	}
	now := h.cfg.clock.Now()
	return h.adopt(key, raw, h.build(key), now, true)
}

// get returns the state of the host with the given key, without holding
// it: for tests and diagnostics.
func (h *hosts) get(key string) *hostState {
	if hs := h.adopt(key, rawHost{}, nil, time.Time{}, false); hs != nil {
		return hs
	}
	now := h.cfg.clock.Now()
	return h.adopt(key, rawHost{}, h.build(key), now, false)
}

// adopt returns the state of key, held if hold, and records raw as one of
// its spellings (unless raw is zero). A key without a state gets fresh,
// made at now, once the states are swept; with fresh nil, adopt returns
// nil instead.
func (h *hosts) adopt(key string, raw rawHost, fresh *hostState, now time.Time, hold bool) *hostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.byKey[key]
	if hs == nil {
		if fresh == nil {
			return nil
		}
		if h.byKey == nil {
			h.byKey = make(map[string]*hostState)
		}
		h.sweep(now)
		hs = fresh
		hs.used.Store(now.UnixNano())
		h.name(hs)
		h.byKey[key] = hs
	}
	// A state in byKey is never marked dropped: it is marked under mu,
	// and unmarked before mu is released unless it is removed.
	if hold {
		hs.hold()
	}
	if raw != (rawHost{}) {
		h.addAlias(raw, hs)
	}
	return hs
}

// build makes the state of the host with the given key. It holds no
// goroutine or timer, so one that loses a race is simply dropped.
func (h *hosts) build(key string) *hostState {
	cfg := h.cfg
	if len(cfg.rules) > 0 {
		host, port, _ := net.SplitHostPort(key[strings.Index(key, "://")+3:])
		cfg = cfg.forHost(host, port)
	}
	hs := &hostState{cfg: cfg, key: key}
	if cfg.breakerOn {
		hs.breaker = newHostBreaker(key, cfg)
	}
	if cfg.throttleOn {
		hs.throttle = newRetryThrottle(cfg.maxTokens, cfg.tokenRatio, cfg.refill, cfg.clock)
	}
	if cfg.fleet != nil && (cfg.breakerOn || cfg.throttleOn) {
		hs.fleet = cfg.fleet.Host(key, cfg.fleetPolicy())
		hs.fleetLog, _ = hs.fleet.(FleetChangeLog)
		if fq, ok := hs.fleet.(FleetQuota); ok {
			hs.fleetQuota = fq
			hs.quota.watch.Store(quotaWatchFleet)
		}
	}
	if cfg.tracerProvider != nil {
		hs.spanAttrs = hostAttrs(key)
	}
	return hs
}

// name gives a new state its attributes on instruments: its own for the
// first MaxHostSeries host keys, OtherHost's for the rest. h.mu is held.
func (h *hosts) name(hs *hostState) {
	if h.cfg.meterProvider == nil {
		return
	}
	if h.named[hs.key] || len(h.named) < MaxHostSeries {
		if h.named == nil {
			h.named = make(map[string]bool)
		}
		h.named[hs.key] = true
		hs.attrs = hs.spanAttrs
		if hs.attrs == nil {
			hs.attrs = hostAttrs(hs.key)
		}
		hs.sets = &measureSets{}
		return
	}
	scheme := hs.key[:strings.Index(hs.key, "://")]
	o := h.other[scheme]
	if o == nil {
		if h.other == nil {
			h.other = make(map[string]*otherSeries)
		}
		o = &otherSeries{
			attrs: []attribute.KeyValue{keyServerAddress.String(OtherHost), keyScheme.String(scheme)},
			sets:  &measureSets{},
		}
		h.other[scheme] = o
	}
	hs.attrs, hs.sets, hs.other = o.attrs, o.sets, o
}

// addAlias records that raw spells the host whose state is hs. h.mu is
// held.
func (h *hosts) addAlias(raw rawHost, hs *hostState) {
	var old map[rawHost]*hostState
	if m := h.aliases.Load(); m != nil {
		old = *m
	}
	if _, ok := old[raw]; ok || len(hs.raws) >= maxSpellings {
		return
	}
	if _, ok := h.moreAliases.Load(raw); ok {
		return
	}
	hs.raws = append(hs.raws, raw)
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

// sweep drops states, if there are sweepAt of them: those at rest and
// idle for HostIdle, then, while MaxHosts or more are left, the least
// recently used, at rest first, down to three quarters of MaxHosts. A
// state held by a call is never dropped. h.mu is held.
func (h *hosts) sweep(now time.Time) {
	if len(h.byKey) < h.sweepAt {
		return
	}
	limit := h.max
	if limit <= 0 {
		limit = MaxHosts
	}
	idleSince := now.Add(-HostIdle).UnixNano()
	type kept struct {
		hs   *hostState
		rest bool
		used int64
	}
	var left []kept
	dropped := false
	for _, hs := range h.byKey {
		if hs.inflight.Load() != 0 {
			continue
		}
		rest, used := hs.atRest(now), hs.used.Load()
		if rest && used <= idleSince && h.drop(hs, now, true) {
			dropped = true
			continue
		}
		left = append(left, kept{hs, rest, used})
	}
	if len(h.byKey) >= limit {
		slices.SortFunc(left, func(a, b kept) int {
			if a.rest != b.rest {
				if a.rest {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.used, b.used)
		})
		for _, k := range left {
			if len(h.byKey) <= limit*3/4 {
				break
			}
			if h.drop(k.hs, now, false) {
				dropped = true
			}
		}
	}
	h.sweepAt = min(max(2*len(h.byKey), minSweep), limit)
	if len(h.byKey) >= h.sweepAt { // all held by calls
		h.sweepAt = len(h.byKey) + max(limit/4, 1)
	}
	if dropped {
		h.pruneAliases()
	}
}

// drop removes hs unless a call holds it or, with rest, unless it is not
// at rest: judged again once no call can take it, since a call may have
// come and gone since the sweep looked. h.mu is held.
func (h *hosts) drop(hs *hostState, now time.Time, rest bool) bool {
	if !hs.inflight.CompareAndSwap(0, evictedMark) {
		return false
	}
	if rest && (!hs.atRest(now) || hs.used.Load() > now.Add(-HostIdle).UnixNano()) {
		hs.inflight.Add(-evictedMark)
		return false
	}
	delete(h.byKey, hs.key)
	for _, r := range hs.raws {
		h.moreAliases.Delete(r)
	}
	return true
}

// pruneAliases copies aliases without the dropped states. h.mu is held.
func (h *hosts) pruneAliases() {
	p := h.aliases.Load()
	if p == nil {
		return
	}
	m := make(map[rawHost]*hostState, len(*p))
	for k, v := range *p {
		if v.inflight.Load() >= 0 {
			m[k] = v
		}
	}
	if len(m) != len(*p) {
		h.aliases.Store(&m)
	}
}

// all returns the states kept now.
func (h *hosts) all() []*hostState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*hostState, 0, len(h.byKey))
	for _, hs := range h.byKey {
		out = append(out, hs)
	}
	return out
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
