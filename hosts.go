package grantretry

import (
	"net"
	"net/url"
	"strings"
	"sync"
)

// hostState is what one Transport keeps per funder host: its circuit
// breaker and its retry throttle, either nil when turned off.
type hostState struct {
	breaker  *hostBreaker
	throttle *retryThrottle
}

// hosts maps a host to its state, created lazily. Safe for concurrent use:
// the maps are sync.Maps, and state built by a goroutine that loses the
// LoadOrStore race is dropped (it holds no goroutine or timer). The maps
// grow with the number of distinct hosts, and spellings of them, a
// Transport calls: for a grant pipeline, its handful of funders.
type hosts struct {
	byKey   sync.Map // hostKey -> *hostState
	byAlias sync.Map // rawHost (the URL's own spelling) -> *hostState
	cfg     *config
}

// rawHost is a URL's scheme and host as written: a map key that costs no
// allocation to build, unlike the normalised hostKey.
type rawHost struct{ scheme, host string }

// forURL returns the state of u's host.
func (h *hosts) forURL(u *url.URL) *hostState {
	raw := rawHost{u.Scheme, u.Host}
	if v, ok := h.byAlias.Load(raw); ok {
		return v.(*hostState)
	}
	hs := h.get(hostKey(u))
	h.byAlias.Store(raw, hs)
	return hs
}

// get returns the state of the host with the given key.
func (h *hosts) get(key string) *hostState {
	if v, ok := h.byKey.Load(key); ok {
		return v.(*hostState)
	}
	hs := &hostState{}
	if h.cfg.breakerOn {
		hs.breaker = newHostBreaker(key, h.cfg)
	}
	if h.cfg.throttleOn {
		hs.throttle = newRetryThrottle(h.cfg.maxTokens, h.cfg.tokenRatio, h.cfg.refill, h.cfg.clock)
	}
	v, _ := h.byKey.LoadOrStore(key, hs)
	return v.(*hostState)
}

// hostKey names a funder host: lower-case scheme and host, with the
// scheme's default port made explicit, so https://Funder.gov and
// https://funder.gov:443 share one breaker and one throttle.
func hostKey(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
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
