package fakesimpler

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testKey   = "key-1"
	testToken = "token-1"
	testUser  = "6b1c5e0a-2f4d-4c8b-9a3e-1d2c3b4a5f60"
	otherTok  = "token-2"
	otherUser = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"
	compOpen  = "11111111-2222-4333-8444-555555555555"
	compShut  = "99999999-8888-4777-8666-555555555555"
)

// testClock is the fake's clock: Sleep moves it and returns at once.
type testClock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept += d
	return ctx.Err()
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestAPI(t *testing.T, cfg Config) (*API, *testClock) {
	t.Helper()
	clk := &testClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	cfg.APIKeys = []string{testKey}
	cfg.Users = map[string]string{testToken: testUser, otherTok: otherUser}
	cfg.Now, cfg.Sleep = clk.Now, clk.Sleep
	a := New(cfg)
	t.Cleanup(a.Close)
	a.AddCompetition(Competition{ID: compOpen, OpportunityNumber: "HHS-2026-ACF-0001"})
	a.AddCompetition(Competition{ID: compShut, OpportunityNumber: "HHS-2026-ACF-0002", Closes: clk.now.Add(-time.Hour)})
	return a, clk
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// call sends one request with the key and token given ("" leaves the
// header out).
func call(t *testing.T, a *API, method, path, key, token, body string) (reply, error) {
	t.Helper()
	req, err := http.NewRequest(method, a.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if token != "" {
		req.Header.Set("X-SGG-Token", token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		t.Fatalf("%s %s: the answer is not a JSON object: %q", method, path, raw)
	}
	return r, nil
}

func mustCall(t *testing.T, a *API, method, path, token, body string) reply {
	t.Helper()
	r, err := call(t, a, method, path, testKey, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func start(t *testing.T, a *API, name string) string {
	t.Helper()
	body := `{"competition_id": "` + compOpen + `", "application_name": "` + name + `"}`
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, body)
	if r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	id, _ := r.body["data"].(map[string]any)["application_id"].(string)
	if id == "" {
		t.Fatalf("start: no application_id in %s", r.raw)
	}
	return id
}

func errorType(r reply) string {
	errs, _ := r.body["errors"].([]any)
	if len(errs) == 0 {
		return ""
	}
	typ, _ := errs[0].(map[string]any)["type"].(string)
	return typ
}

func TestStartCreatesANewApplicationOnEveryCall(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	first, second := start(t, a, "sub-1"), start(t, a, "sub-1")
	if first == second {
		t.Fatal("two starts answered the same application")
	}
	if l := a.Ledger(); l.Started != 2 || len(a.Applications()) != 2 {
		t.Errorf("ledger %+v, %d applications; want 2 started", l, len(a.Applications()))
	}
}

func TestStartNamesTheApplicationByTheOpportunityNumberByDefault(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, `{"competition_id": "`+compOpen+`"}`)
	if r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	if apps := a.Applications(); len(apps) != 1 || apps[0].Name != "HHS-2026-ACF-0001" || apps[0].Status != StatusInProgress {
		t.Errorf("applications %v", apps)
	}
}

func TestStartRefusals(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	cases := []struct {
		name, body, message, typ string
		status                   int
	}{
		{"no competition_id", `{"application_name": "x"}`, "Validation error", "required", 422},
		{"not a UUID", `{"competition_id": "abc"}`, "Validation error", "invalid_uuid", 422},
		{"unknown competition", `{"competition_id": "00000000-0000-4000-8000-000000000000"}`, "Competition not found", "", 404},
		{"closed competition", `{"competition_id": "` + compShut + `"}`, "Cannot start application - competition is not open", "competition_not_open", 422},
	}
	for _, tc := range cases {
		r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, tc.body)
		if r.status != tc.status || r.body["message"] != tc.message || errorType(r) != tc.typ || r.body["status_code"] != float64(tc.status) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
		}
	}
	if l := a.Ledger(); l.Started != 0 {
		t.Errorf("refused starts created %d applications", l.Started)
	}
}

func TestSubmitMovesInProgressToSubmittedOnce(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	id := start(t, a, "sub-1")
	clk.Advance(time.Minute)
	if r := mustCall(t, a, http.MethodPost, "/alpha/applications/"+id+"/submit", testToken, ""); r.status != 200 || r.body["message"] != "Success" {
		t.Fatalf("submit: %d %s", r.status, r.raw)
	}
	app := a.Applications()[0]
	if app.Status != StatusSubmitted || !app.SubmittedAt.Equal(clk.Now()) {
		t.Errorf("after submit: %v at %v", app, app.SubmittedAt)
	}
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/"+id+"/submit", testToken, "")
	if r.status != 403 || r.body["message"] != "Cannot submit application. It is currently in status: submitted" || errorType(r) != "not_in_progress" {
		t.Errorf("resubmit: %d %s", r.status, r.raw)
	}
	if !a.Accept(id) || a.Accept(id) {
		t.Error("Accept did not move submitted to accepted exactly once")
	}
	r = mustCall(t, a, http.MethodPost, "/alpha/applications/"+id+"/submit", testToken, "")
	if r.status != 403 || r.body["message"] != "Cannot submit application. It is currently in status: accepted" {
		t.Errorf("submit of an accepted application: %d %s", r.status, r.raw)
	}
	if n := a.Ledger().Submitted[id]; n != 1 {
		t.Errorf("submits applied = %d, want 1", n)
	}
}

// The checks run in submit_application.py's order: the application, the
// user's access, in progress, then the competition open.
func TestSubmitChecksInTheAPIsOrder(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	open := start(t, a, "open")
	submitted := start(t, a, "submitted")
	mustCall(t, a, http.MethodPost, "/alpha/applications/"+submitted+"/submit", testToken, "")
	a.AddCompetition(Competition{ID: compOpen, OpportunityNumber: "HHS-2026-ACF-0001", Closes: clk.Now()})
	cases := []struct {
		name, id, token, typ string
		status               int
	}{
		{"unknown application", "00000000-0000-4000-8000-000000000000", testToken, "", 404},
		{"another user's, submitted", submitted, otherTok, "", 403},
		{"submitted, competition closed", submitted, testToken, "not_in_progress", 403},
		{"in progress, competition closed", open, testToken, "competition_not_open", 422},
	}
	for _, tc := range cases {
		r := mustCall(t, a, http.MethodPost, "/alpha/applications/"+tc.id+"/submit", tc.token, "")
		if r.status != tc.status || errorType(r) != tc.typ || r.body["status_code"] != float64(tc.status) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
		}
	}
	if n := a.Ledger().Submitted[open]; n != 0 {
		t.Errorf("a refused submit was applied %d times", n)
	}
}

