package simplergrants_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

const (
	apiKey      = "key-1"
	userToken   = "token-1"
	userID      = "6b1c5e0a-2f4d-4c8b-9a3e-1d2c3b4a5f60"
	competition = "11111111-2222-4333-8444-555555555555"
)

// fakeClock is the fake API's clock: Sleep moves it and returns at once.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return ctx.Err()
}

// credentials adds the API's headers to every request, as a pipeline's
// client does.
type credentials struct{ next http.RoundTripper }

func (c credentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", apiKey)
	r.Header.Set("X-SGG-Token", userToken)
	return c.next.RoundTrip(r)
}

// startAPI starts the fake API, with the gateway's throttle off unless
// cfg sets one, and a client that carries the credentials.
func startAPI(t *testing.T, cfg fakesimpler.Config) (*fakesimpler.API, *http.Client) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	cfg.APIKeys = []string{apiKey}
	cfg.Users = map[string]string{userToken: userID}
	cfg.Now, cfg.Sleep = clk.Now, clk.Sleep
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1
	}
	a := fakesimpler.New(cfg)
	t.Cleanup(a.Close)
	a.AddCompetition(fakesimpler.Competition{ID: competition, OpportunityNumber: "HHS-2026-ACF-0001"})
	return a, &http.Client{Transport: credentials{a.Client().Transport}}
}

