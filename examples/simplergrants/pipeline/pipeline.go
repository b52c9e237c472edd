// Package pipeline is the Simpler Grants.gov demo's pipeline: seven
// applications, each started and then submitted through
// simplergrants.Profile against a fake of the API and its AWS gateway
// (internal/fakesimpler), while the API drops a connection after carrying
// a request out, its gateway gives up at 29 s while the API goes on,
// another process spends the gateway's burst, the API goes into
// maintenance and the month's quota runs out. "go run
// ./examples/simplergrants" prints what [Run] returns, and the Grants.gov
// demo ("go run ./examples/grantsgov") runs it as its third funder.
//
// Everything runs in process against 127.0.0.1. Time is simulated: the
// API, its gateway and the Transport share one clock, which moves only
// when one of them waits, so the 29 s timeout, the backoffs and the
// month's end take no time at all.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

// The pipeline's credentials, and the competition it applies to.
const (
	apiKey      = "demo-api-key"
	userToken   = "demo-session-token"
	userID      = "6b1c5e0a-2f4d-4c8b-9a3e-1d2c3b4a5f60"
	competition = "11111111-2222-4333-8444-555555555555"
)

// Fault is what befalls one application's start or submit.
type Fault int

// The faults, one an application.
const (
	none           Fault = iota
	dropStart            // the API creates the application, then the connection drops
	dropSubmit           // the API submits it, then the connection drops
	slowSubmit           // the API takes a minute: the gateway answers 504 at 29 s, the API submits all the same
	burstSpent           // another process has just spent the gateway's burst
	maintenance          // the API goes into maintenance for half an hour before the start
	quotaSpent           // the month's quota runs out before the submit
	numberOfFaults       // the count of faults above
)

// String says what befalls the application.
func (f Fault) String() string {
	if f < 0 || f >= numberOfFaults {
		return "Fault(" + strconv.Itoa(int(f)) + ")"
	}
	return faultText[f]
}

var faultText = [numberOfFaults]string{
	none:        "nothing goes wrong",
	dropStart:   "the connection drops after the API created the application",
	dropSubmit:  "the connection drops after the API submitted the application",
	slowSubmit:  "the API takes a minute over the submit: the gateway answers 504 at 29 s, and the API submits it all the same",
	burstSpent:  "another process of the pipeline has just spent the gateway's burst of 15",
	maintenance: "the API goes into maintenance for half an hour just before the start",
	quotaSpent:  "the month's quota of the API key runs out just before the submit",
}

// Application is one of the pipeline's applications: its submission id,
// which the pipeline also gives it as its application_name, and what
// befalls it.
type Application struct {
	ID    string
	Fault Fault
}

// faults are the applications' faults, in the order they are sent.
var faults = []Fault{none, dropStart, dropSubmit, slowSubmit, burstSpent, maintenance, quotaSpent}

// Applications are the pipeline's applications, in the order it sends
// them, under the submission ids ids gives (nil: sub-0001 to sub-0007).
func Applications(ids []string) ([]Application, error) {
	if ids != nil && len(ids) != len(faults) {
		return nil, fmt.Errorf("%d submission ids for %d applications", len(ids), len(faults))
	}
	apps := make([]Application, len(faults))
	for i, f := range faults {
		id := fmt.Sprintf("sub-%04d", i+1)
		if ids != nil {
			id = ids[i]
		}
		apps[i] = Application{ID: id, Fault: f}
	}
	return apps, nil
}

// clock is the simulated time the API, its gateway and the Transport
// share: a wait moves it, and returns at once.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return ctx.Err()
}

// setTo moves the clock on to t, if t is later.
func (c *clock) setTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// credentials adds the API's headers to every request, as the pipeline's
// client does; grantretry keeps them out of every record it writes.
type credentials struct{ next http.RoundTripper }

func (c credentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", apiKey)
	r.Header.Set("X-SGG-Token", userToken)
	return c.next.RoundTrip(r)
}

// afterEach runs then once the round trip has returned: how a slow
// submit's slowness ends with it.
type afterEach struct {
	next http.RoundTripper
	mu   sync.Mutex
	then func()
}

func (a *afterEach) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	a.mu.Lock()
	then := a.then
	a.then = nil
	a.mu.Unlock()
	if then != nil {
		then()
	}
	return resp, err
}

func (a *afterEach) set(then func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.then = then
}

// Call is one start or submit as the pipeline saw it.
type Call struct {
	Application string             // its submission id
	What        string             // "start" or "submit"
	Outcome     grantretry.Outcome // how the call ended
	Again       bool               // sent again, as a new call, once the API said when
}