func TestGetAnswersTheApplicationsStatus(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	id := start(t, a, "sub-1")
	mustCall(t, a, http.MethodPost, "/alpha/applications/"+id+"/submit", testToken, "")
	r := mustCall(t, a, http.MethodGet, "/alpha/applications/"+id, testToken, "")
	data, _ := r.body["data"].(map[string]any)
	if r.status != 200 || data["application_status"] != StatusSubmitted || data["application_name"] != "sub-1" || data["application_id"] != id {
		t.Errorf("get: %d %s", r.status, r.raw)
	}
	if _, ok := data["submitted_at"]; ok {
		t.Error("the answer carries submitted_at, which ApplicationGetResponseDataSchema does not")
	}
	if r := mustCall(t, a, http.MethodGet, "/alpha/applications/"+id, otherTok, ""); r.status != 403 {
		t.Errorf("another user's get: %d %s", r.status, r.raw)
	}
}

func TestListGivesTheUsersApplicationsByName(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	for _, n := range []string{"a", "b", "c"} {
		start(t, a, n)
		clk.Advance(time.Second)
	}
	path := "/v1/users/" + testUser + "/applications"
	r := mustCall(t, a, http.MethodPost, path, testToken, `{"pagination": {"page_offset": 1, "page_size": 2}}`)
	data, _ := r.body["data"].([]any)
	if r.status != 200 || len(data) != 2 || data[0].(map[string]any)["application_name"] != "c" {
		t.Fatalf("list: %d %s", r.status, r.raw)
	}
	// UserApplicationListResponseSchema: message, data, status_code, and
	// no pagination_info.
	if len(r.body) != 3 || r.body["message"] != "Success" || r.body["status_code"] != float64(200) {
		t.Errorf("list: the answer's fields are not the schema's: %s", r.raw)
	}
	r = mustCall(t, a, http.MethodPost, path, testToken, `{"pagination": {"page_offset": 2, "page_size": 2}}`)
	if data, _ := r.body["data"].([]any); len(data) != 1 || data[0].(map[string]any)["application_name"] != "a" {
		t.Errorf("second page: %s", r.raw)
	}
	r = mustCall(t, a, http.MethodPost, path, testToken, `{"filters": {"application_status": {"one_of": ["submitted"]}}, "pagination": {"page_offset": 1, "page_size": 10}}`)
	if data, _ := r.body["data"].([]any); len(data) != 0 {
		t.Errorf("filter on submitted: %s", r.raw)
	}
	if r := mustCall(t, a, http.MethodPost, path, otherTok, `{"pagination": {"page_offset": 1, "page_size": 2}}`); r.status != 403 {
		t.Errorf("another user's list: %d %s", r.status, r.raw)
	}
	if r := mustCall(t, a, http.MethodPost, path, testToken, `{}`); r.status != 422 {
		t.Errorf("list without pagination: %d %s", r.status, r.raw)
	}
}

