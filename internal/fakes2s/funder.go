package fakes2s

import (
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultDropRate is the share of accepted submissions a Funder records and
// then hangs up on when Options.DropRate is 0.
const DefaultDropRate = 0.10

// firstTrackingNumber is the number of the first application a Funder
// records; its tracking number is GRANT10000001 (GrantsGovTrackingNumberType:
// GRANT and 8 digits).
const firstTrackingNumber = 10000001

// Options configure a Funder. The zero value is a funder that drops
// DefaultDropRate of the submissions it accepts, drawn with seed 0, fails
// no query, answers at once, keeps idle connections open until Close and
// dates applications by time.Now.
type Options struct {
	// DropRate is the share of accepted submissions that the funder records
	// and then answers by closing the connection. If DropRate is 0,
	// DefaultDropRate is used; a negative DropRate drops none, and 1 or
	// more drops every one.
	DropRate float64

	// Drop, if not nil, decides in place of DropRate and Seed which accepted
	// submissions are dropped. It is called, after the application is
	// recorded and with no lock held, with the application's
	// SubmissionTitle and its number under that title (1 for the first
	// recorded, 2 for the second, ...). It must be safe for concurrent use.
	Drop func(title string, n int) bool

	// Seed makes the drops, and the failed queries, reproducible. Whether
	// the nth application under a SubmissionTitle is dropped is a function
	// of Seed, the title and n alone, so two funders with one Seed drop
	// alike whatever order concurrent submissions arrive in, as long as
	// each title sees the same requests. Likewise for the nth query that
	// filters on a title.
	Seed uint64

	// QueryFailRate is the share of GetApplicationList and
	// GetSubmissionList queries answered 500 with the generic soap:Server
	// fault (FaultServerError) instead of the list: the funder cannot tell
	// the client what it recorded. 0 fails none, 1 or more every one.
	QueryFailRate float64

	// Now dates applications (ReceivedDateTime, StatusDateTime). Nil
	// means time.Now. It is called with no lock held and must be safe
	// for concurrent use. Certificates are made and checked on the real clock,
	// which the TLS handshake uses.
	Now func() time.Time

	// Latency is how long the funder works on each call before it records
	// anything and answers. A submission whose client gives up meanwhile
	// is still recorded, as at a real funder. 0 answers at once.
	Latency time.Duration

	// IdleTimeout is how long the server keeps an idle kept-alive
	// connection open. 0 keeps it until Close.
	IdleTimeout time.Duration
}

// Funder is a running fake S2S endpoint: see the package documentation for
// what it answers. Its counters may be read while it serves. Safe for
// concurrent use.
type Funder struct {
	o     Options
	url   string
	certs *certs
	srv   *http.Server
	done  chan struct{} // closed when Close begins: pending calls stop waiting
	// served is closed when the server's Serve has returned.
	served    chan struct{}
	closeOnce sync.Once
	handlers  sync.WaitGroup // calls in the handler; Add only with mu held and closed false

	// mu guards everything below it.
	mu       sync.Mutex
	closed   bool
	apps     []*application            // every application, oldest first
	byTitle  map[string][]*application // per SubmissionTitle, oldest first
	queried  map[string]int            // queries received, per SubmissionTitle filtered on
	next     int                       // the next tracking number
	received int                       // submission requests, the refused included
	dropped  int                       // applications recorded and then hung up on
	queries  int                       // list queries, the failed and refused included
	refused  int                       // requests answered with a fault
}

// application is one application the funder recorded.
type application struct {
	tracking string
	header
	status             string
	received, statusAt time.Time
}

// Start starts a Funder on an ephemeral port of 127.0.0.1. It makes a
// throwaway CA and its certificates, in memory, and serves HTTPS,
// HTTP/1.1 only, with keep-alive on, until Close.
func Start(o Options) (*Funder, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	c, err := newCerts(time.Now())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakes2s: %w", err)
	}
	f := &Funder{
		o:       o,
		url:     "https://" + ln.Addr().String() + PortPath,
		certs:   c,
		done:    make(chan struct{}),
		served:  make(chan struct{}),
		byTitle: make(map[string][]*application),
		queried: make(map[string]int),
		next:    firstTrackingNumber,
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(f.serveHTTP),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       o.IdleTimeout,
		TLSConfig:         c.serverTLS(),
		// A client that hangs up mid-handshake, or rejects the fake's CA,
		// is the test's business, not a line on its stderr.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(f.served)
		f.srv.ServeTLS(ln, "", "") // returns ErrServerClosed once Close is called
	}()
	return f, nil
}

