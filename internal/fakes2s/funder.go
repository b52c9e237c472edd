package fakes2s

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// DefaultDropRate is the share of accepted submissions a Funder records and
// then hangs up on when Options.DropRate is 0: the 10% of issue 12's
// measurement.
const DefaultDropRate = 0.10

// firstTrackingNumber is the number of the first application a Funder
// records; its tracking number is GRANT10000001.
const firstTrackingNumber = 10000001

// Options configure a Funder. The zero value is a funder that drops
// DefaultDropRate of the submissions it accepts, drawn with seed 0, fails
// no query, answers at once and keeps idle connections open until Close.
type Options struct {
	// DropRate is the share of accepted submissions that the funder records
	// and then answers by closing the connection. If DropRate is 0,
	// DefaultDropRate is used; a negative DropRate drops none, and 1 or
	// more drops every one.
	DropRate float64

	// Drop, if not nil, decides in place of DropRate and Seed which accepted
	// submissions are dropped. It is called, after the application is
	// recorded and with no lock held, with the submission id and the
	// application's number for that id (1 for the first recorded, 2 for
	// the second, ...). It must be safe for concurrent use.
	Drop func(submissionID string, n int) bool

	// Seed makes the drops, and the failed queries, reproducible. Whether
	// the nth application of a submission id is dropped is a function of
	// Seed, the id and n alone, so two funders with one Seed drop alike
	// whatever order concurrent submissions arrive in, as long as each id
	// sees the same requests. Likewise for the nth query about an id.
	Seed uint64

	// QueryFailRate is the share of GetApplicationList queries answered
	// 503, with a soap:Server fault, instead of the list: the funder cannot
	// tell the client what it recorded. 0 fails none, 1 or more every one.
	QueryFailRate float64

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
	o    Options
	url  string
	srv  *http.Server
	done chan struct{} // closed when Close begins: pending calls stop waiting
	// served is closed when the server's Serve has returned.
	served    chan struct{}
	closeOnce sync.Once
	handlers  sync.WaitGroup // calls in the handler; Add only with mu held and closed false

	// mu guards everything below it.
	mu       sync.Mutex
	closed   bool
	apps     map[string][]string // tracking numbers recorded, per submission id, oldest first
	queried  map[string]int      // queries received, per submission id
	next     int                 // the next tracking number
	received int                 // submission requests, the malformed included
	dropped  int                 // applications recorded and then hung up on
	queries  int                 // GetApplicationList queries, the failed included
}

// Start starts a Funder on an ephemeral port of 127.0.0.1. It serves
// HTTP/1.1 only, with keep-alive on, until Close.
func Start(o Options) (*Funder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakes2s: %w", err)
	}
	f := &Funder{
		o:       o,
		url:     "http://" + ln.Addr().String() + PortPath,
		done:    make(chan struct{}),
		served:  make(chan struct{}),
		apps:    make(map[string][]string),
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
	}
	go func() {
		defer close(f.served)
		f.srv.Serve(ln) // returns ErrServerClosed once Close is called
	}()
	return f, nil
}

// URL is the endpoint both operations are posted to: http://127.0.0.1:port
// followed by PortPath.
func (f *Funder) URL() string { return f.url }

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

// record records a new application for id. It returns its tracking number
// and the application's number for id (1 for the first).
func (f *Funder) record(id string) (tracking string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tracking = "GRANT" + strconv.Itoa(f.next)
	f.next++
	f.apps[id] = append(f.apps[id], tracking)
	return tracking, len(f.apps[id])
}

// shouldDrop decides whether the nth application of id is dropped, and
// counts it if so. It calls Options.Drop, so mu must not be held.
func (f *Funder) shouldDrop(id string, n int) bool {
	var drop bool
	if f.o.Drop != nil {
		drop = f.o.Drop(id, n)
	} else {
		rate := f.o.DropRate
		if rate == 0 {
			rate = DefaultDropRate
		}
		drop = f.draw("drop", id, n) < rate
	}
	if drop {
		f.mu.Lock()
		f.dropped++
		f.mu.Unlock()
	}
	return drop
}

// countQuery counts a GetApplicationList query about id on arrival, and
// returns how many queries about id there have been, this one included.
func (f *Funder) countQuery(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	f.queried[id]++
	return f.queried[id]
}

// queryFails decides whether the nth query about id fails.
func (f *Funder) queryFails(id string, n int) bool {
	return f.o.QueryFailRate > 0 && f.draw("query", id, n) < f.o.QueryFailRate
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
// every request to the port that is not a GetApplicationList query, the
// malformed and the dropped included. Requests net/http resent count once
// per resend, since the funder cannot tell them apart.
func (f *Funder) Received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received
}

// Applications returns how many applications the funder has recorded for
// a submission id.
func (f *Funder) Applications(submissionID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.apps[submissionID])
}

// TrackingNumbers returns the tracking numbers of the applications the
// funder has recorded for a submission id, oldest first: what Lookup
// would find, read without a query.
func (f *Funder) TrackingNumbers(submissionID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.apps[submissionID])
}

// TotalApplications returns how many applications the funder has recorded,
// for all submission ids.
func (f *Funder) TotalApplications() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next - firstTrackingNumber
}

// Duplicates returns how many applications the funder has recorded beyond
// the first for each submission id: the harm issue 12 measures.
func (f *Funder) Duplicates() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	dups := 0
	for _, tracking := range f.apps {
		dups += len(tracking) - 1
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

// Queries returns how many GetApplicationList queries the funder has
// received, the failed and the malformed included. None of them counts
// as a submission.
func (f *Funder) Queries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries
}
