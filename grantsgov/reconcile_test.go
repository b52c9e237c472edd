package grantsgov_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantsgov"
	"github.com/grantretry/grantretry/internal/fakes2s"
)

// startFunder starts the fake S2S endpoint over mutual TLS, closed when
// the test ends, and a client that presents its certificate.
func startFunder(t *testing.T, o fakes2s.Options) (*fakes2s.Funder, *http.Client) {
	t.Helper()
	f, err := fakes2s.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	tr := f.NewTransport()
	t.Cleanup(func() { tr.CloseIdleConnections(); f.Close() })
	return f, &http.Client{Transport: tr}
}

func newReconciler(t *testing.T, client *http.Client) *grantsgov.Reconciler {
	t.Helper()
	r, err := grantsgov.NewReconciler(client, grantsgov.DefaultClockSkew)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// submitRequest is a SubmitApplication for title, as the WSDL shapes it.
func submitRequest(t *testing.T, ctx context.Context, url string, envelope []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(envelope))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", fakes2s.ContentType)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
	return req
}

// submitDirect submits title straight to the funder, without grantretry,
// and returns the funder's receipt.
func submitDirect(t *testing.T, f *fakes2s.Funder, client *http.Client, envelope []byte) grantsgov.Receipt {
	t.Helper()
	resp, err := client.Do(submitRequest(t, context.Background(), f.URL(), envelope))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r, err := grantsgov.ParseSubmitResponse(body)
	if err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return r
}

// query is what the Transport asks after an ambiguous first attempt of a
// SubmitApplication titled title, sent at first.
func query(t *testing.T, f *fakes2s.Funder, title string, first time.Time) grantretry.ReconcileQuery {
	t.Helper()
	env := fakes2s.SubmitEnvelope(title, "<SF424/>")
	req := submitRequest(t, context.Background(), f.URL(), env)
	return grantretry.ReconcileQuery{Request: req, SubmissionID: title, Attempt: 1, Err: io.ErrUnexpectedEOF, FirstAttempt: first}
}

func TestReconcilerFindsDroppedSubmissionByTitle(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{Drop: func(title string, n int) bool { return n == 1 }})
	first := time.Now()
	if resp, err := client.Do(submitRequest(t, context.Background(), f.URL(), fakes2s.SubmitEnvelope("PROP-1", "<SF424/>"))); err == nil {
		resp.Body.Close()
		t.Fatalf("the funder answered %d; want the connection dropped", resp.StatusCode)
	}
	recorded := f.TrackingNumbers("PROP-1")
	if len(recorded) != 1 {
		t.Fatalf("the funder recorded %v; want one application", recorded)
	}
	resp, err := newReconciler(t, client).Reconcile(context.Background(), query(t, f, "PROP-1", first))
	if err != nil || resp == nil {
		t.Fatalf("Reconcile = %v, %v; want the funder's answer", resp, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	if _, err := fakes2s.Envelope(resp.Header.Get("Content-Type"), body); err != nil || !bytes.HasPrefix(body, []byte("--uuid:")) {
		t.Errorf("answer not MTOM-framed as the service frames it (%v): %q", err, body)
	}
	r, err := grantsgov.ParseSubmitResponse(body)
	if err != nil || r.TrackingNumber != recorded[0] {
		t.Errorf("the answer reads %+v, %v; want tracking number %s", r, err, recorded[0])
	}
	// The fake's own reader, which a pipeline written against it uses, reads it alike.
	if fr, err := fakes2s.ParseSubmitResponse(resp.Header.Get("Content-Type"), body); err != nil || fr.TrackingNumber != recorded[0] || !fr.ReceivedDateTime.Equal(r.ReceivedDateTime) {
		t.Errorf("fakes2s reads %+v, %v", fr, err)
	}
	if f.Applications("PROP-1") != 1 {
		t.Errorf("%d applications; the question must record none", f.Applications("PROP-1"))
	}
}

func TestReconcilerAnswersNotAppliedForTitleNeverReceived(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{DropRate: -1})
	submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-OTHER", "<SF424/>"))
	resp, err := newReconciler(t, client).Reconcile(context.Background(), query(t, f, "PROP-NEVER", time.Now()))
	if resp != nil || err != nil {
		t.Fatalf("Reconcile = %v, %v; want not applied (nil, nil)", resp, err)
	}
	if f.Queries() != 1 {
		t.Errorf("%d queries, want 1", f.Queries())
	}
}

