package fakesimpler

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxRequestBytes bounds the body the API reads.
const maxRequestBytes = 1 << 20

// answer is what the API gives the gateway for one request.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	applied bool // the request changed something (an application started or submitted)
}

// serveHTTP is the gateway: the key, the usage plan's throttle and quota,
// then the API within the integration timeout.
func (a *API) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// The whole body is read first, so that nothing is carried out for a
	// request the client had not finished sending.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		hangUp(w)
		return
	}
	if g := a.gate(r); g != nil {
		writeAnswer(w, g)
		return
	}
	// From here the API has the request, and carries it out whether or
	// not anyone waits for the answer: the gateway's integration does not
	// call the API off when the client goes away, nor after its own
	// timeout.
	a.busy.Add(1)
	backend := r.Clone(context.WithoutCancel(r.Context()))
	a.mu.Lock()
	work := a.work
	a.mu.Unlock()
	timeout := a.cfg.IntegrationTimeout
	if work >= timeout {
		// The gateway waits out its timeout and answers 504; the API
		// finishes the work after that answer went out.
		_ = a.cfg.Sleep(backend.Context(), timeout)
		a.mu.Lock()
		a.ledger.TimedOut++
		a.mu.Unlock()
		writeAnswer(w, gatewayAnswer(http.StatusGatewayTimeout, "", `{"message": "Endpoint request timed out"}`))
		go func() {
			defer a.busy.Done()
			if rest := work - timeout; rest > 0 {
				_ = a.cfg.Sleep(backend.Context(), rest)
			}
			a.serveAPI(backend, body)
		}()
		return
	}
	defer a.busy.Done()
	if work > 0 {
		_ = a.cfg.Sleep(backend.Context(), work)
	}
	ans := a.serveAPI(backend, body)
	drop := false
	if ans.applied {
		a.mu.Lock()
		drop = a.dropThis()
		a.mu.Unlock()
	}
	if drop {
		hangUp(w)
		return
	}
	writeAnswer(w, ans) // to a client that went away, it goes nowhere
}

// gate is the gateway's own answer to r, nil when it passes r to the API.
func (a *API) gate(r *http.Request) *answer {
	key := r.Header.Get("X-API-Key")
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.knownKey(key) {
		a.ledger.Forbidden++
		return gatewayAnswer(http.StatusForbidden, "ForbiddenException", `{"message":"Forbidden"}`)
	}
	if a.cfg.RateLimit > 0 {
		b := a.buckets[key]
		if b == nil {
			b = &bucket{tokens: float64(a.cfg.BurstLimit), last: now}
			a.buckets[key] = b
		}
		if !b.take(now, a.cfg.RateLimit, float64(a.cfg.BurstLimit)) {
			a.ledger.Throttled++
			return gatewayAnswer(http.StatusTooManyRequests, "TooManyRequestsException", `{"message":"Too Many Requests"}`)
		}
	}
	if a.cfg.MonthlyQuota > 0 {
		month := now.UTC().Format("2006-01")
		q := a.quota[key]
		if q.month != month {
			q = quotaCount{month: month}
		}
		if q.n >= a.cfg.MonthlyQuota {
			a.ledger.OverQuota++
			return gatewayAnswer(http.StatusTooManyRequests, "LimitExceededException", `{"message":"Limit Exceeded"}`)
		}
		q.n++
		a.quota[key] = q
	}
	return nil
}

func (a *API) knownKey(key string) bool {
	if key == "" {
		return false
	}
	for _, k := range a.cfg.APIKeys {
		if k == key {
			return true
		}
	}
	return false
}

// bucket is a usage plan's token bucket for one key: burst tokens, refilled
// at the rate limit.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(burst, b.tokens+el.Seconds()*rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// quotaCount is the requests one key made in one calendar month (UTC).
type quotaCount struct {
	month string
	n     int
}

// gatewayAnswer is one of API Gateway's default gateway responses.
func gatewayAnswer(status int, errorType, body string) *answer {
	h := http.Header{"Content-Type": {"application/json"}}
	if errorType != "" {
		h.Set("X-Amzn-Errortype", errorType)
	}
	return &answer{status: status, header: h, body: []byte(body)}
}

func writeAnswer(w http.ResponseWriter, ans *answer) {
	for k, vs := range ans.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(ans.body)))
	w.WriteHeader(ans.status)
	_, _ = io.Copy(w, bytes.NewReader(ans.body))
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (never on HTTP/1.1): aborting the handler drops
		// the connection too.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