// URL is the endpoint every operation is posted to: https://127.0.0.1:port
// followed by PortPath.
func (f *Funder) URL() string { return f.url }

// ClientTLS returns a new TLS configuration for a client of the funder:
// it trusts the funder's CA and presents a client certificate the CA
// issued, valid for a day. Each call returns a configuration of its own.
func (f *Funder) ClientTLS() *tls.Config { return f.certs.clientTLS(&f.certs.client) }

// AnonymousTLS returns a configuration that trusts the funder's CA and
// presents no client certificate: the handshake succeeds and every call
// is answered with FaultMissingCertificate.
func (f *Funder) AnonymousTLS() *tls.Config { return f.certs.clientTLS(nil) }

// ExpiredTLS returns a configuration whose client certificate the
// funder's CA issued but that expired a day ago: answered with
// FaultExpiredCertificate.
func (f *Funder) ExpiredTLS() *tls.Config { return f.certs.clientTLS(&f.certs.expired) }

// UnregisteredTLS returns a configuration whose client certificate
// another CA issued: answered with FaultUnknownCertificate.
func (f *Funder) UnregisteredTLS() *tls.Config { return f.certs.clientTLS(&f.certs.foreign) }

// NewTransport returns a new HTTP/1.1 Transport, keep-alive on, that
// calls the funder with ClientTLS. The caller closes its idle connections
// when done.
func (f *Funder) NewTransport() *http.Transport {
	return &http.Transport{TLSClientConfig: f.ClientTLS(), MaxIdleConnsPerHost: 16}
}

// Close stops the funder: it closes the listener and every connection,
// stops the calls still waiting out Latency (they record nothing), and
// returns once every call in the handler has returned. Calling it again
// does nothing.
func (f *Funder) Close() {
	f.closeOnce.Do(func() {
		close(f.done)
		f.srv.Close()
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		f.handlers.Wait()
		<-f.served
	})
}

// enter admits a call to the handler, unless Close has begun waiting for
// them; every admitted call must call f.handlers.Done.
func (f *Funder) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.handlers.Add(1)
	return true
}

// countSubmission counts a submission request on arrival.
func (f *Funder) countSubmission() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received++
}

// countRefused counts a request answered with a fault.
func (f *Funder) countRefused() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused++
}

// record records a new application. It returns it and its number under
// its title (1 for the first).
func (f *Funder) record(h header) (app application, n int) {
	now := f.o.Now()
	a := &application{header: h, status: StatusReceived, received: now, statusAt: now}
	if !h.wellFormed {
		a.status = StatusRejectedWithErrors
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a.tracking = fmt.Sprintf("GRANT%08d", f.next)
	f.next++
	f.apps = append(f.apps, a)
	f.byTitle[h.title] = append(f.byTitle[h.title], a)
	return *a, len(f.byTitle[h.title])
}

// shouldDrop decides whether the nth application under title is dropped,
// and counts it if so. It calls Options.Drop, so mu must not be held.
func (f *Funder) shouldDrop(title string, n int) bool {
	var drop bool
	if f.o.Drop != nil {
		drop = f.o.Drop(title, n)
	} else {
		rate := f.o.DropRate
		if rate == 0 {
			rate = DefaultDropRate
		}
		drop = f.draw("drop", title, n) < rate
	}
	if drop {
		f.mu.Lock()
		f.dropped++
		f.mu.Unlock()
	}
	return drop
}

// countQuery counts a list query on arrival.
func (f *Funder) countQuery() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
}

// queryFails decides whether a well-formed query with filters fails. The
// draw is keyed by the SubmissionTitle it filters on ("" if none) and the
// number of such queries so far.
func (f *Funder) queryFails(filters []Filter) bool {
	if f.o.QueryFailRate <= 0 {
		return false
	}
	title := ""
	for _, fl := range filters {
		if fl.Type == FilterSubmissionTitle {
			title = fl.Value
		}
	}
	f.mu.Lock()
	f.queried[title]++
	n := f.queried[title]
	f.mu.Unlock()
	return f.draw("query", title, n) < f.o.QueryFailRate
}

