package simplergrants_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

// profileClient is a pipeline's client: the credentials, under a
// Transport that gives the fake's host the profile, on clock.
func profileClient(t *testing.T, a *fakesimpler.API, client *http.Client, clock grantretry.Clock) *http.Client {
	t.Helper()
	u, err := url.Parse(a.URL())
	if err != nil {
		t.Fatal(err)
	}
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	tr := grantretry.New(credentials{a.Client().Transport}, grantretry.WithClock(clock),
		simplergrants.Profile(u.Host, rec))
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

// outcomeOf sends req and returns its outcome, and the response's
// application_id when it has one.
func outcomeOf(t *testing.T, c *http.Client, req *http.Request) (grantretry.Outcome, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		var gerr *grantretry.Error
		if errors.As(err, &gerr) {
			return gerr.Outcome, ""
		}
		t.Errorf("%s: %v", req.URL.Path, err)
		return grantretry.Outcome{}, ""
	}
	defer resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if resp.StatusCode != http.StatusOK || req.URL.Path != "/alpha/applications/start" {
		return o, ""
	}
	return o, applicationID(t, resp)
}

// Each of n applications is started and submitted through the profile
// while the API drops the connection after carrying out one request in
// ten: the API holds n applications, each submitted once, and every call
// succeeded, the dropped ones reconciled.
func TestProfileThousandApplicationsTenthDroppedNoDuplicateNoLoss(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	a, client := startAPI(t, fakesimpler.Config{})
	a.DropEvery(10)
	pc := profileClient(t, a, client, fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)})
	starts := make([]grantretry.Outcome, n)
	submits := make([]grantretry.Outcome, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := fmt.Sprintf("sub-%04d", i)
			ctx := grantretry.WithSubmissionID(context.Background(), name)
			starts[i], ids[i] = outcomeOf(t, pc, startRequest(t, ctx, a.URL(), name))
			if ids[i] == "" {
				return
			}
			ctx = grantretry.WithSubmissionID(context.Background(), name+"-submit")
			submits[i], _ = outcomeOf(t, pc, submitRequest(t, ctx, a.URL(), ids[i]))
		}()
	}
	wg.Wait()

	byName := map[string]fakesimpler.Application{}
	for _, app := range a.Applications() {
		if _, dup := byName[app.Name]; dup {
			t.Errorf("%s was started twice", app.Name)
		}
		byName[app.Name] = app
	}
	l := a.Ledger()
	reconciled, failed := 0, 0
	for i := range n {
		name := fmt.Sprintf("sub-%04d", i)
		app, ok := byName[name]
		for _, o := range []grantretry.Outcome{starts[i], submits[i]} {
			if o.Disposition != grantretry.Succeeded {
				failed++
				t.Errorf("%s: %s (%s) after %d attempts", name, o.Disposition, o.StopReason, o.Attempts)
			}
			if o.StopReason == grantretry.StopReconciled {
				reconciled++
			}
		}
		if !ok || app.ID != ids[i] || l.Submitted[app.ID] != 1 || app.Status != fakesimpler.StatusSubmitted {
			t.Errorf("%s: the API holds %v (found %v), submitted %d times; the caller was told %q", name, app, ok, l.Submitted[app.ID], ids[i])
		}
	}
	t.Logf("%d applications: %d started, %d submitted, %d requests dropped after they were carried out, %d calls reconciled, %d failed",
		n, l.Started, len(l.Submitted), l.Dropped, reconciled, failed)
	if l.Started != n || len(l.Submitted) != n {
		t.Errorf("the API started %d and submitted %d, want %d each", l.Started, len(l.Submitted), n)
	}
	if l.Dropped == 0 || reconciled != l.Dropped {
		t.Errorf("%d dropped, %d reconciled; want drops, each reconciled", l.Dropped, reconciled)
	}
}

// Past the gateway's burst, a start is throttled, waits on the clock, and
// is sent again: once. The clock is the API's and the Transport's, so the
// gateway's bucket refills while the Transport backs off.
func TestProfileWaitsOutTheGatewaysThrottle(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	a := fakesimpler.New(fakesimpler.Config{
		APIKeys: []string{apiKey}, Users: map[string]string{userToken: userID},
		Now: clk.Now, Sleep: clk.Sleep,
	})
	t.Cleanup(a.Close)
	a.AddCompetition(fakesimpler.Competition{ID: competition, OpportunityNumber: "HHS-2026-ACF-0001"})
	client := &http.Client{Transport: credentials{a.Client().Transport}}
	pc := profileClient(t, a, client, clk)
	throttledCalls := 0
	for i := range fakesimpler.DefaultBurstLimit + 5 {
		name := fmt.Sprintf("sub-%04d", i)
		o, id := outcomeOf(t, pc, startRequest(t, grantretry.WithSubmissionID(context.Background(), name), a.URL(), name))
		if o.Disposition != grantretry.Succeeded || id == "" {
			t.Errorf("%s: %s (%s), reason %s", name, o.Disposition, o.StopReason, o.Reason)
		}
		if o.Attempts > 1 {
			throttledCalls++
		}
	}
	l := a.Ledger()
	if l.Throttled == 0 || throttledCalls == 0 || l.Started != fakesimpler.DefaultBurstLimit+5 {
		t.Errorf("ledger %+v, %d calls retried; want throttled calls, each started once", l, throttledCalls)
	}
}

// Without its reconciler the profile would start an application twice:
// the Transport is invalid, and sends nothing.
func TestProfileWithNilReconcilerMakesTransportInvalid(t *testing.T) {
	tr := grantretry.New(http.DefaultTransport, simplergrants.Profile("api.simpler.grants.gov", nil))
	if err := tr.Err(); !errors.Is(err, grantretry.ErrInvalidOption) {
		t.Fatalf("Err() = %v, want ErrInvalidOption", err)
	}
}

// A quota spent and maintenance end the call owed after one attempt,
// whatever the profile's budget.
func TestProfileQuotaAndMaintenanceAreOwed(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{MonthlyQuota: 1})
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	pc := profileClient(t, a, client, fixedClock{now})
	a.SetMaintenance(time.Hour) // the gateway counts this call: the quota is spent
	o, _ := outcomeOf(t, pc, startRequest(t, grantretry.WithSubmissionID(context.Background(), "sub-1"), a.URL(), "sub-1"))
	if o.StopReason != grantretry.StopOwedLater || o.Attempts != 1 || !o.NotBefore.Equal(now.Add(time.Hour)) {
		t.Errorf("in maintenance: %+v", o)
	}
	a.SetMaintenance(0)
	// The Transport holds the host until the maintenance's end: the quota's
	// answer is a fresh Transport's, as another pipeline run would meet it.
	pc = profileClient(t, a, client, fixedClock{now})
	o, _ = outcomeOf(t, pc, startRequest(t, grantretry.WithSubmissionID(context.Background(), "sub-2"), a.URL(), "sub-2"))
	if o.StopReason != grantretry.StopOwedLater || o.Attempts != 1 || o.Reason != "owed:429;aws:LimitExceededException" {
		t.Errorf("over the quota: %+v", o)
	}
	if l := a.Ledger(); l.Started != 0 {
		t.Errorf("%d started", l.Started)
	}
}
