package simplergrants_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

// pipeline is a client as a pipeline builds it: the credentials, under
// grantretry with ClassifyFault and the Reconciler, on a clock that never
// waits.
func pipeline(t *testing.T, a *fakesimpler.API, client *http.Client) *http.Client {
	t.Helper()
	return pipelineOver(t, a, client, credentials{a.Client().Transport})
}

func pipelineOver(t *testing.T, a *fakesimpler.API, client *http.Client, inner http.RoundTripper) *http.Client {
	t.Helper()
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	tr := grantretry.New(inner,
		grantretry.WithClassifier(simplergrants.ClassifyFault),
		grantretry.WithReconciler(rec.Reconcile),
		grantretry.WithClock(fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}),
		grantretry.WithBudget(3, time.Minute),
		grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}
}

func send(t *testing.T, c *http.Client, req *http.Request) (*http.Response, grantretry.Outcome) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := grantretry.OutcomeOf(resp)
	return resp, o
}

// A start whose connection drops after the API created the application is
// found by its name, and not sent again.
func TestDroppedStartIsReconciledNotStartedTwice(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	a.DropNext(1)
	ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
	resp, o := send(t, pipeline(t, a, client), startRequest(t, ctx, a.URL(), "sub-1"))
	defer resp.Body.Close()
	if o.StopReason != grantretry.StopReconciled || o.Attempts != 1 || resp.StatusCode != 200 {
		t.Errorf("outcome %+v, status %d; want reconciled after one attempt", o, resp.StatusCode)
	}
	apps := a.Applications()
	if len(apps) != 1 || applicationID(t, resp) != apps[0].ID {
		t.Errorf("the API holds %v; the caller was answered for another", apps)
	}
}

// A submit whose connection drops after the API submitted, and one the
// gateway gave up on at 29 s while the API submitted all the same, are
// found submitted, and not sent again.
func TestAmbiguousSubmitIsReconciledNotSubmittedTwice(t *testing.T) {
	for _, fault := range []string{"drop", "gateway timeout"} {
		t.Run(fault, func(t *testing.T) {
			a, client := startAPI(t, fakesimpler.Config{})
			id := startDirect(t, a, client, "sub-1")
			var inner http.RoundTripper = credentials{a.Client().Transport}
			if fault == "drop" {
				a.DropNext(1)
			} else {
				// The API is slow for the submit only: the question is answered.
				a.SetWork(time.Minute)
				inner = afterFirst{inner, func() { a.Wait(); a.SetWork(0) }}
			}
			ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
			resp, o := send(t, pipelineOver(t, a, client, inner), submitRequest(t, ctx, a.URL(), id))
			resp.Body.Close()
			if o.StopReason != grantretry.StopReconciled || o.Attempts != 1 || resp.StatusCode != 200 {
				t.Errorf("outcome %+v, status %d; want reconciled after one attempt", o, resp.StatusCode)
			}
			if n := a.Ledger().Submitted[id]; n != 1 {
				t.Errorf("%d submits applied, want 1", n)
			}
		})
	}
}

// A submit the API has not applied is sent again after the question.
func TestSubmitNotAppliedIsSentAgain(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
	// The connection drops before the request reached the API.
	gw := &onceDropped{next: credentials{a.Client().Transport}}
	resp, o := send(t, pipelineOver(t, a, client, gw), submitRequest(t, ctx, a.URL(), id))
	resp.Body.Close()
	if o.StopReason != grantretry.StopSuccess || o.Attempts != 2 || o.Reconciles != 1 {
		t.Errorf("outcome %+v; want success on the second attempt after one question", o)
	}
	if n := a.Ledger().Submitted[id]; n != 1 {
		t.Errorf("%d submits applied, want 1", n)
	}
}

// A submit the gateway answered 504 and the API never got to: the
// Reconciler cannot tell it from one the API is still at, and the
// submit is not sent again; the call ends owed to a later attempt.
func TestSubmitAnswered504AndNotFoundIsNotSentAgain(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	id := startDirect(t, a, client, "sub-1")
	ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
	gw := &onceGatewayTimeout{next: credentials{a.Client().Transport}}
	resp, err := pipelineOver(t, a, client, gw).Do(submitRequest(t, ctx, a.URL(), id))
	if err == nil {
		resp.Body.Close()
		o, _ := grantretry.OutcomeOf(resp)
		t.Fatalf("outcome %+v; want the call to end without a second submit", o)
	}
	var gerr *grantretry.Error
	if !errors.As(err, &gerr) || gerr.Outcome.Attempts != 1 || gerr.Outcome.Disposition == grantretry.FailedTerminal {
		t.Errorf("error %v; want one attempt, not failed", err)
	}
	if n := a.Ledger().Submitted[id]; n != 0 {
		t.Errorf("%d submits applied, want 0", n)
	}
}