func TestGatewayRefusesACallWithoutAKnownKey(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	for _, key := range []string{"", "wrong"} {
		r, err := call(t, a, http.MethodPost, "/alpha/applications/start", key, testToken, `{"competition_id": "`+compOpen+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 403 || r.raw != `{"message":"Forbidden"}` || r.header.Get("X-Amzn-Errortype") != "ForbiddenException" {
			t.Errorf("key %q: %d %s", key, r.status, r.raw)
		}
	}
	if l := a.Ledger(); l.Started != 0 || l.Forbidden != 2 {
		t.Errorf("ledger %+v", l)
	}
}

func TestUnknownTokenIs401(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	for _, tok := range []string{"", "nobody"} {
		r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", tok, `{"competition_id": "`+compOpen+`"}`)
		if r.status != 401 || r.body["message"] != "Token session does not exist" {
			t.Errorf("token %q: %d %s", tok, r.status, r.raw)
		}
	}
}

// Maintenance answers before the API's authentication, but behind the
// gateway's key.
func TestMaintenanceAnswersBeforeAuthentication(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	a.SetMaintenance(90 * time.Second)
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", "", `{"competition_id": "`+compOpen+`"}`)
	if r.status != 503 || r.header.Get("Retry-After") != "90" || r.body["message"] != "API is undergoing scheduled maintenance" {
		t.Errorf("maintenance: %d %v %s", r.status, r.header, r.raw)
	}
	if r, _ := call(t, a, http.MethodGet, "/alpha/applications/"+compOpen, "", "", ""); r.status != 403 {
		t.Errorf("maintenance without a key: %d, want the gateway's 403", r.status)
	}
	a.SetMaintenance(0)
	start(t, a, "after")
	if l := a.Ledger(); l.Started != 1 || l.InMaint != 1 {
		t.Errorf("ledger %+v", l)
	}
}

func TestGatewayThrottlesPastTheBurstAndRefillsAtTheRate(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	get := func() reply { return mustCall(t, a, http.MethodGet, "/alpha/applications/"+compOpen, testToken, "") }
	for i := range DefaultBurstLimit {
		if r := get(); r.status != 404 {
			t.Fatalf("call %d within the burst: %d %s", i+1, r.status, r.raw)
		}
	}
	r := get()
	if r.status != 429 || r.raw != `{"message":"Too Many Requests"}` || r.header.Get("X-Amzn-Errortype") != "TooManyRequestsException" || r.header.Get("Retry-After") != "" {
		t.Fatalf("past the burst: %d %v %s", r.status, r.header, r.raw)
	}
	clk.Advance(time.Second / DefaultRateLimit)
	if r := get(); r.status != 404 {
		t.Errorf("after a tenth of a second: %d", r.status)
	}
	if r := get(); r.status != 429 {
		t.Errorf("a second call in the same tenth: %d", r.status)
	}
	if l := a.Ledger(); l.Throttled != 2 {
		t.Errorf("throttled %d, want 2", l.Throttled)
	}
}

func TestGatewayQuotaLastsTheMonth(t *testing.T) {
	a, clk := newTestAPI(t, Config{MonthlyQuota: 3, RateLimit: -1})
	for range 3 {
		start(t, a, "x")
	}
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, `{"competition_id": "`+compOpen+`"}`)
	if r.status != 429 || r.raw != `{"message":"Limit Exceeded"}` || r.header.Get("X-Amzn-Errortype") != "LimitExceededException" || r.header.Get("Retry-After") != "" {
		t.Fatalf("past the quota: %d %v %s", r.status, r.header, r.raw)
	}
	clk.Advance(26 * 24 * time.Hour) // 30 December: the same month
	if r := mustCall(t, a, http.MethodGet, "/alpha/applications/"+compOpen, testToken, ""); r.status != 429 {
		t.Errorf("later the same month: %d", r.status)
	}
	clk.Advance(2 * 24 * time.Hour) // 1 January
	start(t, a, "next month")
	if l := a.Ledger(); l.Started != 4 || l.OverQuota != 2 {
		t.Errorf("ledger %+v", l)
	}
}