// wait waits out Latency. It reports false, at once, if Close has begun.
func (f *Funder) wait() bool {
	if f.o.Latency <= 0 {
		select {
		case <-f.done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(f.o.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.done:
		return false
	}
}

// draw is a uniform draw in [0, 1) for the nth event of a kind about id: a
// function of the seed, kind, id and n alone.
func (f *Funder) draw(kind, id string, n int) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", kind, id, n)
	return rand.New(rand.NewPCG(f.o.Seed, h.Sum64())).Float64()
}

// Received returns how many submission requests the funder has received:
// every request to the port that is not a list query, the refused and the
// dropped included. Requests net/http resent count once per resend, since
// the funder cannot tell them apart.
func (f *Funder) Received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received
}

// Refused returns how many requests, submissions and queries, the funder
// has answered with a fault.
func (f *Funder) Refused() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// Applications returns how many applications the funder has recorded
// under a SubmissionTitle.
func (f *Funder) Applications(title string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byTitle[title])
}

// TrackingNumbers returns the tracking numbers of the applications the
// funder has recorded under a SubmissionTitle, oldest first: what a
// GetApplicationList filtered on the title would find, read without a
// query.
func (f *Funder) TrackingNumbers(title string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	tracking := make([]string, 0, len(f.byTitle[title]))
	for _, a := range f.byTitle[title] {
		tracking = append(tracking, a.tracking)
	}
	return tracking
}

// ErrUnknownTrackingNumber is returned by SetStatus for a tracking number
// the funder has not issued.
var ErrUnknownTrackingNumber = errors.New("fakes2s: unknown tracking number")

// ErrUnknownStatus is returned by SetStatus for a status that is not a
// GrantsGovApplicationStatusType value.
var ErrUnknownStatus = errors.New("fakes2s: not a GrantsGovApplicationStatusType value")

// SetStatus moves an application to status, dated now, as the service's
// processing does after it has answered (Received, then Processing, then
// Validated or Rejected with Errors, ...). The funder itself records an
// application as Received, or as Rejected with Errors if its
// GrantApplicationXML is not well-formed XML.
func (f *Funder) SetStatus(tracking, status string) error {
	if !contains(Statuses(), status) {
		return fmt.Errorf("%w: %q", ErrUnknownStatus, status)
	}
	now := f.o.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.apps {
		if a.tracking == tracking {
			a.status, a.statusAt = status, now
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownTrackingNumber, tracking)
}

// TotalApplications returns how many applications the funder has recorded,
// under every title.
func (f *Funder) TotalApplications() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.apps)
}

// Duplicates returns how many applications the funder has recorded beyond
// the first under each SubmissionTitle: the harm a resend does to a
// funder that cannot deduplicate.
func (f *Funder) Duplicates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	dups := 0
	for _, apps := range f.byTitle {
		dups += len(apps) - 1
	}
	return dups
}

// Dropped returns how many applications the funder has recorded and then
// hung up on without answering.
func (f *Funder) Dropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// Queries returns how many GetApplicationList and GetSubmissionList
// queries the funder has received, the failed and the refused included.
// None of them counts as a submission.
func (f *Funder) Queries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries
}

// matching returns the applications every filter matches, oldest first.
// Filters of one type match any of their values; filters of different
// types must all match (as Kuali Coeus relies on when it filters on
// OpportunityID, CFDANumber and SubmissionTitle at once).
func (f *Funder) matching(filters []Filter) []application {
	byType := map[string][]string{}
	for _, fl := range filters {
		byType[fl.Type] = append(byType[fl.Type], fl.Value)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []application
	for _, a := range f.apps {
		ok := true
		for typ, values := range byType {
			if !contains(values, a.field(typ)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, *a)
		}
	}
	return out
}

// field returns the application's value for a filter type.
func (a *application) field(typ string) string {
	switch typ {
	case FilterStatus:
		return a.status
	case FilterOpportunityID:
		return a.opportunityID
	case FilterCFDANumber:
		return a.cfda
	case FilterSubmissionTitle:
		return a.title
	case FilterGrantsGovTrackingNumber:
		return a.tracking
	case FilterFundingOpportunityNum:
		return a.fon
	}
	return "" // PackageID: the fake reads none, so a filter on it matches only an empty value
}
