package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/foundationportal/portal"
)

// fault is what the fake portal does to one submission instead of (or
// after) handling it normally.
type fault int

const (
	none            fault = iota
	unavailable           // 503 before anything is recorded
	rateLimited           // 429 with Retry-After: 1
	dropAfterRecord       // record the application, then hang up without answering
	outage                // 503 on every request
	dropAlways            // record it, then hang up on every request: a broken load balancer
)

// programCeiling is the largest award the fake program accepts.
const programCeiling = 250000

// maxRequestBytes bounds the body the fake portal reads.
const maxRequestBytes = 1 << 20

// reply is what the fake portal sends back for one request.
type reply struct {
	status     int
	body       any
	retryAfter string
	replayed   bool
	hangUp     bool // close the connection without sending anything
}

// keyEntry is the portal's ledger line for one Idempotency-Key.
type keyEntry struct {
	externalID string
	bodySum    [sha256.Size]byte
	requests   int    // requests that carried the key
	applied    int    // times the key's effect was applied
	reply      *reply // the first success, replayed to every repeat
}

// fakePortal is the Foundation Portal API on a loopback server. It checks
// the API key and deduplicates submissions by Idempotency-Key, as the IETF
// idempotency-key draft describes: a repeat of an applied key gets the
// original answer and changes nothing; the same key with another body is
// refused. Safe for concurrent use; mu guards every field below it.
type fakePortal struct {
	apiKey string

	mu         sync.Mutex
	script     map[string][]fault
	keys       map[string]*keyEntry
	records    map[string][]string // external id -> portal ids recorded for it
	badKeys    int                 // requests refused for a missing or wrong API key
	unkeyed    int                 // submissions without an Idempotency-Key
	nextRecord int
	nextReq    int
}

func newFakePortal(apiKey string, s map[string][]fault) *fakePortal {
	return &fakePortal{apiKey: apiKey, script: s, keys: make(map[string]*keyEntry), records: make(map[string][]string)}
}

// handler routes the two endpoints the SDK calls, behind the API key check.
func (p *fakePortal) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/applications", p.submit)
	mux.HandleFunc("GET /v1/applications/{id}/status", p.status)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(portal.HeaderRequestID, p.requestID())
		if r.Header.Get(portal.HeaderAPIKey) != p.apiKey {
			p.mu.Lock()
			p.badKeys++
			p.mu.Unlock()
			writeReply(w, errorReply(http.StatusUnauthorized, "unauthorized", "missing or unknown API key"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (p *fakePortal) requestID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextReq++
	return fmt.Sprintf("req_%04d", p.nextReq)
}

func errorReply(status int, code, msg string) reply {
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	return reply{status: status, body: struct {
		Error detail `json:"error"`
	}{detail{code, msg}}}
}

func (p *fakePortal) submit(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes))
	var app portal.Application
	if err != nil || json.Unmarshal(raw, &app) != nil {
		writeReply(w, errorReply(http.StatusBadRequest, "malformed", "the body is not an application"))
		return
	}
	a := p.handle(app, r.Header.Get(grantretry.HeaderIdempotencyKey), sha256.Sum256(raw))
	if a.hangUp {
		hangUp(w)
		return
	}
	writeReply(w, a)
}