// onceDropped fails the first request as a connection dropped after the
// request was written, without passing it on.
type onceDropped struct {
	next http.RoundTripper
	done bool
}

func (g *onceDropped) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.done {
		return g.next.RoundTrip(r)
	}
	g.done = true
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, io.ErrUnexpectedEOF
}

// onceGatewayTimeout answers the first request as the gateway does at
// 29 s, without passing it on.
type onceGatewayTimeout struct {
	next http.RoundTripper
	done bool
}

func (g *onceGatewayTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.done {
		return g.next.RoundTrip(r)
	}
	g.done = true
	if r.Body != nil {
		r.Body.Close()
	}
	return gatewayTimeoutResponse(r), nil
}

// afterFirst calls then after each round trip, the first included.
type afterFirst struct {
	next http.RoundTripper
	then func()
}

func (f afterFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := f.next.RoundTrip(r)
	f.then()
	return resp, err
}

// lateServer is an API behind a gateway that answers the first write 504
// and carries it out only after the Reconciler's first question about
// it, as the API may after the gateway gave up. It holds one application
// (app); writes counts the starts and submits it carried out.
type lateServer struct {
	mu      sync.Mutex
	names   []string // the applications started, by name
	status  string   // app's status
	pending func()   // the write the API is still at
	writes  int
}

const lateApp = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"