func startRequest(t *testing.T, ctx context.Context, base, name string) *http.Request {
	t.Helper()
	body := `{"competition_id": "` + competition + `", "application_name": ` + strconv.Quote(name) + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/alpha/applications/start", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

func submitRequest(t *testing.T, ctx context.Context, base, id string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/alpha/applications/"+id+"/submit", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// startDirect starts an application named name without grantretry.
func startDirect(t *testing.T, a *fakesimpler.API, client *http.Client, name string) string {
	t.Helper()
	resp, err := client.Do(startRequest(t, context.Background(), a.URL(), name))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return applicationID(t, resp)
}

func applicationID(t *testing.T, resp *http.Response) string {
	t.Helper()
	var got struct {
		Data struct {
			ApplicationID string `json:"application_id"`
		} `json:"data"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || got.Data.ApplicationID == "" {
		t.Fatalf("start answered %d %s", resp.StatusCode, body)
	}
	return got.Data.ApplicationID
}

func submitDirect(t *testing.T, a *fakesimpler.API, client *http.Client, id string) {
	t.Helper()
	resp, err := client.Do(submitRequest(t, context.Background(), a.URL(), id))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("submit answered %d", resp.StatusCode)
	}
}

func startQuery(t *testing.T, a *fakesimpler.API, submissionID, name string) grantretry.ReconcileQuery {
	req := startRequest(t, context.Background(), a.URL(), name)
	return grantretry.ReconcileQuery{Request: req, SubmissionID: submissionID, Attempt: 1, Err: io.ErrUnexpectedEOF}
}

func submitQuery(t *testing.T, a *fakesimpler.API, id string) grantretry.ReconcileQuery {
	return grantretry.ReconcileQuery{Request: submitRequest(t, context.Background(), a.URL(), id), SubmissionID: "sub-" + id, Attempt: 1, Status: 504}
}

func TestReconcilerFindsASubmittedApplicationByItsRecord(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	submitDirect(t, a, client, id)
	rec := simplergrants.NewReconciler(a.URL(), client)
	for _, status := range []string{"submitted", "accepted"} {
		if status == "accepted" && !a.Accept(id) {
			t.Fatal("Accept")
		}
		resp, err := rec.Reconcile(context.Background(), submitQuery(t, a, id))
		if err != nil || resp == nil {
			t.Fatalf("%s: Reconcile = %v, %v; want the application's record", status, resp, err)
		}
		var got struct {
			Data struct {
				ApplicationStatus string `json:"application_status"`
			} `json:"data"`
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil || got.Data.ApplicationStatus != status {
			t.Errorf("%s: the answer is %d %s", status, resp.StatusCode, body)
		}
	}
	if n := a.Ledger().Submitted[id]; n != 1 {
		t.Errorf("%d submits applied; the question must apply none", n)
	}
}

func TestReconcilerAnswersNotSubmittedForAnApplicationInProgress(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	resp, err := simplergrants.NewReconciler(a.URL(), client).Reconcile(context.Background(), submitQuery(t, a, id))
	if resp != nil || err != nil {
		t.Errorf("Reconcile = %v, %v; want not applied", resp, err)
	}
}

func TestReconcilerFindsAStartedApplicationByName(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	startDirect(t, a, client, "other")
	id := startDirect(t, a, client, "sub-1")
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	resp, err := rec.Reconcile(context.Background(), startQuery(t, a, "sub-1", "sub-1"))
	if err != nil || resp == nil {
		t.Fatalf("Reconcile = %v, %v; want the start's answer", resp, err)
	}
	defer resp.Body.Close()
	if got := applicationID(t, resp); got != id {
		t.Errorf("the answer names %s, want %s", got, id)
	}
	if l := a.Ledger(); l.Started != 2 {
		t.Errorf("%d applications started; the question must start none", l.Started)
	}
}

func TestReconcilerAnswersNotStartedWhenNoApplicationHasTheName(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	startDirect(t, a, client, "other")
	resp, err := simplergrants.NewReconciler(a.URL(), client).ForUser(userID).Reconcile(context.Background(), startQuery(t, a, "sub-1", "sub-1"))
	if resp != nil || err != nil {
		t.Errorf("Reconcile = %v, %v; want not applied", resp, err)
	}
}

// The named application is on the list's second page.
func TestReconcilerReadsEveryPageOfTheUsersApplications(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 501 applications")
	}
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	for i := range 500 {
		startDirect(t, a, client, "filler-"+strconv.Itoa(i))
	}
	resp, err := simplergrants.NewReconciler(a.URL(), client).ForUser(userID).Reconcile(context.Background(), startQuery(t, a, "sub-1", "sub-1"))
	if err != nil || resp == nil {
		t.Fatalf("Reconcile = %v, %v; want the start's answer", resp, err)
	}
	defer resp.Body.Close()
	if got := applicationID(t, resp); got != id {
		t.Errorf("the answer names %s, want %s", got, id)
	}
}

func TestReconcilerCannotTell(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	twice := startDirect(t, a, client, "twice")
	startDirect(t, a, client, "twice")
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	noBody := startQuery(t, a, "sub-1", "sub-1")
	noBody.Request.Body, noBody.Request.GetBody = nil, nil
	cases := []struct {
		name     string
		rec      *simplergrants.Reconciler
		q        grantretry.ReconcileQuery
		mismatch bool
	}{
		{"a start without a submission id", rec, startQuery(t, a, "", "sub-1"), false},
		{"a start named otherwise", rec, startQuery(t, a, "sub-1", "sub-2"), true},
		{"a start without a user", simplergrants.NewReconciler(a.URL(), client), startQuery(t, a, "sub-1", "sub-1"), false},
		{"two applications of the name", rec, startQuery(t, a, "twice", "twice"), false},
		{"a submit of an unknown application", rec, submitQuery(t, a, "00000000-0000-4000-8000-000000000000"), false},
		{"a route that is no write", rec, grantretry.ReconcileQuery{Request: httptestRequest(t, http.MethodPost, a.URL()+"/alpha/applications/"+twice)}, false},
		{"a request elsewhere", simplergrants.NewReconciler(a.URL()+"/api", client), submitQuery(t, a, twice), false},
		{"a bad base URL", simplergrants.NewReconciler("api.simpler.grants.gov", client), submitQuery(t, a, twice), false},
		{"a nil client", simplergrants.NewReconciler(a.URL(), nil), submitQuery(t, a, twice), false},
		{"no request", rec, grantretry.ReconcileQuery{}, false},
	}
	for _, tc := range cases {
		resp, err := tc.rec.Reconcile(context.Background(), tc.q)
		if resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) || errors.Is(err, simplergrants.ErrNameMismatch) != tc.mismatch {
			t.Errorf("%s: Reconcile = %v, %v; want it to say it cannot tell", tc.name, resp, err)
		}
	}
	// With the body gone, a start is asked by the submission id alone.
	if resp, err := rec.Reconcile(context.Background(), noBody); resp != nil || err != nil {
		t.Errorf("a start whose body is gone: Reconcile = %v, %v; want not applied", resp, err)
	}
}

func httptestRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The API's own refusals of the question are no answer to it.
func TestReconcilerCannotTellWhenTheAPIDoesNotAnswer(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{MonthlyQuota: 3})
	id := startDirect(t, a, client, "sub-1")
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	a.SetMaintenance(time.Minute)
	for _, q := range []grantretry.ReconcileQuery{submitQuery(t, a, id), startQuery(t, a, "sub-1", "sub-1")} {
		if resp, err := rec.Reconcile(context.Background(), q); resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
			t.Errorf("in maintenance: Reconcile = %v, %v", resp, err)
		}
	}
	a.SetMaintenance(0)
	if resp, err := rec.Reconcile(context.Background(), submitQuery(t, a, id)); resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
		t.Errorf("over the quota: Reconcile = %v, %v", resp, err)
	}
	if resp, err := simplergrants.NewReconciler(a.URL(), a.Client()).Reconcile(context.Background(), submitQuery(t, a, id)); resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
		t.Errorf("without credentials: Reconcile = %v, %v", resp, err)
	}
}

func TestReconcilerAnswersNotAppliedForAReadThatPosts(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	rec := simplergrants.NewReconciler(a.URL(), client)
	for _, p := range []string{"/v1/users/" + userID + "/applications", "/alpha/applications/" + competition + "/submissions"} {
		q := grantretry.ReconcileQuery{Request: httptestRequest(t, http.MethodPost, a.URL()+p)}
		if resp, err := rec.Reconcile(context.Background(), q); resp != nil || err != nil {
			t.Errorf("%s: Reconcile = %v, %v; want not applied", p, resp, err)
		}
	}
}

// The API's credentials are secrets by grantretry's built-in rules: no
// audit line or dead letter carries them.
func TestTheAPIsCredentialHeadersAreSecrets(t *testing.T) {
	for _, h := range []string{"X-API-Key", "X-SGG-Token"} {
		if !grantretry.SecretName(h) {
			t.Errorf("%s is not a secret by grantretry's rules", h)
		}
	}
}

// A base URL written with a trailing slash asks the same routes.
func TestReconcilerTakesABaseURLWithATrailingSlash(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	submitDirect(t, a, client, id)
	resp, err := simplergrants.NewReconciler(a.URL()+"/", client).Reconcile(context.Background(), submitQuery(t, a, id))
	if err != nil || resp == nil {
		t.Fatalf("Reconcile = %v, %v; want the application's record", resp, err)
	}
	resp.Body.Close()
}
