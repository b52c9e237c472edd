// Package storetest checks that an operator.Store keeps its contract, and
// that the operator's core (selection, pacing, workers, the stop, the
// summary, list, show and retire) does over it what both tools promise:
// Run is the one suite that the directory's store and the fleet's run.
package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// Funder is a loopback funder that has recovered: it answers 201 to every
// request, but 422 to one sent to a path under /reject, and records each
// by its Idempotency-Key, with when it came.
type Funder struct {
	*httptest.Server
	mu       sync.Mutex
	got      map[string]int // Idempotency-Key -> requests
	arrivals []time.Time
	inFlight int
	maxIn    int
	// Hold, if set before the first request, is how long each request
	// is held before it is answered.
	Hold time.Duration
	// OnRequest, if set, is called with the count of requests so far (1
	// for the first) and the request as each arrives, before it is
	// answered.
	OnRequest func(n int, r *http.Request)
}

// NewFunder starts a Funder, closed when t ends.
func NewFunder(t testing.TB) *Funder {
	f := &Funder{got: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *Funder) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.got[r.Header.Get(grantretry.HeaderIdempotencyKey)]++
	f.arrivals = append(f.arrivals, time.Now())
	n := len(f.arrivals)
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	on, hold := f.OnRequest, f.Hold
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if on != nil {
		on(n, r)
	}
	if hold > 0 {
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
			return
		}
	}
	if len(r.URL.Path) >= len("/reject") && r.URL.Path[:len("/reject")] == "/reject" {
		http.Error(w, "budget narrative missing", http.StatusUnprocessableEntity)
		return
	}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"receipt":"R"}`)
}

// Got returns how many requests carried each Idempotency-Key.
func (f *Funder) Got() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.got))
	for k, v := range f.got {
		out[k] = v
	}
	return out
}

// Requests returns how many requests came.
func (f *Funder) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.arrivals)
}

// Arrivals returns when each request came, in order.
func (f *Funder) Arrivals() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.arrivals...)
}

// MaxInFlight returns the most requests it held at once.
func (f *Funder) MaxInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxIn
}

// Letter returns a valid letter id, owed to url: a POST with a body, its
// own Idempotency-Key and submission "GRANT-"+id, last answered 503,
// created at created. The Kinds below change it.
func Letter(id, url string, created time.Time) *grantretry.Letter {
	body := []byte(`{"applicant":"Riverside Food Bank","letter":"` + id + `"}`)
	sum := sha256.Sum256(body)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             id,
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopRetriesSpent,
		Reason:         "transient:503",
		Method:         http.MethodPost,
		URL:            url,
		Header:         http.Header{"Content-Type": {"application/json"}},
		Body:           body,
		BodySHA256:     hex.EncodeToString(sum[:]),
		BodyBytes:      int64(len(body)),
		IdempotencyKey: grantretry.IdempotencyKey("GRANT-"+id, body),
		CorrelationID:  "corr-" + id,
		SubmissionID:   "GRANT-" + id,
		Attempts:       5,
		LastStatus:     503,
		FirstAttempt:   created.Add(-40 * time.Second),
		LastAttempt:    created.Add(-time.Second),
		Created:        created,
	}
}

// Refused makes l a letter the funder refused for good: answered 422,
// verdict terminal:422.
func Refused(l *grantretry.Letter) *grantretry.Letter {
	l.Reason, l.LastStatus = "terminal:422", 422
	return l
}

// NotDue makes l owed by a quota until notBefore.
func NotDue(l *grantretry.Letter, notBefore time.Time) *grantretry.Letter {
	l.StopReason, l.Reason, l.LastStatus, l.NotBefore = grantretry.StopOwedLater, "owed:429;quota", 429, notBefore
	return l
}

// Late makes l late: its closing time, dueBy, has passed.
func Late(l *grantretry.Letter, dueBy time.Time) *grantretry.Letter {
	l.DueBy = dueBy
	return l
}

// Ambiguous makes l ambiguous: its last attempt may have been applied.
func Ambiguous(l *grantretry.Letter) *grantretry.Letter {
	l.Ambiguous, l.LastStatus, l.LastError = true, 0, "connection reset after the request was sent"
	return l
}
