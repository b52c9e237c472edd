package fakesimpler

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // US Eastern time, on a machine without a zone database
)

// The gateway's settings as api_gateway.tf gives them for the public
// usage plan (see the package documentation).
const (
	DefaultRateLimit          = 10               // requests a second, per API key
	DefaultBurstLimit         = 15               // the bucket's size
	DefaultMonthlyQuota       = 250000           // requests per calendar month, per API key
	DefaultIntegrationTimeout = 29 * time.Second // the gateway gives up on the API after it
)

// Config sets up an API. The zero value of each field has the default
// its comment gives.
type Config struct {
	// APIKeys are the X-API-Key values the gateway accepts; none: every
	// call is refused with the gateway's 403.
	APIKeys []string
	// Users maps an X-SGG-Token to the user it is a session of.
	Users map[string]string
	// Now is the clock of the gateway's throttle and quota and of the
	// API's competitions and submitted_at; nil: time.Now.
	Now func() time.Time
	// Sleep waits for d, or until ctx ends; it is how the API takes its
	// time and how the gateway waits out its timeout. nil: a real wait.
	// A test gives one that moves its own clock and returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// IntegrationTimeout, RateLimit, BurstLimit and MonthlyQuota: 0 is
	// the Default* constant. A negative RateLimit or MonthlyQuota turns
	// that limit off.
	IntegrationTimeout time.Duration
	RateLimit          float64
	BurstLimit         int
	MonthlyQuota       int
}

// Competition is what the fake knows of a competition.
type Competition struct {
	ID                string // a UUID
	OpportunityNumber string // the default application_name
	// ClosingDate is the last day it takes applications, as the API
	// gives it (closing_date, "2006-01-02"), and GracePeriod the days it
	// goes on taking them after that day: a start or a submit on a later
	// day in US Eastern time is refused competition_not_open. "": no
	// closing date (the API answers closing_date null).
	ClosingDate string
	GracePeriod int
	// Closes closes it at an instant, for a test that wants one: a start
	// or a submit at or after it is refused competition_not_open. Zero:
	// only ClosingDate closes it.
	Closes time.Time
}

// eastern is US Eastern time, in which the API reads a competition's
// dates (get_now_us_eastern_date, competition_models.py:113).
var eastern = mustLoad("America/New_York")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("fakesimpler: %v", err))
	}
	return loc
}

// Application is an application as the fake holds it.
type Application struct {
	ID            string
	CompetitionID string
	Name          string
	Status        string // StatusInProgress, StatusSubmitted or StatusAccepted
	UserID        string
	CreatedAt     time.Time
	SubmittedAt   time.Time // zero until submitted
}

// The application statuses (ApplicationStatus in the OpenAPI file).
const (
	StatusInProgress = "in_progress"
	StatusSubmitted  = "submitted"
	StatusAccepted   = "accepted"
)

// Ledger is what the API did: for tests to assert on.
type Ledger struct {
	Started   int            // applications created
	Submitted map[string]int // per application, submits applied (never more than 1)
	Dropped   int            // requests applied whose connection was then closed unanswered
	TimedOut  int            // requests the gateway answered 504 while the API went on
	Forbidden int            // calls the gateway refused for their key
	Throttled int            // 429 TooManyRequestsException
	OverQuota int            // 429 LimitExceededException
	InMaint   int            // 503 answers of maintenance
}

// API is a fake of api.simpler.grants.gov behind its gateway, listening
// on 127.0.0.1. It is safe for concurrent use.
type API struct {
	srv  *httptest.Server
	cfg  Config
	busy sync.WaitGroup // the requests the API is at

	mu           sync.Mutex // guards everything below
	competitions map[string]Competition
	apps         map[string]*Application
	order        []string // application ids, oldest first
	ledger       Ledger
	buckets      map[string]*bucket
	quota        map[string]quotaCount
	maintenance  time.Duration // its Retry-After; 0: not in maintenance
	inMaint      bool
	work         time.Duration // how long the API takes over each request
	dropNext     int           // applied requests still to be dropped
	dropEvery    int           // drop every nth applied request; 0: none
	applied      int           // applied requests so far, for dropEvery
}