func TestReconcilerCannotTellWhenListQueryFaults(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{DropRate: -1, QueryFailRate: 1})
	submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-2", "<SF424/>"))
	resp, err := newReconciler(t, client).Reconcile(context.Background(), query(t, f, "PROP-2", time.Now().Add(-time.Hour)))
	if resp != nil || !errors.Is(err, grantsgov.ErrListFailed) {
		t.Fatalf("Reconcile = %v, %v; want cannot tell, ErrListFailed", resp, err)
	}
}

// A resubmission after a refusal: the first application under the title
// was received and Rejected with Errors; the pipeline fixed it and sent it
// again under the same title, and that attempt was ambiguous and never
// recorded.
func TestReconcilerDoesNotCountRejectedWithErrorsApplication(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{DropRate: -1})
	refused := submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-3", "<SF424>")) // not well-formed
	apps, err := fakes2s.Lookup(context.Background(), client, f.URL(), "PROP-3")
	if err != nil || len(apps) != 1 || apps[0].Status != fakes2s.StatusRejectedWithErrors {
		t.Fatalf("the funder lists %+v, %v; want one application Rejected with Errors", apps, err)
	}
	// The clock cannot tell this one apart: it was received within the skew.
	resp, err := newReconciler(t, client).Reconcile(context.Background(), query(t, f, "PROP-3", refused.ReceivedDateTime))
	if resp != nil || err != nil {
		t.Fatalf("Reconcile = %v, %v; want not applied", resp, err)
	}
	// Once the service accepts the corrected one, it counts.
	ok := submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-3", "<SF424/>"))
	resp, err = newReconciler(t, client).Reconcile(context.Background(), query(t, f, "PROP-3", refused.ReceivedDateTime))
	if err != nil || resp == nil {
		t.Fatalf("Reconcile = %v, %v; want applied", resp, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if r, err := grantsgov.ParseSubmitResponse(body); err != nil || r.TrackingNumber != ok.TrackingNumber {
		t.Errorf("applied as %+v, %v; want %s", r, err, ok.TrackingNumber)
	}
}

func TestReconcilerDoesNotCountApplicationReceivedBeforeFirstAttempt(t *testing.T) {
	var now atomic.Int64
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	now.Store(start.UnixNano())
	f, client := startFunder(t, fakes2s.Options{DropRate: -1, Now: func() time.Time { return time.Unix(0, now.Load()).UTC() }})
	earlier := submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-4", "<SF424/>"))
	r := newReconciler(t, client)

	resp, err := r.Reconcile(context.Background(), query(t, f, "PROP-4", start.Add(time.Hour)))
	if resp != nil || err != nil {
		t.Fatalf("an application an hour before the first attempt: Reconcile = %v, %v; want not applied", resp, err)
	}
	// The same application counts for a call that began before it was received.
	resp, err = r.Reconcile(context.Background(), query(t, f, "PROP-4", start.Add(-time.Second)))
	if resp == nil || err != nil {
		t.Fatalf("Reconcile = %v, %v; want applied", resp, err)
	}
	resp.Body.Close()
	// And one received after the first attempt, beside the earlier one, is the call's.
	now.Store(start.Add(2 * time.Hour).UnixNano())
	later := submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-4", "<SF424/>"))
	resp, err = r.Reconcile(context.Background(), query(t, f, "PROP-4", start.Add(time.Hour)))
	if resp == nil || err != nil {
		t.Fatalf("Reconcile = %v, %v; want applied", resp, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if got, err := grantsgov.ParseSubmitResponse(body); err != nil || got.TrackingNumber != later.TrackingNumber || got.TrackingNumber == earlier.TrackingNumber {
		t.Errorf("applied as %+v, %v; want the later %s, not %s", got, err, later.TrackingNumber, earlier.TrackingNumber)
	}
}

func TestReconcilerCannotTellWhenTitleIsNotSubmissionID(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{DropRate: -1})
	q := query(t, f, "PROP-5", time.Now())
	q.SubmissionID = "PROP-5-other"
	resp, err := newReconciler(t, client).Reconcile(context.Background(), q)
	if resp != nil || !errors.Is(err, grantsgov.ErrTitleMismatch) {
		t.Fatalf("Reconcile = %v, %v; want ErrTitleMismatch", resp, err)
	}
	if f.Queries() != 0 {
		t.Errorf("%d queries by a title that is not the submission's", f.Queries())
	}
}

func TestReconcilerAsksBySubmissionIDWhenBodyIsGone(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{DropRate: -1})
	want := submitDirect(t, f, client, fakes2s.SubmitEnvelope("PROP-6", "<SF424/>"))
	q := query(t, f, "PROP-6", want.ReceivedDateTime)
	q.Request.Body, q.Request.GetBody, q.Request.ContentLength = nil, nil, 0
	resp, err := newReconciler(t, client).Reconcile(context.Background(), q)
	if resp == nil || err != nil {
		t.Fatalf("Reconcile = %v, %v; want applied", resp, err)
	}
	resp.Body.Close()
	q.SubmissionID = ""
	if resp, err := newReconciler(t, client).Reconcile(context.Background(), q); resp != nil || !errors.Is(err, grantsgov.ErrNoTitle) {
		t.Fatalf("no body, no id: Reconcile = %v, %v; want ErrNoTitle", resp, err)
	}
}

func TestNewReconcilerRefusesNilClientAndNegativeSkew(t *testing.T) {
	if r, err := grantsgov.NewReconciler(nil, 0); r != nil || err == nil {
		t.Errorf("nil client: %v, %v", r, err)
	}
	if r, err := grantsgov.NewReconciler(http.DefaultClient, -time.Second); r != nil || err == nil {
		t.Errorf("negative skew: %v, %v", r, err)
	}
}

func TestSubmissionTitleReadsTheApplicationHeader(t *testing.T) {
	if got, err := grantsgov.SubmissionTitle(fakes2s.SubmitEnvelope(" PROP & 7 ", "<SF424><SubmissionTitle>form's</SubmissionTitle></SF424>")); err != nil || got != "PROP & 7" {
		t.Errorf("SubmissionTitle = %q, %v; want %q", got, err, "PROP & 7")
	}
	for name, body := range map[string][]byte{
		"list query": fakes2s.ListEnvelope(fakes2s.Filter{Type: fakes2s.FilterSubmissionTitle, Value: "PROP-7"}),
		"not XML":    []byte("<html>"),
		"empty":      nil,
	} {
		if got, err := grantsgov.SubmissionTitle(body); !errors.Is(err, grantsgov.ErrNoTitle) {
			t.Errorf("%s: SubmissionTitle = %q, %v; want ErrNoTitle", name, got, err)
		}
	}
}

// A list query records nothing: an ambiguous one is sent again, without a
// question about a title it does not have.
func TestReconcilerAnswersNotAppliedForAListQuery(t *testing.T) {
	f, client := startFunder(t, fakes2s.Options{DropRate: -1})
	env := fakes2s.ListEnvelope(fakes2s.Filter{Type: fakes2s.FilterSubmissionTitle, Value: "PROP-8"})
	req := submitRequest(t, context.Background(), f.URL(), env)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpGetApplicationList))
	q := grantretry.ReconcileQuery{Request: req, Attempt: 1, Status: http.StatusInternalServerError, FirstAttempt: time.Now()}
	if resp, err := newReconciler(t, client).Reconcile(context.Background(), q); resp != nil || err != nil {
		t.Fatalf("Reconcile = %v, %v; want not applied", resp, err)
	}
	if f.Queries() != 0 {
		t.Errorf("%d queries asked about a query", f.Queries())
	}
	// The same body under SubmitApplication's action is no query: it cannot be told.
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
	req.Body, _ = req.GetBody()
	if resp, err := newReconciler(t, client).Reconcile(context.Background(), q); resp != nil || !errors.Is(err, grantsgov.ErrNoTitle) {
		t.Fatalf("Reconcile = %v, %v; want ErrNoTitle", resp, err)
	}
}