// handle decides the answer to one submission, and records it if it is new
// and valid. It holds mu throughout, so two requests with one key cannot
// both apply it.
func (p *fakePortal) handle(app portal.Application, key string, sum [sha256.Size]byte) reply {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e *keyEntry
	if key == "" {
		p.unkeyed++
	} else {
		if e = p.keys[key]; e == nil {
			e = &keyEntry{externalID: app.ExternalID, bodySum: sum}
			p.keys[key] = e
		}
		e.requests++
		if e.bodySum != sum {
			return errorReply(http.StatusUnprocessableEntity, "idempotency_key_reused", "the key was used with another request")
		}
	}

	flt := p.nextFault(app.ExternalID)
	switch flt {
	case unavailable, outage:
		return errorReply(http.StatusServiceUnavailable, "unavailable", "the portal is temporarily unavailable")
	case rateLimited:
		a := errorReply(http.StatusTooManyRequests, "rate_limited", "slow down")
		a.retryAfter = "1"
		return a
	}
	hangUp := flt == dropAfterRecord || flt == dropAlways
	if e != nil && e.reply != nil {
		a := *e.reply
		a.replayed, a.hangUp = true, hangUp
		return a
	}
	if app.AmountRequested <= 0 || app.AmountRequested > programCeiling {
		return errorReply(http.StatusUnprocessableEntity, "invalid_amount",
			fmt.Sprintf("amount_requested must be 1 to %d", programCeiling))
	}

	p.nextRecord++
	rec := portal.Receipt{ApplicationID: fmt.Sprintf("APP-%04d", p.nextRecord), ExternalID: app.ExternalID,
		ReceivedAt: time.Now().UTC().Truncate(time.Second)}
	p.records[app.ExternalID] = append(p.records[app.ExternalID], rec.ApplicationID)
	a := reply{status: http.StatusCreated, body: rec}
	if e != nil {
		e.applied++
		e.reply = &a
	}
	a.hangUp = hangUp
	return a
}

// nextFault takes the next scripted fault for an application; mu must be
// held. An outage and a broken load balancer are never used up.
func (p *fakePortal) nextFault(externalID string) fault {
	q := p.script[externalID]
	if len(q) == 0 {
		return none
	}
	if q[0] == outage || q[0] == dropAlways {
		return q[0]
	}
	p.script[externalID] = q[1:]
	return q[0]
}

func (p *fakePortal) status(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p.mu.Lock()
	ids := p.records[id]
	p.mu.Unlock()
	if len(ids) == 0 {
		writeReply(w, errorReply(http.StatusNotFound, "not_found", "no application "+id))
		return
	}
	writeReply(w, reply{status: http.StatusOK, body: portal.Status{
		ApplicationID: ids[0], ExternalID: id, State: "received", UpdatedAt: time.Now().UTC().Truncate(time.Second),
	}})
}

func writeReply(w http.ResponseWriter, a reply) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(a.body); err != nil {
		http.Error(w, "encoding the answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	if a.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(a.status)
	w.Write(buf.Bytes())
}

// hangUp closes the connection without a response: the worst case for a
// client, which cannot tell whether the application was recorded.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Cannot happen on the HTTP/1.1 server the demo starts; if it
		// did, a 502 is the next worst answer.
		http.Error(w, "cannot drop the connection", http.StatusBadGateway)
		return
	}
	conn.Close()
}

// duplicates counts the applications recorded and the records beyond the
// first for each: the harm a retry with a fresh key would do.
func (p *fakePortal) duplicates() (recorded, dups int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ids := range p.records {
		if len(ids) > 0 {
			recorded++
			dups += len(ids) - 1
		}
	}
	return recorded, dups
}

// report prints the portal's ledger per Idempotency-Key, and fails if any
// application was recorded twice.
func (p *fakePortal) report(w io.Writer) error {
	p.mu.Lock()
	keys := make([]string, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(p.keys[a].externalID, p.keys[b].externalID); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IDEMPOTENCY KEY\tAPPLICATION\tREQUESTS\tAPPLIED\tRECORDS")
	for _, k := range keys {
		e := p.keys[k]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%v\n", k, e.externalID, e.requests, e.applied, p.records[e.externalID])
	}
	unkeyed, badKeys := p.unkeyed, p.badKeys
	p.mu.Unlock()
	tw.Flush()

	recorded, dups := p.duplicates()
	fmt.Fprintf(w, "portal recorded %d applications, %d duplicates (%d submissions without a key, %d requests with a bad API key)\n",
		recorded, dups, unkeyed, badKeys)
	if dups > 0 {
		return fmt.Errorf("the portal recorded %d duplicate applications", dups)
	}
	return nil
}
