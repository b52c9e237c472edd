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

// hosts maps a host key to its state, created lazily. Safe for concurrent
// use: the map is a sync.Map, and state built by a goroutine that loses the
// LoadOrStore race is dropped (it holds no goroutine or timer). The map
// grows with the number of distinct hosts a Transport calls, which for a
// grant pipeline is its handful of funders.
type hosts struct {
	m   sync.Map // hostKey -> *hostState
	cfg *config
}

func (h *hosts) get(key string) *hostState {
	if v, ok := h.m.Load(key); ok {
		return v.(*hostState)
	}
	hs := &hostState{}
	if h.cfg.breakerOn {
		hs.breaker = newHostBreaker(key, h.cfg.threshold, h.cfg.cooldown)
	}
	if h.cfg.throttleOn {
		hs.throttle = newRetryThrottle(h.cfg.maxTokens, h.cfg.tokenRatio)
	}
	v, _ := h.m.LoadOrStore(key, hs)
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
