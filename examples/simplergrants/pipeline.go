package main

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

// fault is what befalls one application's start or submit.
type fault int

const (
	none           fault = iota
	dropStart            // the API creates the application, then the connection drops
	dropSubmit           // the API submits it, then the connection drops
	slowSubmit           // the API takes a minute: the gateway answers 504 at 29 s, the API submits all the same
	burstSpent           // another process has just spent the gateway's burst
	maintenance          // the API goes into maintenance for half an hour before the start
	quotaSpent           // the month's quota runs out before the submit
	numberOfFaults       // the count of faults above
)

var faultText = [numberOfFaults]string{
	none:        "nothing goes wrong",
	dropStart:   "the connection drops after the API created the application",
	dropSubmit:  "the connection drops after the API submitted the application",
	slowSubmit:  "the API takes a minute over the submit: the gateway answers 504 at 29 s, and the API submits it all the same",
	burstSpent:  "another process of the pipeline has just spent the gateway's burst of 15",
	maintenance: "the API goes into maintenance for half an hour just before the start",
	quotaSpent:  "the month's quota of the API key runs out just before the submit",
}

// applications are the pipeline's, each under its submission id, which it
// also gives the application as its application_name.
var applications = []struct {
	id    string
	fault fault
}{
	{"sub-0001", none},
	{"sub-0002", dropStart},
	{"sub-0003", dropSubmit},
	{"sub-0004", slowSubmit},
	{"sub-0005", burstSpent},
	{"sub-0006", maintenance},
	{"sub-0007", quotaSpent},
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

// call is one start or submit as the pipeline saw it.
type call struct {
	app, what string
	outcome   grantretry.Outcome
	again     bool // sent again, as a new call, once the API said when
}

// demo is one run.
type demo struct {
	api    *fakesimpler.API
	clk    *clock
	client *http.Client // the pipeline's, through grantretry
	direct *http.Client // another process's, with the credentials and no grantretry
	hook   *afterEach
	calls  []call
}

func newDemo() (*demo, error) {
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
	tr := grantretry.New(hook, simplergrants.Profile(u.Host, rec),
		grantretry.WithClock(clk), grantretry.WithRandSource(rand.NewPCG(1, 2)))
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
		d.calls = append(d.calls, call{app: app, what: what, outcome: o, again: again})
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

func (d *demo) apply(ctx context.Context, app string, f fault) error {
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

// run runs the demo and writes what a person reads to w. It fails when the
// API started or submitted an application twice, or a call was reported
// failed that the API received.
func run(w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := newDemo()
	if err != nil {
		return err
	}
	defer d.api.Close()
	fmt.Fprintf(w, "The Simpler Grants.gov demo: %d applications, each started and submitted through\n"+
		"simplergrants.Profile, against a fake of the API and its AWS gateway on 127.0.0.1.\n"+
		"Time is simulated; it starts at %s.\n\n", len(applications), d.clk.Now().Format(time.RFC3339))
	for _, a := range applications {
		fmt.Fprintf(w, "%s: %s\n", a.id, faultText[a.fault])
		if err := d.apply(ctx, a.id, a.fault); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\n== each call: what happened, and why ==")
	printCalls(w, d.calls)
	fmt.Fprintf(w, "\n== what the API recorded (its own ledger), at %s ==\n", d.clk.Now().Format(time.RFC3339))
	return report(w, d.api, d.calls)
}

func printCalls(w io.Writer, calls []call) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "application\tcall\tdisposition\tstop reason\tattempts\tlast verdict\towed until")
	for _, c := range calls {
		what := c.what
		if c.again {
			what += " (again)"
		}
		until := ""
		if c.outcome.StopReason == grantretry.StopOwedLater {
			until = "not said"
			if !c.outcome.NotBefore.IsZero() {
				until = c.outcome.NotBefore.Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.app, what, c.outcome.Disposition, c.outcome.StopReason, c.outcome.Attempts, c.outcome.Reason, until)
	}
	tw.Flush()
}

// report prints the ledger and checks it against what the pipeline was
// told.
func report(w io.Writer, api *fakesimpler.API, calls []call) error {
	l := api.Ledger()
	byName := map[string][]fakesimpler.Application{}
	for _, a := range api.Applications() {
		byName[a.Name] = append(byName[a.Name], a)
	}
	var problems []string
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "application_name\tapplications\tstatus\tsubmits applied")
	for _, a := range applications {
		apps := byName[a.id]
		status, submits := "-", 0
		if len(apps) > 0 {
			status, submits = apps[0].Status, l.Submitted[apps[0].ID]
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", a.id, len(apps), status, submits)
		if len(apps) != 1 || submits != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d applications, submitted %d times", a.id, len(apps), submits))
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nThe gateway: %d calls throttled, %d over the month's quota, %d answered 504 at 29 s.\n"+
		"The API: %d answers of maintenance, %d requests carried out and then dropped.\n",
		l.Throttled, l.OverQuota, l.TimedOut, l.InMaint, l.Dropped)
	for _, c := range calls {
		if c.outcome.Disposition != grantretry.Succeeded && c.outcome.StopReason != grantretry.StopOwedLater {
			problems = append(problems, fmt.Sprintf("%s %s ended %s (%s)", c.app, c.what, c.outcome.Disposition, c.outcome.StopReason))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the ledger disagrees with the pipeline: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintf(w, "\nEach of the %d applications was started once and submitted once; every call succeeded,\n"+
		"or was owed and then sent again at the time the API gave, and none was reported failed.\n", len(applications))
	return nil
}