// demo is one run.
type demo struct {
	api    *fakesimpler.API
	clk    *clock
	client *http.Client // the pipeline's, through grantretry
	direct *http.Client // another process's, with the credentials and no grantretry
	hook   *afterEach
	calls  []Call
}

func newDemo(extra []grantretry.Option) (*demo, error) {
	clk := &clock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	api := fakesimpler.New(fakesimpler.Config{
		APIKeys: []string{apiKey}, Users: map[string]string{userToken: userID},
		Now: clk.Now, Sleep: clk.Sleep,
	})
	api.AddCompetition(fakesimpler.Competition{ID: competition, OpportunityNumber: "HHS-2027-ACF-0001"})
	u, err := url.Parse(api.URL())
	if err != nil {
		api.Close()
		return nil, err
	}
	direct := &http.Client{Transport: credentials{api.Client().Transport}}
	rec := simplergrants.NewReconciler(api.URL(), direct).ForUser(userID)
	hook := &afterEach{next: credentials{api.Client().Transport}}
	opts := append([]grantretry.Option{simplergrants.Profile(u.Host, rec)}, extra...)
	tr := grantretry.New(hook, append(opts, grantretry.WithClock(clk), grantretry.WithRandSource(rand.NewPCG(1, 2)))...)
	if err := tr.Err(); err != nil {
		api.Close()
		return nil, err
	}
	return &demo{api: api, clk: clk, client: &http.Client{Transport: tr}, direct: direct, hook: hook}, nil
}

// send makes one call under the submission id sub, and returns its outcome
// and the response's body.
func (d *demo) send(ctx context.Context, sub, method, path, body string) (grantretry.Outcome, []byte, error) {
	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, sub), method, d.api.URL()+path, strings.NewReader(body))
	if err != nil {
		return grantretry.Outcome{}, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		var gerr *grantretry.Error
		if errors.As(err, &gerr) {
			return gerr.Outcome, nil, nil
		}
		return grantretry.Outcome{}, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	o, _ := grantretry.OutcomeOf(resp)
	return o, raw, err
}

// sendOwed makes the call, and while the API says it owes it (owed_later),
// waits until the time it gave, or, for a quota that gives none, the start
// of the next month, and makes it again.
func (d *demo) sendOwed(ctx context.Context, app, what, sub, method, path, body string) ([]byte, error) {
	again := false
	for range 3 {
		o, raw, err := d.send(ctx, sub, method, path, body)
		if err != nil {
			return nil, err
		}
		d.calls = append(d.calls, Call{Application: app, What: what, Outcome: o, Again: again})
		if o.StopReason != grantretry.StopOwedLater {
			return raw, nil
		}
		d.api.SetMaintenance(0) // the window ends by the time it said
		next := o.NotBefore
		if next.IsZero() {
			now := d.clk.Now().UTC()
			next = time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		}
		d.clk.setTo(next)
		again = true
	}
	return nil, fmt.Errorf("%s %s: still owed after three tries", app, what)
}

