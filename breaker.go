package grantretry

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Defaults of the per-host circuit breaker (see WithBreaker).
const (
	// DefaultBreakerThreshold is how many consecutive transient failures
	// against one host open its breaker: it opens on the 5th.
	DefaultBreakerThreshold uint32 = 5
	// DefaultBreakerCooldown is how long an open breaker refuses calls
	// before it lets one probe through (half-open).
	DefaultBreakerCooldown = 60 * time.Second
)

// What an attempt tells the breaker. Only transient faults are the funder's
// failures; a terminal answer (a 422, a 404) shows the funder is up; the
// caller's cancellation and terminal transport errors (a bad certificate, a
// malformed URL) say nothing about the funder and are left out.
var (
	errBreakerFailure  = errors.New("grantretry: transient failure")
	errBreakerExcluded = errors.New("grantretry: excluded from breaker counts")
)

// breakers holds one circuit breaker per funder host (scheme, host and port),
// created lazily. Safe for concurrent use: the map is a sync.Map, and a
// breaker created by a goroutine that loses the LoadOrStore race is simply
// dropped (a gobreaker holds no goroutine or timer).
type breakers struct {
	threshold uint32
	cooldown  time.Duration
	m         sync.Map // hostKey -> *hostBreaker
}

// hostBreaker is one host's breaker, plus the state changes it reported and
// the Transport has not logged yet.
type hostBreaker struct {
	host string
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]

	// gobreaker calls OnStateChange with its own lock held, so the change
	// is only queued here, and logged by the Transport after Allow or done
	// has returned. hasPending lets the hot path skip mu when nothing is
	// queued. mu guards pending; it is never held while calling out.
	hasPending atomic.Bool
	mu         sync.Mutex
	pending    []stateChange
}

// stateChange is one breaker transition.
type stateChange struct{ from, to gobreaker.State }

func (b *breakers) get(host string) *hostBreaker {
	if v, ok := b.m.Load(host); ok {
		return v.(*hostBreaker)
	}
	v, _ := b.m.LoadOrStore(host, b.newHostBreaker(host))
	return v.(*hostBreaker)
}

func (b *breakers) newHostBreaker(host string) *hostBreaker {
	hb := &hostBreaker{host: host}
	threshold := b.threshold
	hb.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        host,
		MaxRequests: 1, // one half-open probe
		Timeout:     b.cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= threshold
		},
		IsExcluded: func(err error) bool { return err == errBreakerExcluded },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			hb.mu.Lock()
			hb.pending = append(hb.pending, stateChange{from: from, to: to})
			hb.mu.Unlock()
			hb.hasPending.Store(true)
		},
	})
	return hb
}

// takeChanges returns and clears the queued state changes.
func (hb *hostBreaker) takeChanges() []stateChange {
	if !hb.hasPending.Load() {
		return nil
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	out := hb.pending
	hb.pending = nil
	hb.hasPending.Store(false)
	return out
}

// isOpen reports whether the breaker would refuse an attempt now.
func (hb *hostBreaker) isOpen() bool {
	return hb.cb.State() == gobreaker.StateOpen
}

// hostKey names a funder host for its breaker: lower-case scheme and host,
// with the scheme's default port made explicit, so https://Funder.gov and
// https://funder.gov:443 share one breaker.
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
