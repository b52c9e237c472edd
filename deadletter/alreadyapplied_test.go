package deadletter_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// notInProgressFunder answers every submit as Simpler Grants.gov answers
// one for an application already submitted (the simplergrants/testdata
// sample, with its source), and counts what it got.
func notInProgressFunder(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "simplergrants", "testdata", "submit-not-in-progress.body"))
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// appliedClient sends through a grantretry Transport whose rule reads
// that answer as the funder's word that the work was applied.
func appliedClient(srv *httptest.Server) *http.Client {
	rule := grantretry.Rule{Status: http.StatusForbidden, Contains: `"not_in_progress"`,
		Verdict: grantretry.Classification{Applied: true, Reason: "applied:not_in_progress"}}
	return &http.Client{Transport: grantretry.New(srv.Client().Transport,
		grantretry.WithClassifier(grantretry.ClassifyRules(rule)))}
}

func TestRedeliveryOfAnAmbiguousLetterAnsweredAlreadyAppliedIsDelivered(t *testing.T) {
	notApplied := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) { return nil, nil }
	for name, reconcile := range map[string]grantretry.ReconcileFunc{
		"TrustKey":                    deadletter.TrustKey,
		"a reconciler without record": notApplied,
	} {
		t.Run(name, func(t *testing.T) {
			srv, hits := notInProgressFunder(t)
			l := ledgerLetter(srv.URL)
			l.Ambiguous = true
			d := seedDir(t, l)
			resp, err := d.Redeliver(context.Background(), appliedClient(srv), l.ID, reconcile)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			o, ok := grantretry.OutcomeOf(resp)
			if !ok || o.Disposition != grantretry.Succeeded || o.StopReason != grantretry.StopAlreadyApplied {
				t.Errorf("outcome %+v, want succeeded (already_applied)", o)
			}
			if !deadletter.Delivered(resp) {
				t.Error("Delivered is false for an answer the Transport ended succeeded")
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("the funder got %d requests, want 1", n)
			}
			got, err := d.Get(l.ID)
			if err != nil || got.Attempts != l.Attempts || got.LastStatus != l.LastStatus {
				t.Errorf("the letter was written as a failed redelivery: attempts %d, last status %d (%v); want it as it was, %d and %d",
					got.Attempts, got.LastStatus, err, l.Attempts, l.LastStatus)
			}
			if err := d.MarkRedelivered(l.ID, deadletter.Redelivery{Status: resp.StatusCode, Disposition: o.Disposition}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Get(l.ID); err == nil {
				t.Error("the letter is still waiting after MarkRedelivered")
			}
		})
	}
}

func TestRedeliveryOfALetterThatIsNotAmbiguousAnsweredAlreadyAppliedIsARefusal(t *testing.T) {
	srv, _ := notInProgressFunder(t)
	l := ledgerLetter(srv.URL)
	d := seedDir(t, l)
	resp, err := d.Redeliver(context.Background(), appliedClient(srv), l.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o, _ := grantretry.OutcomeOf(resp); o.Disposition != grantretry.FailedTerminal || o.StopReason != grantretry.StopTerminal {
		t.Errorf("outcome %+v, want failed_terminal (terminal): nothing sent before could have been applied", o)
	}
	if deadletter.Delivered(resp) {
		t.Error("Delivered is true for a refusal")
	}
	got, err := d.Get(l.ID)
	if err != nil || got.Attempts != l.Attempts+1 || got.LastStatus != http.StatusForbidden || got.Ambiguous {
		t.Errorf("the letter after the refusal: %+v, %v; want one attempt more, last status 403, not ambiguous", got, err)
	}
}

func TestRedeliveryOfAnAmbiguousLetterGivesTheReconcilersRecord(t *testing.T) {
	srv, hits := notInProgressFunder(t)
	l := ledgerLetter(srv.URL)
	l.Ambiguous = true
	d := seedDir(t, l)
	var asked atomic.Int32
	reconcile := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
		if asked.Add(1) == 1 {
			return nil, nil // not before the send: the funder's record lags
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(http.NoBody)}, nil
	}
	resp, err := d.Redeliver(context.Background(), appliedClient(srv), l.ID, reconcile)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if resp.StatusCode != http.StatusOK || o.StopReason != grantretry.StopAlreadyApplied || o.Reconciles != 2 {
		t.Errorf("status %d, outcome %+v; want the record's 200, already_applied, after 2 questions", resp.StatusCode, o)
	}
	if !deadletter.Delivered(resp) || hits.Load() != 1 {
		t.Errorf("delivered %v after %d requests, want true after 1", deadletter.Delivered(resp), hits.Load())
	}
}

func TestDeliveredReadsTheOutcomeNotTheStatus(t *testing.T) {
	srv, _ := notInProgressFunder(t)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if deadletter.Delivered(resp) {
		t.Error("a 403 with no outcome is delivered")
	}
	if deadletter.Delivered(nil) {
		t.Error("a nil response is delivered")
	}
	if !deadletter.Delivered(&http.Response{StatusCode: http.StatusCreated}) {
		t.Error("a 201 is not delivered")
	}
}
