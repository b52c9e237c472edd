package fleet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// answering is a loopback funder that answers every request with status,
// and counts them.
func answering(t *testing.T, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// redelivered is what redeliverOnce saw: what Redeliver returned, the
// letter as the database then holds it, and the times the send was made
// between (widened by a second for the database's clock).
type redelivered struct {
	r             deadletter.Redelivery
	err           error
	got           *grantretry.Letter
	before, after time.Time
}

// redeliverOnce puts l, claims it and redelivers it through a grantretry
// Transport with opts (on a clock that does not sleep).
func redeliverOnce(t *testing.T, l *grantretry.Letter, opts ...grantretry.Option) redelivered {
	t.Helper()
	s := NewLetters(newPool(t), WithLimit(5*time.Second))
	ctx := context.Background()
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	claims, err := s.Claim(ctx, "w", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	tr := grantretry.New(nil, append([]grantretry.Option{grantretry.WithClock(instantClock{})}, opts...)...)
	defer tr.CloseIdleConnections()
	before := time.Now().Add(-time.Second)
	r, rerr := s.Redeliver(ctx, claims[0], &http.Client{Transport: tr}, nil)
	after := time.Now().Add(time.Second)
	got, rec, err := s.Get(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		t.Fatalf("the letter was marked redelivered: %+v", rec)
	}
	waiting, err := s.List(ctx)
	if err != nil || len(waiting) != 1 {
		t.Fatalf("List after a redelivery not delivered: %d letters, %v; want the letter waiting", len(waiting), err)
	}
	return redelivered{r: r, err: rerr, got: got, before: before, after: after}
}

// A redelivery the funder refuses (422) is written into the letter, as
// deadletter.Dir.Redeliver writes it: its attempt is added, the refusal is
// its last answer and verdict, so that deadletter.Refused sees it, and
// it is dated.
func TestLettersRedeliveryRefusedIsRecordedInTheLetter(t *testing.T) {
	srv, hits := answering(t, http.StatusUnprocessableEntity)
	l := testLetter(srv.URL, 1)
	l.Reason, l.LastError = "transient:503", "an earlier error"
	x := redeliverOnce(t, l)
	r, err, got, before, after := x.r, x.err, x.got, x.before, x.after
	if err == nil || r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("Redeliver: %+v, %v; want a 422 and an error", r, err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the funder was sent %d requests, want 1", n)
	}
	if got.Attempts != l.Attempts+1 || got.LastStatus != http.StatusUnprocessableEntity || got.LastError != "" || got.Reason != "terminal:422" {
		t.Errorf("after a 422: attempts %d, last status %d, last error %q, reason %q; want %d, 422, none, terminal:422",
			got.Attempts, got.LastStatus, got.LastError, got.Reason, l.Attempts+1)
	}
	if !deadletter.Refused(got) {
		t.Errorf("deadletter.Refused = false after the funder refused the redelivery")
	}
	if got.Ambiguous {
		t.Errorf("a letter refused with 422 is ambiguous")
	}
	if got.FirstAttempt.Before(before) || got.FirstAttempt.After(after) || got.LastAttempt.Before(before) || got.LastAttempt.After(after) {
		t.Errorf("first attempt %v, last attempt %v; want both between %v and %v", got.FirstAttempt, got.LastAttempt, before, after)
	}
}

// A redelivery whose retries all met 503 is written into the letter with
// every attempt the Transport made, and a first attempt it had stays. The
// funder named no time, so the letter's NotBefore, its earlier word, goes.
func TestLettersRedeliveryUnavailableIsRecordedInTheLetter(t *testing.T) {
	srv, hits := answering(t, http.StatusServiceUnavailable)
	l := testLetter(srv.URL, 2)
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.FirstAttempt, l.LastStatus, l.Reason = first, http.StatusBadGateway, "transient:502"
	l.NotBefore = time.Now().Add(-time.Minute).UTC()
	x := redeliverOnce(t, l, grantretry.WithBudget(2, time.Minute))
	r, err, got, before, after := x.r, x.err, x.got, x.before, x.after
	if err == nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("Redeliver: %+v, %v; want a 503 and an error", r, err)
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("the funder was sent %d requests, want 3", n)
	}
	if got.Attempts != l.Attempts+3 || got.LastStatus != http.StatusServiceUnavailable || got.Reason != "transient:503" {
		t.Errorf("after three 503s: attempts %d, last status %d, reason %q; want %d, 503, transient:503",
			got.Attempts, got.LastStatus, got.Reason, l.Attempts+3)
	}
	if !got.NotBefore.IsZero() {
		t.Errorf("NotBefore %v after a 503 that named no time, want none", got.NotBefore)
	}
	if deadletter.Refused(got) || got.Ambiguous {
		t.Errorf("after 503s: refused %v, ambiguous %v; want neither", deadletter.Refused(got), got.Ambiguous)
	}
	if !got.FirstAttempt.Equal(first) || got.LastAttempt.Before(before) || got.LastAttempt.After(after) {
		t.Errorf("first attempt %v, last attempt %v; want %v, and the last between %v and %v", got.FirstAttempt, got.LastAttempt, first, before, after)
	}
}

// A redelivery that ends in the Transport's error after its attempts (a
// funder that refuses connections) is written into the letter with its
// error as the last, in place of a status.
func TestLettersRedeliveryErrorIsRecordedInTheLetter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: each attempt is refused
	l := testLetter(url, 3)
	l.Reason = "transient:503"
	x := redeliverOnce(t, l, grantretry.WithBudget(1, time.Minute))
	rerr, got, after := x.err, x.got, x.after
	var gerr *grantretry.Error
	if !errors.As(rerr, &gerr) || gerr.Attempts == 0 {
		t.Fatalf("Redeliver: %v; want the Transport's error after its attempts", rerr)
	}
	if got.Attempts != l.Attempts+gerr.Attempts || got.LastStatus != 0 || got.LastError == "" {
		t.Errorf("after %d refused connections: attempts %d, last status %d, last error %q; want %d, 0, the error",
			gerr.Attempts, got.Attempts, got.LastStatus, got.LastError, l.Attempts+gerr.Attempts)
	}
	if gerr.Reason != "" && got.Reason != gerr.Reason {
		t.Errorf("reason %q, want the Transport's %q", got.Reason, gerr.Reason)
	}
	if got.LastAttempt.IsZero() || got.LastAttempt.After(after) {
		t.Errorf("last attempt %v, want the redelivery's", got.LastAttempt)
	}
}

