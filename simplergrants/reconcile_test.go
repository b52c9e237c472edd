package simplergrants_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
// cfg sets one, on a clock of its own (cfg.Sleep, if set, is kept), and a
// client that carries the credentials.
func startAPI(t *testing.T, cfg fakesimpler.Config) (*fakesimpler.API, *http.Client) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	cfg.APIKeys = []string{apiKey}
	cfg.Users = map[string]string{userToken: userID}
	cfg.Now = clk.Now
	if cfg.Sleep == nil {
		cfg.Sleep = clk.Sleep
	}
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
	// The attempt's connection dropped: the API is not still at it.
	q := submitQuery(t, a, id)
	q.Status, q.Err = 0, io.ErrUnexpectedEOF
	resp, err := simplergrants.NewReconciler(a.URL(), client).Reconcile(context.Background(), q)
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
		{"a start whose body is gone", rec, noBody, false},
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

// listServer answers POST /v1/users/{id}/applications as the API's
// UserApplicationListResponseSchema publishes it (message, data,
// status_code; no pagination_info), from the names pages gives page by
// page.
func listServer(t *testing.T, pages func(offset, size int) []string) *httptest.Server {
	t.Helper()
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Pagination struct {
				PageOffset int `json:"page_offset"`
				PageSize   int `json:"page_size"`
			} `json:"pagination"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.Pagination.PageOffset < 1 || req.Pagination.PageSize < 1 {
			http.Error(w, "bad pagination", http.StatusUnprocessableEntity)
			return
		}
		items := []map[string]any{}
		for _, name := range pages(req.Pagination.PageOffset, req.Pagination.PageSize) {
			n++
			// "name#id" names the application's id; a bare name gets one.
			name, id, ok := strings.Cut(name, "#")
			if !ok {
				id = "00000000-0000-4000-8000-" + strconv.Itoa(100000000000+n)
			}
			items = append(items, map[string]any{"application_id": id, "application_name": name, "application_status": "in_progress", "organization": nil})
		}
		b, _ := json.Marshal(map[string]any{"message": "Success", "data": items, "status_code": 200})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func listQuery(t *testing.T, base string) grantretry.ReconcileQuery {
	t.Helper()
	body := `{"competition_id":"` + competition + `","application_name":"sub-1"}`
	req := httptestRequest(t, http.MethodPost, base+"/alpha/applications/start")
	req.Body = io.NopCloser(strings.NewReader(body))
	return grantretry.ReconcileQuery{Request: req, SubmissionID: "sub-1", Attempt: 1, Err: io.ErrUnexpectedEOF}
}

// The list's answer carries no pagination_info: the Reconciler reads
// pages until one comes back short.
func TestReconcilerReadsTheListAsTheAPIPublishesIt(t *testing.T) {
	const app = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	for _, tc := range []struct {
		name  string
		pages func(offset, size int) []string
		found bool
	}{
		{"one short page", func(offset, size int) []string {
			if offset == 1 {
				return []string{"other", "sub-1#" + app}
			}
			return nil
		}, true},
		{"on the second page", func(offset, size int) []string {
			switch offset {
			case 1:
				return slicesRepeat("filler", size)
			case 2:
				return []string{"sub-1#" + app}
			}
			return nil
		}, true},
		{"after an exactly full page", func(offset, size int) []string {
			if offset == 1 {
				return slicesRepeat("filler", size)
			}
			return nil
		}, false},
	} {
		srv := listServer(t, tc.pages)
		rec := simplergrants.NewReconciler(srv.URL, srv.Client()).ForUser(userID)
		resp, err := rec.Reconcile(context.Background(), listQuery(t, srv.URL))
		if err != nil || (resp != nil) != tc.found {
			t.Errorf("%s: Reconcile = %v, %v; want found %v", tc.name, resp, err, tc.found)
			continue
		}
		if resp != nil {
			if got := applicationID(t, resp); got != app {
				t.Errorf("%s: the answer names %s, want %s", tc.name, got, app)
			}
			resp.Body.Close()
		}
	}
}

// A start landing while the Reconciler reads shifts the newest-first
// list: the same application comes back on two pages, and is one
// application, not two of the name.
func TestReconcilerCountsAnApplicationSeenOnTwoPagesOnce(t *testing.T) {
	const app = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	srv := listServer(t, func(offset, size int) []string {
		switch offset {
		case 1:
			return append(slicesRepeat("filler", size-1), "sub-1#"+app)
		case 2:
			return []string{"sub-1#" + app, "other"}
		}
		return nil
	})
	rec := simplergrants.NewReconciler(srv.URL, srv.Client()).ForUser(userID)
	resp, err := rec.Reconcile(context.Background(), listQuery(t, srv.URL))
	if err != nil || resp == nil {
		t.Fatalf("Reconcile = %v, %v; want the application found once", resp, err)
	}
	defer resp.Body.Close()
	if got := applicationID(t, resp); got != app {
		t.Errorf("the answer names %s, want %s", got, app)
	}
}

// A list longer than the Reconciler reads: it cannot tell.
func TestReconcilerCannotTellPastTheLastPageItReads(t *testing.T) {
	srv := listServer(t, func(offset, size int) []string { return slicesRepeat("filler", size) })
	rec := simplergrants.NewReconciler(srv.URL, srv.Client()).ForUser(userID)
	if resp, err := rec.Reconcile(context.Background(), listQuery(t, srv.URL)); resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
		t.Errorf("Reconcile = %v, %v; want cannot tell", resp, err)
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A start whose body cannot be read again: its application_name cannot
// be checked against the submission id, so the Reconciler cannot tell.
func TestReconcilerCannotTellAStartWhoseBodyIsGone(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	resp, err := client.Post(a.URL()+"/alpha/applications/start", "application/json",
		strings.NewReader(`{"competition_id":"`+competition+`"}`)) // named by its opportunity number
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	for _, tc := range []struct {
		name    string
		getBody func() (io.ReadCloser, error)
	}{
		{"no GetBody", nil},
		{"GetBody fails", func() (io.ReadCloser, error) { return nil, errors.New("gone") }},
	} {
		q := startQuery(t, a, "sub-1", "sub-1")
		q.Request.Body, q.Request.GetBody, q.Request.ContentLength = nil, tc.getBody, 0
		if got, err := rec.Reconcile(context.Background(), q); got != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
			t.Errorf("%s: Reconcile = %v, %v; want cannot tell", tc.name, got, err)
		}
	}
}

func TestNilReconcilerAnswersAnError(t *testing.T) {
	var r *simplergrants.Reconciler
	req := httptestRequest(t, http.MethodPost, "https://api.simpler.grants.gov/alpha/applications/start")
	q := grantretry.ReconcileQuery{Request: req, SubmissionID: "x"}
	for name, rec := range map[string]*simplergrants.Reconciler{"nil": r, "nil.ForUser": r.ForUser(userID)} {
		resp, err := rec.Reconcile(context.Background(), q)
		if resp != nil || err == nil || !strings.HasPrefix(err.Error(), "grantretry: ") || !errors.Is(err, simplergrants.ErrCannotTell) {
			t.Errorf("%s: Reconcile = %v, %v; want a grantretry: error", name, resp, err)
		}
	}
}

func TestNewReconcilerErrorsCarryNoPassword(t *testing.T) {
	for _, base := range []string{"https://user:s3cret@api.simpler.grants.gov/%zz", "ftp://user:s3cret@api.simpler.grants.gov", "//user:s3cret@api.simpler.grants.gov"} {
		rec := simplergrants.NewReconciler(base, http.DefaultClient)
		req := httptestRequest(t, http.MethodPost, "https://api.simpler.grants.gov/alpha/applications/start")
		_, err := rec.Reconcile(context.Background(), grantretry.ReconcileQuery{Request: req, SubmissionID: "x"})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error %v; want one without the password", base, err)
		}
	}
}

// After the gateway's 504, the API may still be at the work: an
// application not found yet is no evidence that it was not applied.
func TestReconcilerCannotTellANotFoundAfterAGatewayTimeout(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "other")
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	start := startQuery(t, a, "sub-1", "sub-1")
	start.Err, start.Status = nil, http.StatusGatewayTimeout
	timedOut := startQuery(t, a, "sub-1", "sub-1")
	timedOut.Err = context.DeadlineExceeded
	for name, q := range map[string]grantretry.ReconcileQuery{
		"start answered 504":   start,
		"submit answered 504":  submitQuery(t, a, id),
		"start never answered": timedOut,
	} {
		if resp, err := rec.Reconcile(context.Background(), q); resp != nil || !errors.Is(err, simplergrants.ErrCannotTell) {
			t.Errorf("%s, not found: Reconcile = %v, %v; want cannot tell", name, resp, err)
		}
	}
	// Found, it is found.
	submitDirect(t, a, client, id)
	if resp, err := rec.Reconcile(context.Background(), submitQuery(t, a, id)); resp == nil || err != nil {
		t.Errorf("submit answered 504, found submitted: Reconcile = %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