func (d *demo) apply(ctx context.Context, app string, f Fault) error {
	switch f {
	case dropStart:
		d.api.DropNext(1)
	case burstSpent:
		for range fakesimpler.DefaultBurstLimit {
			resp, err := d.direct.Get(d.api.URL() + "/alpha/applications/" + competition)
			if err != nil {
				return err
			}
			resp.Body.Close()
		}
	case maintenance:
		d.api.SetMaintenance(30 * time.Minute)
	}
	start := `{"competition_id": "` + competition + `", "application_name": ` + strconv.Quote(app) + `}`
	raw, err := d.sendOwed(ctx, app, "start", app, http.MethodPost, "/alpha/applications/start", start)
	if err != nil {
		return err
	}
	var started struct {
		Data struct {
			ApplicationID string `json:"application_id"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &started) != nil || started.Data.ApplicationID == "" {
		return nil // the start did not succeed: the ledger check says so
	}
	switch f {
	case dropSubmit:
		d.api.DropNext(1)
	case slowSubmit:
		// Past the gateway's 29 s: it answers 504, and the API submits
		// the application just after. The pipeline's question comes
		// once the API is done.
		d.api.SetWork(fakesimpler.DefaultIntegrationTimeout)
		d.hook.set(func() { d.api.Wait(); d.api.SetWork(0) })
	case quotaSpent:
		d.api.SpendQuota(apiKey)
	}
	_, err = d.sendOwed(ctx, app, "submit", app+"-submit", http.MethodPost, "/alpha/applications/"+started.Data.ApplicationID+"/submit", "")
	return err
}

// Options change a run.
type Options struct {
	// IDs are the applications' submission ids, one for each; nil:
	// sub-0001 to sub-0007.
	IDs []string
	// Extra options go to the pipeline's Transport after the profile (a
	// logger, a meter provider). The simulated clock comes after them.
	Extra []grantretry.Option
}

// Result is what a run did: what the pipeline saw, and what the API
// recorded.
type Result struct {
	Applications []Application
	Calls        []Call
	Began, Ended time.Time                 // on the simulated clock
	Ledger       fakesimpler.Ledger        // the API's own
	Recorded     []fakesimpler.Application // every application the API holds, oldest first
}

// Run runs the pipeline against a fake API of its own, and returns what
// happened once the API has finished every request it was given. Only a
// run that could not be carried out is an error; [Result.Problems] says
// whether the ledger agrees with the pipeline.
func Run(ctx context.Context, o Options) (*Result, error) {
	apps, err := Applications(o.IDs)
	if err != nil {
		return nil, err
	}
	d, err := newDemo(o.Extra)
	if err != nil {
		return nil, err
	}
	defer d.api.Close()
	// ctx's deadline is real time, which a Transport counts on its own
	// clock, the simulated one, where a 504 alone takes 29 s: the calls
	// get ctx's cancellation, its deadline's end included, and not the
	// deadline itself.
	calls, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	defer context.AfterFunc(ctx, stop)()
	r := &Result{Applications: apps, Began: d.clk.Now()}
	for _, a := range apps {
		if err := d.apply(calls, a.ID, a.Fault); err != nil {
			return nil, err
		}
	}
	d.api.Wait()
	r.Calls, r.Ended = d.calls, d.clk.Now()
	r.Ledger, r.Recorded = d.api.Ledger(), d.api.Applications()
	return r, nil
}

// Record is what the API holds of one application_name.
type Record struct {
	Name         string
	Applications int    // applications of that name
	Status       string // the first one's, "-" if none
	Submits      int    // submits the API applied to it
}

// Records are the API's records of each application, in the order the
// pipeline sent them.
func (r *Result) Records() []Record {
	byName := map[string][]fakesimpler.Application{}
	for _, a := range r.Recorded {
		byName[a.Name] = append(byName[a.Name], a)
	}
	out := make([]Record, 0, len(r.Applications))
	for _, a := range r.Applications {
		rec := Record{Name: a.ID, Applications: len(byName[a.ID]), Status: "-"}
		if apps := byName[a.ID]; len(apps) > 0 {
			rec.Status, rec.Submits = apps[0].Status, r.Ledger.Submitted[apps[0].ID]
		}
		out = append(out, rec)
	}
	return out
}

// Problems are the ways the API's ledger disagrees with the pipeline: an
// application started or submitted other than once, a call that ended
// neither succeeded nor owed.
func (r *Result) Problems() []string {
	var problems []string
	for _, rec := range r.Records() {
		if rec.Applications != 1 || rec.Submits != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d applications, submitted %d times", rec.Name, rec.Applications, rec.Submits))
		}
	}
	for _, c := range r.Calls {
		if c.Outcome.Disposition != grantretry.Succeeded && c.Outcome.StopReason != grantretry.StopOwedLater {
			problems = append(problems, fmt.Sprintf("%s %s ended %s (%s)", c.Application, c.What, c.Outcome.Disposition, c.Outcome.StopReason))
		}
	}
	return problems
}

// WriteLedger prints the API's records and counts, and fails when the
// ledger disagrees with the pipeline.
func (r *Result) WriteLedger(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "application_name\tapplications\tstatus\tsubmits applied")
	for _, rec := range r.Records() {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", rec.Name, rec.Applications, rec.Status, rec.Submits)
	}
	tw.Flush()
	l := r.Ledger
	fmt.Fprintf(w, "\nThe gateway's answers: throttled: %d; over the month's quota: %d; timed out at 29 s (504): %d.\n"+
		"The API's: in maintenance: %d; carried out, then the connection dropped: %d.\n",
		l.Throttled, l.OverQuota, l.TimedOut, l.InMaint, l.Dropped)
	if p := r.Problems(); len(p) > 0 {
		return fmt.Errorf("the ledger disagrees with the pipeline: %s", strings.Join(p, "; "))
	}
	return nil
}