// An API slower than the integration timeout: the gateway answers 504
// after 29 s, and the application is started all the same.
func TestGatewayTimesOutAt29SecondsWhileTheAPIGoesOn(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	a.SetWork(time.Minute)
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, `{"competition_id": "`+compOpen+`"}`)
	if r.status != 504 || r.raw != `{"message": "Endpoint request timed out"}` {
		t.Fatalf("slow start: %d %s", r.status, r.raw)
	}
	a.Wait()
	if clk.slept != time.Minute {
		t.Errorf("the API took %v, want a minute", clk.slept)
	}
	if l := a.Ledger(); l.Started != 1 || l.TimedOut != 1 {
		t.Errorf("ledger %+v", l)
	}
	a.SetWork(DefaultIntegrationTimeout - time.Millisecond)
	start(t, a, "just in time")
}

func TestDropClosesTheConnectionAfterTheRequestIsApplied(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	a.DropNext(1)
	_, err := call(t, a, http.MethodPost, "/alpha/applications/start", testKey, testToken, `{"competition_id": "`+compOpen+`"}`)
	if err == nil {
		t.Fatal("the dropped start was answered")
	}
	if l := a.Ledger(); l.Started != 1 || l.Dropped != 1 {
		t.Fatalf("ledger %+v", l)
	}
	a.DropEvery(2)
	id := start(t, a, "answered")
	// A refused submit is not applied, so it neither counts nor drops.
	if r := mustCall(t, a, http.MethodPost, "/alpha/applications/00000000-0000-4000-8000-000000000000/submit", testToken, ""); r.status != 404 {
		t.Fatalf("unknown submit: %d", r.status)
	}
	if _, err := call(t, a, http.MethodPost, "/alpha/applications/"+id+"/submit", testKey, testToken, ""); err == nil {
		t.Fatal("the second applied request was answered under DropEvery(2)")
	}
	if n := a.Ledger().Submitted[id]; n != 1 {
		t.Errorf("the dropped submit was applied %d times", n)
	}
}

func TestUnknownRouteIs404(t *testing.T) {
	a, _ := newTestAPI(t, Config{})
	for _, p := range []string{"/alpha/applications/not-a-uuid/submit", "/alpha/applications/start/x", "/v2/anything"} {
		if r := mustCall(t, a, http.MethodPost, p, testToken, ""); r.status != 404 {
			t.Errorf("%s: %d", p, r.status)
		}
	}
	if r := mustCall(t, a, http.MethodGet, "/alpha/applications/start", testToken, ""); r.status != 404 {
		t.Errorf("GET start: %d", r.status)
	}
}

func TestSpendQuotaRefusesTheRestOfTheMonth(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	a.SpendQuota(testKey)
	if r := mustCall(t, a, http.MethodGet, "/alpha/applications/"+compOpen, testToken, ""); r.status != 429 || r.header.Get("X-Amzn-Errortype") != "LimitExceededException" {
		t.Fatalf("after SpendQuota: %d %v", r.status, r.header)
	}
	clk.Advance(28 * 24 * time.Hour) // 1 January
	if r := mustCall(t, a, http.MethodGet, "/alpha/applications/"+compOpen, testToken, ""); r.status != 404 {
		t.Errorf("the next month: %d", r.status)
	}
}

// gatedClock is a testClock whose Sleep of hold blocks until release is
// closed, and says on held that it began.
type gatedClock struct {
	*testClock
	hold    time.Duration
	held    chan struct{}
	release chan struct{}
}

func (c *gatedClock) Sleep(ctx context.Context, d time.Duration) error {
	if d == c.hold {
		c.held <- struct{}{}
		<-c.release
	}
	return c.testClock.Sleep(ctx, d)
}

// waitHeld reports whether the Sleep of hold began within a few
// seconds; if not, it lets any such Sleep through.
func (c *gatedClock) waitHeld() bool {
	select {
	case <-c.held:
		return true
	case <-time.After(5 * time.Second):
		close(c.release)
		return false
	}
}

func newGatedAPI(t *testing.T, hold time.Duration) (*API, *gatedClock) {
	t.Helper()
	clk := &gatedClock{testClock: &testClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)},
		hold: hold, held: make(chan struct{}, 1), release: make(chan struct{})}
	a := New(Config{APIKeys: []string{testKey}, Users: map[string]string{testToken: testUser}, Now: clk.Now, Sleep: clk.Sleep})
	t.Cleanup(a.Close)
	a.AddCompetition(Competition{ID: compOpen, OpportunityNumber: "HHS-2026-ACF-0001"})
	return a, clk
}