// New starts an API on 127.0.0.1. Close it when done.
func New(cfg Config) *API {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = realSleep
	}
	if cfg.IntegrationTimeout == 0 {
		cfg.IntegrationTimeout = DefaultIntegrationTimeout
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.BurstLimit == 0 {
		cfg.BurstLimit = DefaultBurstLimit
	}
	if cfg.MonthlyQuota == 0 {
		cfg.MonthlyQuota = DefaultMonthlyQuota
	}
	a := &API{
		cfg:          cfg,
		competitions: make(map[string]Competition),
		apps:         make(map[string]*Application),
		buckets:      make(map[string]*bucket),
		quota:        make(map[string]quotaCount),
	}
	a.ledger.Submitted = make(map[string]int)
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serveHTTP))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("fakesimpler: listen on 127.0.0.1: %v", err))
	}
	a.srv.Listener = l
	a.srv.Start()
	return a
}

func realSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// URL is the API's base URL, as https://api.simpler.grants.gov is the
// real one's.
func (a *API) URL() string { return a.srv.URL }

// Client is an http.Client for the API.
func (a *API) Client() *http.Client { return a.srv.Client() }

// Close shuts the API down, once it has finished every request it was
// given (see [API.Wait]).
func (a *API) Close() {
	a.srv.Close()
	a.busy.Wait()
}

// Wait returns once the API has finished every request it was given so
// far, those the gateway answered 504 and those whose client went away
// included: then the ledger holds what they did.
func (a *API) Wait() { a.busy.Wait() }

// AddCompetition makes c known to the API.
func (a *API) AddCompetition(c Competition) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c.ID = strings.ToLower(c.ID)
	a.competitions[c.ID] = c
}

// SetMaintenance puts the API into maintenance, answering every call
// 503 with a Retry-After of retryAfter (rounded up to whole seconds), or,
// with retryAfter 0, out of it.
func (a *API) SetMaintenance(retryAfter time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inMaint = retryAfter > 0
	a.maintenance = retryAfter
}

// SetWork makes the API take d over each request it serves, whether or
// not the client waits for the answer. At or past the integration
// timeout, the gateway answers 504 at the timeout, and the API carries
// the request out d after it began, after the 504 went out ([API.Wait]
// waits for it).
func (a *API) SetWork(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.work = d
}

// DropNext makes the API close the connection without an answer after
// carrying out each of the next n requests that change something (a start
// that creates an application, a submit that submits one).
func (a *API) DropNext(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropNext = n
}

// DropEvery makes the API close the connection without an answer after
// carrying out every nth request that changes something, counted from
// this call; 0 stops it.
func (a *API) DropEvery(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropEvery = n
	a.applied = 0
}

// SpendQuota spends what is left of key's quota for the month of the
// clock's now, as a month of other calls would: the key's next call this
// month is refused LimitExceededException.
func (a *API) SpendQuota(key string) {
	month := a.cfg.Now().UTC().Format("2006-01")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.quota[key] = quotaCount{month: month, n: a.cfg.MonthlyQuota}
}

// Accept moves a submitted application to accepted, as the API's own
// processing does after a submit. It reports whether it did.
func (a *API) Accept(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	app, ok := a.apps[id]
	if !ok || app.Status != StatusSubmitted {
		return false
	}
	app.Status = StatusAccepted
	return true
}

// Ledger returns a copy of what the API did.
func (a *API) Ledger() Ledger {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.ledger
	l.Submitted = make(map[string]int, len(a.ledger.Submitted))
	for k, v := range a.ledger.Submitted {
		l.Submitted[k] = v
	}
	return l
}

// Applications returns a copy of every application, oldest first.
func (a *API) Applications() []Application {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Application, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, *a.apps[id])
	}
	return out
}

// dropThis reports whether the request just applied is to be dropped.
// a.mu must be held.
func (a *API) dropThis() bool {
	a.applied++
	drop := false
	if a.dropNext > 0 {
		a.dropNext--
		drop = true
	}
	if a.dropEvery > 0 && a.applied%a.dropEvery == 0 {
		drop = true
	}
	if drop {
		a.ledger.Dropped++
	}
	return drop
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