func (s *lateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	write := func(apply func()) {
		if s.writes == 0 && s.pending == nil {
			s.pending = apply
			w.WriteHeader(http.StatusGatewayTimeout)
			io.WriteString(w, `{"message": "Endpoint request timed out"}`)
			return
		}
		apply()
	}
	switch {
	case r.URL.Path == "/alpha/applications/start":
		var b struct {
			Name string `json:"application_name"`
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		write(func() { s.writes++; s.names = append(s.names, b.Name) })
		if s.pending == nil {
			fmt.Fprintf(w, `{"message":"Success","data":{"application_id":%q},"status_code":200}`, lateApp)
		}
	case strings.HasSuffix(r.URL.Path, "/submit"):
		if s.status != "in_progress" {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"data":{},"errors":[{"type":"not_in_progress","message":"Cannot submit application, not currently in progress"}],"message":"Cannot submit application. It is currently in status: submitted","status_code":403}`)
			return
		}
		write(func() { s.writes++; s.status = "submitted" })
		if s.pending == nil {
			io.WriteString(w, `{"message":"Success","data":null,"status_code":200}`)
		}
	case r.Method == http.MethodGet:
		fmt.Fprintf(w, `{"message":"Success","data":{"application_id":%q,"application_status":%q},"status_code":200}`, lateApp, s.status)
		s.land()
	case strings.HasSuffix(r.URL.Path, "/applications"):
		items := []map[string]any{}
		for _, n := range s.names {
			items = append(items, map[string]any{"application_id": lateApp, "application_name": n})
		}
		b, _ := json.Marshal(map[string]any{"message": "Success", "data": items, "status_code": 200})
		w.Write(b)
		s.land()
	default:
		http.NotFound(w, r)
	}
}

// land carries out the write the API was still at. s.mu must be held.
func (s *lateServer) land() {
	if s.pending != nil {
		s.pending()
		s.pending = func() {} // the 504 is spent
	}
}

// A start or a submit the API carries out after the gateway's 504, later
// than the Reconciler's first question: the Reconciler cannot tell until
// it finds it, and it is carried out once, and not reported failed.
func TestWriteCarriedOutAfterTheGatewayTimeoutIsNotSentAgain(t *testing.T) {
	for _, write := range []string{"start", "submit"} {
		t.Run(write, func(t *testing.T) {
			s := &lateServer{status: "in_progress"}
			srv := httptest.NewServer(s)
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			rec := simplergrants.NewReconciler(srv.URL, srv.Client()).ForUser(userID)
			tr := grantretry.New(srv.Client().Transport, grantretry.WithClock(fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}),
				simplergrants.Profile(u.Host, rec))
			ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
			req := startRequest(t, ctx, srv.URL, "sub-1")
			if write == "submit" {
				req = submitRequest(t, ctx, srv.URL, lateApp)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			var o grantretry.Outcome
			if err == nil {
				o, _ = grantretry.OutcomeOf(resp)
				resp.Body.Close()
			} else if gerr := (*grantretry.Error)(nil); errors.As(err, &gerr) {
				o = gerr.Outcome
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.writes != 1 || len(s.names) > 1 {
				t.Errorf("the API carried the %s out %d times (applications %v)", write, s.writes, s.names)
			}
			if o.Disposition != grantretry.Succeeded || o.StopReason != grantretry.StopReconciled {
				t.Errorf("outcome %s/%s %s; want reconciled", o.Disposition, o.StopReason, o.Reason)
			}
		})
	}
}

// Against the fake: a start or a submit the API carries out after the
// gateway's 504, and after the Reconciler's first question. The first
// answer is "cannot tell"; the next finds the write, which is carried
// out once and not reported failed.
func TestFakesWriteFinishingAfterThe504IsFoundNotSentAgain(t *testing.T) {
	const work = time.Minute
	for _, write := range []string{"start", "submit"} {
		t.Run(write, func(t *testing.T) {
			release := make(chan struct{})
			released := sync.OnceFunc(func() { close(release) })
			defer released()
			a, client := startAPI(t, fakesimpler.Config{Sleep: func(ctx context.Context, d time.Duration) error {
				if d == work-fakesimpler.DefaultIntegrationTimeout {
					<-release // the API's work after the 504, held until the question was answered
				}
				return nil
			}})
			id := ""
			if write == "submit" {
				id = startDirect(t, a, client, "sub-1")
			}
			rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
			var answers []error
			reconcile := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
				resp, err := rec.Reconcile(ctx, q)
				answers = append(answers, err)
				if len(answers) == 1 {
					released()
					a.Wait()
				}
				return resp, err
			}
			a.SetWork(work)
			inner := afterFirst{credentials{a.Client().Transport}, func() { a.SetWork(0) }}
			tr := grantretry.New(inner,
				grantretry.WithClassifier(simplergrants.ClassifyFault),
				grantretry.WithReconciler(reconcile),
				grantretry.WithClock(fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}),
				grantretry.WithBudget(3, time.Minute),
				grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
			ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
			req := startRequest(t, ctx, a.URL(), "sub-1")
			if write == "submit" {
				req = submitRequest(t, ctx, a.URL(), id)
			}
			resp, o := send(t, &http.Client{Transport: tr}, req)
			resp.Body.Close()
			if o.StopReason != grantretry.StopReconciled || o.Attempts != 1 || o.Reconciles != 2 {
				t.Errorf("outcome %+v; want reconciled on the second question after one attempt", o)
			}
			if len(answers) == 0 || !errors.Is(answers[0], simplergrants.ErrCannotTell) {
				t.Errorf("the first answer: %v; want cannot tell", answers)
			}
			l := a.Ledger()
			if write == "start" && (l.Started != 1 || len(a.Applications()) != 1) {
				t.Errorf("the API holds %v", a.Applications())
			}
			if write == "submit" && l.Submitted[id] != 1 {
				t.Errorf("%d submits applied, want 1", l.Submitted[id])
			}
		})
	}
}

// hangs never answers: the attempt ends when its context does.
type hangs struct{}

func (hangs) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// An attempt the Transport's attempt timeout ended, unanswered: the API
// may still be at it, so a start not found is not sent again.
func TestStartTimedOutUnansweredIsNotSentAgain(t *testing.T) {
	a, client := startAPI(t, fakesimpler.Config{})
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	var answers []error
	tr := grantretry.New(hangs{},
		grantretry.WithClassifier(simplergrants.ClassifyFault),
		grantretry.WithReconciler(func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
			resp, err := rec.Reconcile(ctx, q)
			answers = append(answers, err)
			return resp, err
		}),
		grantretry.WithAttemptTimeout(20*time.Millisecond),
		grantretry.WithClock(fixedClock{time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}),
		grantretry.WithBudget(2, time.Minute),
		grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	ctx := grantretry.WithSubmissionID(context.Background(), "sub-1")
	resp, err := (&http.Client{Transport: tr}).Do(startRequest(t, ctx, a.URL(), "sub-1"))
	if err == nil {
		resp.Body.Close()
	}
	var gerr *grantretry.Error
	if !errors.As(err, &gerr) || gerr.Outcome.Attempts != 1 {
		t.Errorf("error %v; want the call to end after one attempt", err)
	}
	if len(answers) == 0 || !errors.Is(answers[0], simplergrants.ErrCannotTell) {
		t.Errorf("the Reconciler's answers: %v; want cannot tell", answers)
	}
}