// Past the integration timeout, the gateway answers 504 before the API
// has finished: the application is started after the answer went out.
func TestGatewayAnswers504BeforeTheAPIFinishes(t *testing.T) {
	a, clk := newGatedAPI(t, time.Minute-DefaultIntegrationTimeout)
	a.SetWork(time.Minute)
	r := mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, `{"competition_id": "`+compOpen+`"}`)
	if r.status != 504 {
		t.Fatalf("slow start: %d %s", r.status, r.raw)
	}
	if !clk.waitHeld() {
		t.Fatal("the API never went on with the start")
	}
	if l := a.Ledger(); l.Started != 0 || l.TimedOut != 1 {
		t.Errorf("when the 504 went out: ledger %+v; want nothing started yet", l)
	}
	clk.mu.Lock()
	waited := clk.slept
	clk.mu.Unlock()
	if waited != DefaultIntegrationTimeout {
		t.Errorf("the gateway waited %v, want %v", waited, DefaultIntegrationTimeout)
	}
	close(clk.release)
	a.Wait()
	if l := a.Ledger(); l.Started != 1 {
		t.Errorf("after the work: ledger %+v; want the application started", l)
	}
}

// The API finishes what it was given when the client goes away.
func TestAPIFinishesTheWorkOfAClientThatLeft(t *testing.T) {
	a, clk := newGatedAPI(t, time.Second)
	a.SetWork(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL()+"/alpha/applications/start", strings.NewReader(`{"competition_id": "`+compOpen+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", testKey)
	req.Header.Set("X-SGG-Token", testToken)
	done := make(chan error, 1)
	go func() {
		resp, err := a.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if !clk.waitHeld() {
		cancel()
		t.Fatal("the API never began the start")
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the client that left was answered")
	}
	close(clk.release)
	a.Wait()
	if l := a.Ledger(); l.Started != 1 {
		t.Errorf("ledger %+v; want the application started", l)
	}
}

// A competition's record gives its closing date and whether it is open;
// the API key alone reads it. It takes applications to the end of its
// closing date plus the grace period, a day in US Eastern time.
func TestCompetitionClosesAtTheEndOfItsDatePlusGraceInUSEastern(t *testing.T) {
	a, clk := newTestAPI(t, Config{})
	const comp = "33333333-4444-4555-8666-777777777777"
	// 2026-12-04T18:00Z is 13:00 in New York: the closing day, then one
	// day of grace.
	a.AddCompetition(Competition{ID: comp, OpportunityNumber: "HHS-2026-ACF-0003", ClosingDate: "2026-12-04", GracePeriod: 1})
	read := func() reply {
		t.Helper()
		r := mustCall(t, a, http.MethodGet, "/alpha/competitions/"+comp, "", "")
		if r.status != 200 {
			t.Fatalf("competition: %d %s", r.status, r.raw)
		}
		return r
	}
	startIn := func() reply {
		t.Helper()
		return mustCall(t, a, http.MethodPost, "/alpha/applications/start", testToken, `{"competition_id": "`+comp+`"}`)
	}
	r := read()
	data, _ := r.body["data"].(map[string]any)
	if data["closing_date"] != "2026-12-04" || data["is_open"] != true || data["competition_id"] != comp {
		t.Errorf("competition: %s", r.raw)
	}
	if _, ok := data["grace_period"]; ok {
		t.Errorf("the schema carries no grace_period: %s", r.raw)
	}
	// 2026-12-06T04:59:59Z is 23:59:59 on the 5th in New York: the grace
	// day's last second.
	clk.Advance(time.Date(2026, 12, 6, 4, 59, 59, 0, time.UTC).Sub(clk.Now()))
	if r := startIn(); r.status != 200 {
		t.Fatalf("start on the grace day: %d %s", r.status, r.raw)
	}
	clk.Advance(time.Second)
	if r := startIn(); r.status != 422 || errorType(r) != "competition_not_open" {
		t.Errorf("start after the grace day: %d %s", r.status, r.raw)
	}
	if r := read(); r.body["data"].(map[string]any)["is_open"] != false {
		t.Errorf("after the grace day: %s", r.raw)
	}
	if r := mustCall(t, a, http.MethodGet, "/alpha/competitions/00000000-0000-4000-8000-000000000000", "", ""); r.status != 404 ||
		!strings.HasPrefix(r.body["message"].(string), "Could not find Competition with ID ") {
		t.Errorf("unknown competition: %d %s", r.status, r.raw)
	}
	if r := mustCall(t, a, http.MethodGet, "/alpha/competitions/"+compOpen, "", ""); r.body["data"].(map[string]any)["closing_date"] != nil {
		t.Errorf("a competition without a closing date: %s", r.raw)
	}
}
