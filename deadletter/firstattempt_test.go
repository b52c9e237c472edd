package deadletter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/grantsgov"
	"github.com/grantretry/grantretry/internal/fakes2s"
)

// wrapped is a RoundTripper layer over a grantretry Transport, as an
// otelhttp Transport, an auth layer or the fleet tool's header layer is:
// a client with it is not a *grantretry.Transport.
type wrapped struct{ next http.RoundTripper }

func (w wrapped) RoundTrip(r *http.Request) (*http.Response, error) { return w.next.RoundTrip(r) }

// s2sLetter is the letter of a SubmitApplication titled title whose only
// attempt began at first and was dropped before the funder recorded it.
func s2sLetter(f *fakes2s.Funder, title string, first time.Time) *grantretry.Letter {
	body := fakes2s.SubmitEnvelope(title, "<SF424>corrected budget</SF424>")
	sum := sha256.Sum256(body)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             "20260302T100000Z-c0ffee",
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopUnreconciled,
		Reason:         "transport:eof",
		Method:         http.MethodPost,
		URL:            f.URL(),
		Header:         http.Header{"Content-Type": {fakes2s.ContentType}, "Soapaction": {fakes2s.Action(fakes2s.OpSubmitApplication)}},
		Body:           body,
		BodySHA256:     hex.EncodeToString(sum[:]),
		BodyBytes:      int64(len(body)),
		IdempotencyKey: grantretry.IdempotencyKey(title, body),
		CorrelationID:  "c0ffee",
		SubmissionID:   title,
		Attempts:       1,
		Ambiguous:      true,
		LastError:      "EOF",
		FirstAttempt:   first,
		LastAttempt:    first,
		Created:        first.Add(time.Second),
	}
}

// A correction sent under the title of an application received an hour
// before it is a new submission: the reconciler is asked with the
// letter's first attempt, through a client whose Transport wraps a
// grantretry Transport, so the earlier application does not count, and
// the correction is sent rather than answered "reconciled" with the
// earlier tracking number.
func TestEveryQuestionAboutALetterCarriesItsFirstAttempt(t *testing.T) {
	var now atomic.Int64
	first := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	now.Store(first.Add(-time.Hour).UnixNano())
	f, err := fakes2s.Start(fakes2s.Options{DropRate: -1, Now: func() time.Time { return time.Unix(0, now.Load()).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	inner := f.NewTransport()
	t.Cleanup(func() { inner.CloseIdleConnections(); f.Close() })
	const title = "PROP-77"
	l := s2sLetter(f, title, first)

	// The original application, received an hour before the correction's first attempt.
	req, _ := http.NewRequest(http.MethodPost, f.URL(), bytes.NewReader(fakes2s.SubmitEnvelope(title, "<SF424/>")))
	req.Header.Set("Content-Type", fakes2s.ContentType)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
	resp, err := (&http.Client{Transport: inner}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	original := f.TrackingNumbers(title)
	now.Store(first.Add(2 * time.Hour).UnixNano())

	var asked []time.Time
	r, err := grantsgov.NewReconciler(&http.Client{Transport: inner}, grantsgov.DefaultClockSkew)
	if err != nil {
		t.Fatal(err)
	}
	reconcile := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
		asked = append(asked, q.FirstAttempt)
		return r.Reconcile(ctx, q)
	}
	tr := grantretry.New(inner)
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: wrapped{tr}}
	resp, err = deadletter.Redeliver(context.Background(), client, l, reconcile)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if deadletter.Reconciled(resp) {
		t.Errorf("the correction was answered reconciled, with the original %v", original)
	}
	if n := f.Applications(title); n != 2 {
		t.Errorf("the funder has %d applications under %s, want 2: the original and the correction", n, title)
	}
	if len(asked) == 0 {
		t.Fatal("the reconciler was never asked")
	}
	for i, at := range asked {
		if !at.Equal(first) {
			t.Errorf("question %d carried FirstAttempt %v, want the letter's %v", i+1, at, first)
		}
	}
}

// A grantretry Transport inside the client's chain, with a reconciler of
// its own, asks about an ambiguous attempt of the redelivery with the
// letter's first attempt too, not the redelivery's start.
func TestATransportInsideTheChainAsksWithTheLettersFirstAttempt(t *testing.T) {
	first := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	f, err := fakes2s.Start(fakes2s.Options{Drop: func(string, int) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	inner := f.NewTransport()
	t.Cleanup(func() { inner.CloseIdleConnections(); f.Close() })
	l := s2sLetter(f, "PROP-78", first)
	l.Ambiguous = false // sent without a question; its attempt is dropped after the funder records it

	var asked []time.Time
	reconcile := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
		asked = append(asked, q.FirstAttempt)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
	}
	tr := grantretry.New(inner, grantretry.WithReconciler(reconcile))
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := deadletter.Redeliver(context.Background(), &http.Client{Transport: wrapped{tr}}, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(asked) != 1 || !asked[0].Equal(first) {
		t.Errorf("the Transport asked with FirstAttempt %v, want once, with the letter's %v", asked, first)
	}
	if n := f.Applications("PROP-78"); n != 1 {
		t.Errorf("the funder has %d applications, want the one it recorded", n)
	}
}