// A redelivery that sends nothing (an ambiguous keyed letter and no
// reconciler) leaves the letter's attempts, last answer and verdict as
// they were.
func TestLettersRedeliveryThatSentNothingLeavesTheRecord(t *testing.T) {
	srv, hits := answering(t, http.StatusUnprocessableEntity)
	l := testLetter(srv.URL, 4)
	l.Ambiguous, l.Reason = true, "transient:503"
	x := redeliverOnce(t, l)
	err, got := x.err, x.got
	if !errors.Is(err, deadletter.ErrAmbiguous) {
		t.Fatalf("Redeliver: %v; want ErrAmbiguous", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the funder was sent the ambiguous letter")
	}
	if got.Attempts != l.Attempts || got.LastStatus != l.LastStatus || got.Reason != l.Reason || !got.LastAttempt.IsZero() {
		t.Errorf("after sending nothing: attempts %d, last status %d, reason %q, last attempt %v; want %d, %d, %q, none",
			got.Attempts, got.LastStatus, got.Reason, got.LastAttempt, l.Attempts, l.LastStatus, l.Reason)
	}
}

// The note of NoteRedelivery ends the record of a letter delivered, in
// the database and as Redeliver returns it, after the note of a
// reconciled letter.
func TestLettersRedeliveryNoteIsOnTheRecord(t *testing.T) {
	srv, _ := answering(t, http.StatusCreated)
	s := NewLetters(newPool(t), WithLimit(5*time.Second))
	ctx := context.Background()
	plain, asked := testLetter(srv.URL, 5), testLetter(srv.URL, 6)
	asked.Ambiguous = true
	for _, l := range []*grantretry.Letter{plain, asked} {
		if err := s.PutDeadLetter(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	found := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
	}
	for _, tc := range []struct {
		l    *grantretry.Letter
		want string
	}{
		{plain, "by the on-call engineer"},
		{asked, "reconciled: the funder already has the submission; nothing was sent; by the on-call engineer"},
	} {
		claims, err := s.ClaimIDs(ctx, "w", []string{tc.l.ID})
		if err != nil || len(claims) != 1 {
			t.Fatalf("ClaimIDs: %d, %v", len(claims), err)
		}
		r, err := s.Redeliver(NoteRedelivery(ctx, "by the on-call engineer"), claims[0], srv.Client(), found)
		if err != nil || r.Note != tc.want {
			t.Errorf("Redeliver of %s: note %q, %v; want %q", tc.l.ID, r.Note, err, tc.want)
		}
		_, rec, err := s.Get(ctx, tc.l.ID)
		if err != nil || rec == nil || rec.Note != tc.want {
			t.Errorf("the record of %s: %+v, %v; want the note %q", tc.l.ID, rec, err, tc.want)
		}
	}
}
