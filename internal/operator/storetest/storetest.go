package storetest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
)

// Fixture is one test's store.
type Fixture struct {
	// Store is a new store, with no letters in it.
	Store operator.Store
	// Put stores letters in it as a pipeline's Transport would have left
	// them (PutDeadLetter).
	Put func(t *testing.T, letters ...*grantretry.Letter)
	// Other is a store over the same letters, as another worker sees
	// them: the same directory, or the fleet's table under another
	// worker's name. Nil skips the checks of two runs at once.
	Other operator.Store
}

// Harness is what Run needs of a kind of store.
type Harness struct {
	// New returns a Fixture for one test; its store is gone when t ends.
	New func(t *testing.T) Fixture
}

// Run checks the Store contract of h's stores, and the operator core's
// behaviour over them, each in a subtest named for the rule it checks.
func Run(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, Harness)
	}{
		{"WaitingAndFindSeeTheLettersPut", testWaitingAndFind},
		{"SendOfADeliveredLetterTakesItOutWithItsRecord", testSendDelivered},
		{"SendOfARefusedLetterKeepsItWithTheAnswer", testSendNotDelivered},
		{"SendRefusesAmbiguousNotDueAndLateLettersUnlessAsked", testSendRefuses},
		{"RetireTakesALetterOutOnTheRecord", testRetire},
		{"ShowSaysWhereEachLetterIs", testShow},
		{"AllSendsOnlyDueUnrefusedUnambiguousLettersInTime", testAll},
		{"AllSendsRefusedLateAndAmbiguousLettersOnlyWhenAsked", testAllAsked},
		{"SubmissionSelectsItsLetters", testSubmission},
		{"NamedLettersAreSentOrRefusedOneByOne", testNamed},
		{"RateBoundsTheStartsOfSends", testRate},
		{"WorkersSendEachLetterOnce", testConcurrency},
		{"TwoRunsAtOnceSendEachLetterOnce", testTwoRuns},
		{"StopLetsTheLetterInFlightFinishAndBeginsNoneAfter", testStop},
		{"OpenBreakerLeavesItsHostsLettersUntried", testBreaker},
		{"BreakerOpenedByAnAnswerLeavesTheRestUntried", testBreakerOpenedByAnAnswer},
		{"SendUnderLeaveRefusedSendsNoRefusedLetter", testSendLeavesRefused},
		{"AllLeavesALetterRefusedSinceItWasListed", testAllRefusedSinceListing},
		{"LetterThatCannotBeSentIsCountedNotSentInBothRuns", testCannotBeSent},
		{"DryRunSendsNothing", testDryRun},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, h) })
	}
}

// base is when the letters of a test were created, one a millisecond
// after another.
func base() time.Time { return time.Now().Add(-time.Hour).Truncate(time.Second).UTC() }

// letters makes n plain letters named prefix-00, prefix-01, ... to url.
func letters(prefix, url string, n int) []*grantretry.Letter {
	at := base()
	out := make([]*grantretry.Letter, n)
	for i := range out {
		out[i] = Letter(fmt.Sprintf("%s-%02d", prefix, i), url, at.Add(time.Duration(i)*time.Millisecond))
	}
	return out
}

// discardSink is an audit sink that keeps nothing.
type discardSink struct{}

func (discardSink) Write(p []byte) (int, error) { return len(p), nil }
func (discardSink) Sync() error                 { return nil }
func (discardSink) Err() error                  { return nil }

// result is what a redeliver run printed and returned.
type result struct {
	stdout, stderr string
	sum            *operator.Summary
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("err %v\nstdout:\n%sstderr:\n%s", r.err, r.stdout, r.stderr)
}

// redeliver runs the core's redeliver over st, as a tool does, with the
// letters ids named and the flags args; client nil makes the tool's own
// (NewClient).
func redeliver(t *testing.T, ctx context.Context, st operator.Store, client *http.Client, ids []string, args ...string) result {
	t.Helper()
	fset := flag.NewFlagSet("redeliver", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	var f operator.RedeliverFlags
	f.Register(fset, "in the store")
	if err := fset.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ids); err != nil {
		t.Fatalf("%q %q: %v", ids, args, err)
	}
	if client == nil && !f.DryRun {
		c, closeIdle := f.NewClient(discardSink{})
		defer closeIdle()
		client = c
	}
	var stdout, stderr bytes.Buffer
	r := &operator.Run{Store: st, Flags: &f, IDs: ids, Client: client, Note: "storetest run",
		Stdout: &stdout, Stderr: &stderr, Prefix: "storetest: ", AskWith: "the library's Redeliver"}
	sum, err := r.Redeliver(ctx)
	return result{stdout.String(), stderr.String(), sum, err}
}

// plainClient is a client that sends through a grantretry Transport with
// no retries.
func plainClient(t *testing.T) *http.Client {
	t.Helper()
	tr := grantretry.New(nil, grantretry.WithBudget(0, 10*time.Second))
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func waitingIDs(t *testing.T, st operator.Store) []string {
	t.Helper()
	ls, err := st.Waiting(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	slices.Sort(ids)
	return ids
}

func find(t *testing.T, st operator.Store, id string) operator.Found {
	t.Helper()
	f, err := st.Find(context.Background(), id)
	if err != nil {
		t.Fatalf("Find(%s): %v", id, err)
	}
	return f
}

func wantAll(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
}

func wantNone(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(text, s) {
			t.Errorf("%s has %q:\n%s", what, s, text)
		}
	}
}

func testWaitingAndFind(t *testing.T, h Harness) {
	fx := h.New(t)
	ls := letters("L-wait", "https://funder.example/v1/applications", 2)
	fx.Put(t, ls...)
	if fx.Store.Where() == "" {
		t.Error("Where is empty")
	}
	if got := waitingIDs(t, fx.Store); !slices.Equal(got, []string{ls[0].ID, ls[1].ID}) {
		t.Errorf("Waiting = %q, want the two letters put", got)
	}
	f := find(t, fx.Store, ls[1].ID)
	if f.Letter.ID != ls[1].ID || f.Letter.SubmissionID != ls[1].SubmissionID || !bytes.Equal(f.Letter.Body, ls[1].Body) ||
		f.Letter.IdempotencyKey != ls[1].IdempotencyKey || f.Redelivery != nil || f.Retirement != nil {
		t.Errorf("Find of a waiting letter = %+v, want it as put, with no record", f)
	}
	if _, err := fx.Store.Find(context.Background(), "L-none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Find of no letter: %v, want fs.ErrNotExist", err)
	}
}

func testSendDelivered(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-del", f.URL+"/v1/applications", 2)
	fx.Put(t, ls...)
	ctx := context.Background()
	sent, err := fx.Store.Send(ctx, ls[0], plainClient(t), nil, "storetest note")
	if err != nil || !sent.Delivered || sent.Record.Status != http.StatusCreated {
		t.Fatalf("Send = %+v, %v; want delivered, answered 201", sent, err)
	}
	got := find(t, fx.Store, ls[0].ID)
	if got.Redelivery == nil || got.Redelivery.Status != http.StatusCreated || !strings.HasSuffix(got.Redelivery.Note, "storetest note") {
		t.Errorf("Find after the send: %+v, want its redelivery, 201, the note at the end", got.Redelivery)
	}
	if ids := waitingIDs(t, fx.Store); !slices.Equal(ids, []string{ls[1].ID}) {
		t.Errorf("waiting %q, want the other letter only", ids)
	}
	if _, err := fx.Store.Send(ctx, ls[0], plainClient(t), nil, "again"); !errors.Is(err, operator.ErrElsewhere) {
		t.Errorf("Send of a letter delivered since it was listed: %v, want ErrElsewhere", err)
	}
	if got := f.Got()[ls[0].IdempotencyKey]; got != 1 || f.Requests() != 1 {
		t.Errorf("the funder got the letter %d times (%d requests), want once", got, f.Requests())
	}
}

func testSendNotDelivered(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	l := letters("L-rej", f.URL+"/reject/v1/applications", 1)[0]
	fx.Put(t, l)
	sent, err := fx.Store.Send(context.Background(), l, plainClient(t), nil, "storetest note")
	if err != nil || sent.Delivered || sent.Record.Status != http.StatusUnprocessableEntity {
		t.Fatalf("Send = %+v, %v; want answered 422, not delivered, no error", sent, err)
	}
	if sent.Letter == nil || sent.Letter.LastStatus != http.StatusUnprocessableEntity || !deadletter.Refused(sent.Letter) || sent.Letter.Attempts != l.Attempts+1 {
		t.Errorf("Sent.Letter = %+v, want the letter as it waits now: one more attempt, last answered 422, refused", sent.Letter)
	}
	if ids := waitingIDs(t, fx.Store); !slices.Equal(ids, []string{l.ID}) {
		t.Errorf("waiting %q, want the refused letter", ids)
	}
	if got := find(t, fx.Store, l.ID); got.Redelivery != nil || !deadletter.Refused(got.Letter) {
		t.Errorf("Find after the refusal: %+v, want it waiting and refused", got)
	}
}

func testSendRefuses(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-ref", f.URL+"/v1/applications", 3)
	amb, notDue, late := Ambiguous(ls[0]), NotDue(ls[1], time.Now().Add(time.Hour)), Late(ls[2], time.Now().Add(-time.Hour))
	fx.Put(t, ls...)
	ctx := context.Background()
	for _, tc := range []struct {
		l    *grantretry.Letter
		want error
	}{{amb, deadletter.ErrAmbiguous}, {notDue, deadletter.ErrNotYet}, {late, deadletter.ErrLate}} {
		if _, err := fx.Store.Send(ctx, tc.l, plainClient(t), nil, "n"); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.l.ID) {
			t.Errorf("Send of %s: %v, want an error naming it that matches %v", tc.l.ID, err, tc.want)
		}
	}
	if n := f.Requests(); n != 0 {
		t.Fatalf("the funder got %d requests, want none", n)
	}
	for _, tc := range []struct {
		ctx       context.Context
		l         *grantretry.Letter
		reconcile grantretry.ReconcileFunc
	}{{ctx, amb, deadletter.TrustKey}, {deadletter.SendEarly(ctx), notDue, nil}, {deadletter.SendLate(ctx), late, nil}} {
		if sent, err := fx.Store.Send(tc.ctx, tc.l, plainClient(t), tc.reconcile, "n"); err != nil || !sent.Delivered {
			t.Errorf("Send of %s, asked: %+v, %v; want it delivered", tc.l.ID, sent, err)
		}
	}
	if n := f.Requests(); n != 3 {
		t.Errorf("the funder got %d requests, want 3", n)
	}
}

func testRetire(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-ret", f.URL+"/v1/applications", 3)
	fx.Put(t, ls...)
	ctx := context.Background()
	o := deadletter.RetireOptions{By: "oncall@ops-1"}
	r, err := fx.Store.Retire(ctx, ls[0].ID, "withdrawn by the applicant", o)
	if err != nil || r.Reason != "withdrawn by the applicant" || r.RetiredBy != "oncall@ops-1" || r.Letter == nil || r.Letter.ID != ls[0].ID || r.RetiredAt.IsZero() {
		t.Fatalf("Retire = %+v, %v; want the record: reason, by, when, the letter", r, err)
	}
	if ids := waitingIDs(t, fx.Store); slices.Contains(ids, ls[0].ID) {
		t.Errorf("waiting %q: the retired letter is still there", ids)
	}
	if got := find(t, fx.Store, ls[0].ID); got.Retirement == nil || got.Retirement.Reason != r.Reason || got.Letter.ID != ls[0].ID || got.Redelivery != nil {
		t.Errorf("Find of the retired letter = %+v, want its retirement", got)
	}
	if _, err := fx.Store.Retire(ctx, ls[0].ID, "again", o); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Retire again: %v, want fs.ErrNotExist", err)
	}
	if _, err := fx.Store.Send(ctx, ls[0], plainClient(t), nil, "n"); !errors.Is(err, operator.ErrElsewhere) {
		t.Errorf("Send of a letter retired since it was listed: %v, want ErrElsewhere", err)
	}
	if f.Requests() != 0 {
		t.Errorf("the funder got the retired letter")
	}
	if _, err := fx.Store.Send(ctx, ls[1], plainClient(t), nil, "n"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Store.Retire(ctx, ls[1].ID, "too late", o); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "redelivered") {
		t.Errorf("Retire of a redelivered letter: %v, want fs.ErrNotExist, saying it was redelivered", err)
	}
	if _, err := fx.Store.Retire(ctx, "L-none", "gone", o); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Retire of no letter: %v, want fs.ErrNotExist", err)
	}

	// The core's retire: a line for each letter, then the count; the
	// letter retired is not listed.
	var stdout, stderr, list bytes.Buffer
	err = operator.RetireFrom(ctx, &stdout, &stderr, fx.Store, []string{ls[2].ID, "L-none"}, "withdrawn", o)
	if err == nil || operator.ExitCode(err) != operator.ExitFailure {
		t.Errorf("RetireFrom of a letter and no letter: %v, want a failure", err)
	}
	wantAll(t, "retire's stdout", stdout.String(), "retired: letter "+ls[2].ID+" (submission "+ls[2].SubmissionID+"): withdrawn\n", "retired 1 of 2 letters\n")
	wantAll(t, "retire's stderr", stderr.String(), "not retired: letter L-none: ")
	if err := operator.List(ctx, &list, fx.Store, operator.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNone(t, "list", list.String(), ls[0].ID, ls[2].ID)
	wantAll(t, "list", list.String(), "0 letters waiting "+fx.Store.Where()+"\n")
}

func testShow(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-show", f.URL+"/v1/applications", 3)
	fx.Put(t, ls...)
	ctx := context.Background()
	if _, err := fx.Store.Send(ctx, ls[1], plainClient(t), nil, "n"); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.Store.Retire(ctx, ls[2].ID, "withdrawn by the applicant", deadletter.RetireOptions{By: "oncall@ops-1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{ls[0].ID, []string{"state ", " waiting\n", "due ", "now"}},
		{ls[1].ID, []string{"state ", " redelivered 20", "answered 201 Created"}},
		{ls[2].ID, []string{"state ", " retired at 20", "by oncall@ops-1: withdrawn by the applicant"}},
	} {
		var out bytes.Buffer
		if err := operator.Show(ctx, &out, fx.Store, tc.id, false); err != nil {
			t.Fatalf("show %s: %v", tc.id, err)
		}
		wantAll(t, "show "+tc.id, out.String(), append(tc.want, ls[0].URL, "GRANT-"+tc.id)...)
	}
	var out bytes.Buffer
	if err := operator.Show(ctx, &out, fx.Store, ls[2].ID, true); err != nil || !bytes.Equal(out.Bytes(), ls[2].Body) {
		t.Errorf("show -body of the retired letter = %q, %v; want its body", out.String(), err)
	}
	if err := operator.Show(ctx, &out, fx.Store, "L-none", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("show of no letter: %v, want fs.ErrNotExist", err)
	}
}

// mixed puts three plain letters and one each refused, not due, late and
// ambiguous.
func mixed(t *testing.T, fx Fixture, url string) (plain []*grantretry.Letter, refused, notDue, late, amb *grantretry.Letter) {
	ls := letters("L-mix", url, 7)
	plain = ls[:3]
	refused = Refused(ls[3])
	notDue = NotDue(ls[4], time.Now().Add(time.Hour).Truncate(time.Second).UTC())
	late = Late(ls[5], time.Now().Add(-time.Hour).Truncate(time.Second).UTC())
	amb = Ambiguous(ls[6])
	fx.Put(t, ls...)
	return
}

func testAll(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	plain, refused, notDue, late, amb := mixed(t, fx, f.URL+"/v1/applications")
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-budget", "0")
	if r.err != nil || operator.ExitCode(r.err) != operator.ExitOK {
		t.Fatalf("redeliver -all: %v", r)
	}
	got := f.Got()
	for _, l := range plain {
		if got[l.IdempotencyKey] != 1 {
			t.Errorf("%s was sent %d times, want once", l.ID, got[l.IdempotencyKey])
		}
	}
	if f.Requests() != len(plain) {
		t.Errorf("the funder got %d requests, want %d: the letters left were sent", f.Requests(), len(plain))
	}
	s := r.sum
	want := operator.Summary{Waiting: 7, Selected: 3, Sent: 3, Delivered: 3, LeftRefused: 1, LeftNotDue: 1, LeftLate: 1, LeftAmbiguous: 1}
	if s.Waiting != want.Waiting || s.Selected != want.Selected || s.Sent != want.Sent || s.Delivered != want.Delivered ||
		s.NotDelivered != 0 || s.NotSent != 0 || s.LeftRefused != 1 || s.LeftNotDue != 1 || s.LeftLate != 1 || s.LeftAmbiguous != 1 ||
		s.LeftElsewhere != 0 || s.NotTried != 0 || !s.NextDue.Equal(notDue.NotBefore) {
		t.Errorf("summary = %+v\nwant %+v, next due %v", *s, want, notDue.NotBefore)
	}
	wantAll(t, "stdout", r.stdout,
		"redelivered letter "+plain[0].ID+" (submission "+plain[0].SubmissionID+"): answered 201 Created",
		"refused: letter "+refused.ID+" (submission "+refused.SubmissionID+") was last answered 422 refused (terminal:422); -include-refused sends it",
		"not due: letter "+notDue.ID+" (submission "+notDue.SubmissionID+") until "+notDue.NotBefore.Format(time.RFC3339),
		"late: letter "+late.ID+" (submission "+late.SubmissionID+") was due by "+late.DueBy.Format(time.RFC3339),
		"ambiguous: letter "+amb.ID+" (submission "+amb.SubmissionID+"): ", "-trust-key",
		"summary: 7 letters waiting, 3 selected, 3 sent\n",
		"  delivered: 3 (answered 201 Created: 3)\n",
		"  left, refused: 1 (", "  left, not due: 1 (the next is due at "+notDue.NotBefore.Format(time.RFC3339)+")\n",
		"  left, late: 1 (", "  left, ambiguous: 1 (")
	wantNone(t, "stdout", r.stdout, "not delivered", "not tried", "another's", "stopped")
	if ids := waitingIDs(t, fx.Store); !slices.Equal(ids, []string{refused.ID, notDue.ID, late.ID, amb.ID}) {
		t.Errorf("waiting %q, want the four letters left", ids)
	}
}

func testAllAsked(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	_, refused, notDue, late, amb := mixed(t, fx, f.URL+"/v1/applications")
	// The funder refuses the refused letter again.
	fx2 := h.New(t)
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-budget", "0", "-include-refused", "-late", "-trust-key")
	if r.err != nil {
		t.Fatalf("redeliver -all asked for all: %v", r)
	}
	got := f.Got()
	for _, l := range []*grantretry.Letter{refused, late, amb} {
		if got[l.IdempotencyKey] != 1 {
			t.Errorf("%s was sent %d times, want once", l.ID, got[l.IdempotencyKey])
		}
	}
	if got[notDue.IdempotencyKey] != 0 || r.sum.LeftNotDue != 1 || r.sum.Delivered != 6 || r.sum.Selected != 6 {
		t.Errorf("summary %+v; want 6 delivered, the letter not due left and not sent", *r.sum)
	}

	rejected := Refused(letters("L-again", f.URL+"/reject/v1/applications", 1)[0])
	fx2.Put(t, rejected)
	r = redeliver(t, context.Background(), fx2.Store, nil, nil, "-all", "-budget", "0", "-include-refused")
	if operator.ExitCode(r.err) != operator.ExitFailure || r.sum.NotDelivered != 1 || r.sum.NotDeliveredBy["answered 422 Unprocessable Entity"] != 1 {
		t.Fatalf("redeliver -all -include-refused of a letter refused again: %v\n%+v; want it not delivered, exit 1", r, *r.sum)
	}
	wantAll(t, "stderr", r.stderr, "storetest: letter "+rejected.ID+" (submission "+rejected.SubmissionID+") not redelivered: answered 422 Unprocessable Entity", "; it stays "+fx2.Store.Where())
	wantAll(t, "stdout", r.stdout, "  not delivered: 1 (answered 422 Unprocessable Entity: 1)\n", "  delivered: 0\n")
	wantAll(t, "error", r.err.Error(), "1 of 1 letter not redelivered")
}

func testSubmission(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-sub", f.URL+"/v1/applications", 4)
	for i, l := range ls {
		l.SubmissionID = []string{"GRANT-S1", "GRANT-S2"}[i%2]
	}
	Refused(ls[2]) // of GRANT-S1
	fx.Put(t, ls...)
	ctx := context.Background()
	var list bytes.Buffer
	if err := operator.List(ctx, &list, fx.Store, operator.ListOptions{Submission: "GRANT-S2"}); err != nil {
		t.Fatal(err)
	}
	wantAll(t, "list -submission", list.String(), ls[1].ID, ls[3].ID, "2 letters waiting "+fx.Store.Where()+"\n")
	wantNone(t, "list -submission", list.String(), ls[0].ID, ls[2].ID)

	r := redeliver(t, ctx, fx.Store, nil, nil, "-submission", "GRANT-S1", "-budget", "0")
	if r.err != nil {
		t.Fatalf("redeliver -submission: %v", r)
	}
	got := f.Got()
	if got[ls[0].IdempotencyKey] != 1 || f.Requests() != 1 {
		t.Errorf("the funder got %v; want the one due, unrefused letter of GRANT-S1", got)
	}
	if s := r.sum; s.Waiting != 4 || s.Selected != 1 || s.Delivered != 1 || s.LeftRefused != 1 {
		t.Errorf("summary %+v; want 4 waiting, 1 selected and delivered, 1 refused left", *s)
	}
	r = redeliver(t, ctx, fx.Store, nil, nil, "-submission", "GRANT-S1", "-all", "-include-refused", "-budget", "0")
	if r.err != nil || f.Got()[ls[2].IdempotencyKey] != 1 || f.Requests() != 2 {
		t.Errorf("redeliver -submission -all -include-refused: %v\nthe funder got %v", r, f.Got())
	}
}

func testNamed(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-named", f.URL+"/v1/applications", 4)
	plain, refused := ls[0], Refused(ls[1])
	notDue := NotDue(ls[2], time.Now().Add(time.Hour).Truncate(time.Second).UTC())
	amb := Ambiguous(ls[3])
	fx.Put(t, ls...)
	ctx := context.Background()
	r := redeliver(t, ctx, fx.Store, nil, []string{plain.ID, refused.ID, notDue.ID, amb.ID, "L-none", plain.ID}, "-budget", "0")
	if operator.ExitCode(r.err) != operator.ExitFailure {
		t.Fatalf("a run with letters named not sent: %v, want exit 1", r)
	}
	got := f.Got()
	if got[plain.IdempotencyKey] != 1 || got[refused.IdempotencyKey] != 1 || f.Requests() != 2 {
		t.Errorf("the funder got %v; want the plain and the refused letter once each: naming a letter asks for it", got)
	}
	s := r.sum
	if s.Selected != 5 || s.Sent != 2 || s.Delivered != 2 || s.NotSent != 3 || s.NotSentBy["not due"] != 1 || s.NotSentBy["ambiguous"] != 1 || s.NotSentBy["no such letter"] != 1 {
		t.Errorf("summary %+v; want 5 selected, 2 sent and delivered, 3 not sent (not due, ambiguous, no such letter)", *s)
	}
	wantAll(t, "stderr", r.stderr,
		"storetest: letter "+notDue.ID+" (submission "+notDue.SubmissionID+") not sent: not due until "+notDue.NotBefore.Format(time.RFC3339), "-early",
		"storetest: letter "+amb.ID+" (submission "+amb.SubmissionID+") not sent: its last attempt may have been applied", "-trust-key",
		"storetest: letter L-none was not sent: there is no such letter "+fx.Store.Where())
	wantAll(t, "error", r.err.Error(), "3 of 5 letters not redelivered")
	wantAll(t, "stdout", r.stdout, "  not sent: 3 (", "no such letter: 1", "not due: 1", "ambiguous: 1")

	r = redeliver(t, ctx, fx.Store, nil, []string{plain.ID}, "-budget", "0")
	if operator.ExitCode(r.err) != operator.ExitFailure || f.Requests() != 2 {
		t.Errorf("redeliver of a letter delivered already: %v, want it refused, nothing sent", r)
	}
	wantAll(t, "stderr", r.stderr, "storetest: letter "+plain.ID+" was not sent: it was already redelivered 20", "answered 201 Created")
	r = redeliver(t, ctx, fx.Store, nil, []string{notDue.ID}, "-early", "-budget", "0")
	if r.err != nil || f.Got()[notDue.IdempotencyKey] != 1 {
		t.Errorf("redeliver -early of the letter not due: %v, want it delivered", r)
	}
}

func testRate(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	const n, rate = 11, 20
	fx.Put(t, letters("L-rate", f.URL+"/v1/applications", n)...)
	start := time.Now()
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-rate", fmt.Sprintf("%d/s", rate), "-concurrency", "4", "-budget", "0")
	took := time.Since(start)
	if r.err != nil || r.sum.Delivered != n {
		t.Fatalf("redeliver -rate: %v", r)
	}
	arr := f.Arrivals()
	if len(arr) != n {
		t.Fatalf("the funder got %d requests, want %d", len(arr), n)
	}
	slices.SortFunc(arr, func(a, b time.Time) int { return a.Compare(b) })
	// The k-th start (from 0) is no earlier than k/rate after the run
	// began, and each request arrives after its start; measured from the
	// run's start, not the first arrival, whose lag (the first connection,
	// the store's first round trip) can be longer than the others'.
	for k := 1; k < n; k++ {
		if gap, min := arr[k].Sub(start), time.Duration(k)*time.Second/rate; gap < min {
			t.Errorf("request %d came %v after the run began, want at least %v at %d/s", k+1, gap, min, rate)
		}
	}
	if min := time.Duration(n-1) * time.Second / rate; took < min {
		t.Errorf("the run took %v, want at least %v", took, min)
	}
	if took > 10*time.Second {
		t.Errorf("the run took %v: the pace is far slower than %d/s", took, rate)
	}
}

func testConcurrency(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	f.Hold = 30 * time.Millisecond
	const n = 24
	ls := letters("L-conc", f.URL+"/v1/applications", n)
	fx.Put(t, ls...)
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-concurrency", "6", "-budget", "0")
	if r.err != nil || r.sum.Delivered != n || r.sum.Sent != n {
		t.Fatalf("redeliver -concurrency 6: %v", r)
	}
	got := f.Got()
	for _, l := range ls {
		if got[l.IdempotencyKey] != 1 {
			t.Errorf("%s was sent %d times, want once", l.ID, got[l.IdempotencyKey])
		}
	}
	if m := f.MaxInFlight(); m < 2 || m > 6 {
		t.Errorf("the funder held at most %d requests at once; want 2 to 6 with 6 workers", m)
	}
	if ids := waitingIDs(t, fx.Store); len(ids) != 0 {
		t.Errorf("waiting %q, want none", ids)
	}
}

func testTwoRuns(t *testing.T, h Harness) {
	fx := h.New(t)
	if fx.Other == nil {
		t.Skip("the harness gives no other store over the same letters")
	}
	f := NewFunder(t)
	f.Hold = 10 * time.Millisecond
	const n = 30
	ls := letters("L-two", f.URL+"/v1/applications", n)
	fx.Put(t, ls...)
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i, st := range []operator.Store{fx.Store, fx.Other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = redeliver(t, context.Background(), st, nil, nil, "-all", "-concurrency", "3", "-budget", "0")
		}()
	}
	wg.Wait()
	got := f.Got()
	for _, l := range ls {
		if got[l.IdempotencyKey] != 1 {
			t.Errorf("%s was sent %d times, want once", l.ID, got[l.IdempotencyKey])
		}
	}
	delivered, elsewhere := 0, 0
	for _, r := range results {
		if r.err != nil {
			t.Errorf("a run failed: %v", r)
		}
		delivered += r.sum.Delivered
		elsewhere += r.sum.LeftElsewhere
		if r.sum.Delivered+r.sum.LeftElsewhere != r.sum.Selected {
			t.Errorf("a run's summary: %+v; want each letter it chose delivered or another's", *r.sum)
		}
	}
	if delivered != n {
		t.Errorf("the runs delivered %d, want %d (another's %d)", delivered, n, elsewhere)
	}
}

func testStop(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	const n, stopAt = 8, 3
	ls := letters("L-stop", f.URL+"/v1/applications", n)
	fx.Put(t, ls...)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	f.OnRequest = func(k int, r *http.Request) {
		if k == stopAt {
			cancel(errors.New("stopped by the test"))
			// The letter in flight: a run that cut it would end its
			// request here; one that lets it finish gets its answer.
			select {
			case <-r.Context().Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	r := redeliver(t, ctx, fx.Store, nil, nil, "-all", "-budget", "0")
	if operator.ExitCode(r.err) != operator.ExitFailure {
		t.Fatalf("a run stopped: %v, want exit 1", r)
	}
	if k := f.Requests(); k != stopAt {
		t.Errorf("the funder got %d requests, want %d: none begun after the stop", k, stopAt)
	}
	s := r.sum
	if s.Stopped != "stopped by the test" || s.NotTried != n-stopAt || s.Sent != stopAt || s.Delivered != stopAt || s.NotDelivered != 0 {
		t.Errorf("summary %+v; want stopped, %d sent and delivered (the one in flight too), %d not tried", *s, stopAt, n-stopAt)
	}
	wantAll(t, "stdout", r.stdout, "redelivered "+operator.LetterName(ls[stopAt-1])+": answered 201 Created",
		"not tried: letter "+ls[n-1].ID, fmt.Sprintf("  not tried: %d\n", n-stopAt),
		"  stopped: stopped by the test; the letters not tried stay waiting\n")
	wantAll(t, "error", r.err.Error(), "stopped by stopped by the test", fmt.Sprintf("%d of them not tried", n-stopAt))
	if l := find(t, fx.Store, ls[stopAt-1].ID); l.Redelivery == nil || l.Redelivery.Status != http.StatusCreated {
		t.Errorf("the letter in flight at the stop: %+v; want it delivered and recorded, answered 201", l)
	}
	for _, l := range ls[stopAt:] {
		if got := find(t, fx.Store, l.ID); got.Redelivery != nil || got.Letter.Ambiguous || got.Letter.Attempts != l.Attempts {
			t.Errorf("%s, not tried: %+v; want it waiting as it was", l.ID, got.Letter)
		}
	}
}

// breakerFunder answers 201 for host b.example, and for a.example ends
// the call circuit_open, as a grantretry Transport whose breaker for it is
// open does, sending nothing.
type breakerFunder struct {
	mu    sync.Mutex
	calls map[string]int
}

func (b *breakerFunder) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.calls[r.URL.Host]++
	b.mu.Unlock()
	if r.URL.Host == "a.example" {
		return nil, &grantretry.Error{Outcome: grantretry.Outcome{Disposition: grantretry.CircuitOpen, StopReason: grantretry.StopCircuitOpen}, Err: grantretry.ErrNotSent}
	}
	return &http.Response{StatusCode: http.StatusCreated, Status: "201 Created", Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

func testBreaker(t *testing.T, h Harness) {
	fx := h.New(t)
	at := base()
	var ls []*grantretry.Letter
	for i, host := range []string{"a", "b", "a", "b", "a"} {
		ls = append(ls, Letter(fmt.Sprintf("L-brk-%d%s", i, host), "https://"+host+".example/v1/applications", at.Add(time.Duration(i)*time.Millisecond)))
	}
	fx.Put(t, ls...)
	b := &breakerFunder{calls: map[string]int{}}
	r := redeliver(t, context.Background(), fx.Store, &http.Client{Transport: b}, nil, "-all")
	if operator.ExitCode(r.err) != operator.ExitFailure {
		t.Fatalf("a run that met an open breaker: %v, want exit 1", r)
	}
	if b.calls["a.example"] != 1 || b.calls["b.example"] != 2 {
		t.Errorf("calls by host %v; want a.example once, then none, b.example's two", b.calls)
	}
	// The call of a.example's first letter sent nothing: it is not tried,
	// as the two after it are.
	s := r.sum
	if s.Sent != 2 || s.Delivered != 2 || s.NotDelivered != 0 || s.NotTried != 3 {
		t.Errorf("summary %+v; want 2 sent and delivered, 3 not tried", *s)
	}
	wantAll(t, "stdout", r.stdout, "not tried: letter "+ls[0].ID+" (submission "+ls[0].SubmissionID+"): the funder's breaker for a.example is open",
		"not tried: letter "+ls[2].ID+" (submission "+ls[2].SubmissionID+"): the funder's breaker for a.example is open",
		"not tried: letter "+ls[4].ID, "summary: 5 letters waiting, 5 selected, 2 sent\n", "  not tried: 3\n")
	wantNone(t, "stdout", r.stdout, "not delivered")
	if ids := waitingIDs(t, fx.Store); !slices.Equal(ids, []string{ls[0].ID, ls[2].ID, ls[4].ID}) {
		t.Errorf("waiting %q, want a.example's letters", ids)
	}
}

// testBreakerOpenedByAnAnswer: the funder is down (503), and the tool's
// own client's breaker opens on a failed call that was answered; the
// letters after it are not begun, and the summary counts as sent only
// the letters whose requests reached the funder.
func testBreakerOpenedByAnAnswer(t *testing.T, h Harness) {
	fx := h.New(t)
	var mu sync.Mutex
	reqs := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		reqs++
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	const n = 12
	fx.Put(t, letters("L-down", srv.URL+"/v1/applications", n)...)
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-budget", "0")
	mu.Lock()
	got := reqs
	mu.Unlock()
	s := r.sum
	if got == 0 || got == n || s.Sent != got || s.NotDelivered != got || s.NotTried != n-got || s.NotSent != 0 {
		t.Errorf("the funder got %d requests of %d letters; summary %+v; want the breaker to open before the last, "+
			"as many sent and not delivered as reached it, the rest not tried\n%v", got, n, *s, r)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	wantAll(t, "stdout", r.stdout, "not tried: letter L-down-11 (submission GRANT-L-down-11): the funder's breaker for "+host+" is open")
}

// testSendLeavesRefused: a Send under operator.LeaveRefused re-reads the
// letter under its hold or claim, and sends none the funder refused.
func testSendLeavesRefused(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-lr", f.URL+"/v1/applications", 2)
	listed := *ls[0]
	Refused(ls[0])
	fx.Put(t, ls...)
	ctx := operator.LeaveRefused(context.Background())
	sent, err := fx.Store.Send(ctx, &listed, plainClient(t), nil, "n")
	if !errors.Is(err, operator.ErrRefused) || !strings.Contains(err.Error(), ls[0].ID) || sent.Letter == nil || !deadletter.Refused(sent.Letter) {
		t.Errorf("Send under LeaveRefused of a letter refused since it was listed: %+v, %v; want an error naming it that matches ErrRefused, and the letter as it waits", sent, err)
	}
	if f.Requests() != 0 {
		t.Fatalf("the funder got %d requests, want none", f.Requests())
	}
	if got := find(t, fx.Store, ls[0].ID); got.Redelivery != nil || got.Letter.Ambiguous || got.Letter.Attempts != ls[0].Attempts || !deadletter.Refused(got.Letter) {
		t.Errorf("the refused letter after the send that left it: %+v; want it waiting as it was, not ambiguous", got.Letter)
	}
	if sent, err := fx.Store.Send(ctx, ls[1], plainClient(t), nil, "n"); err != nil || !sent.Delivered {
		t.Errorf("Send under LeaveRefused of a letter not refused: %+v, %v; want it delivered", sent, err)
	}
	if sent, err := fx.Store.Send(context.Background(), ls[0], plainClient(t), nil, "n"); err != nil || !sent.Delivered {
		t.Errorf("Send of the refused letter, not under LeaveRefused: %+v, %v; want it sent and delivered", sent, err)
	}
}

// testAllRefusedSinceListing: -all chooses from its listing; a letter the
// funder refused after that (another run named it and got 422) is left,
// not sent again.
func testAllRefusedSinceListing(t *testing.T, h Harness) {
	fx := h.New(t)
	if fx.Other == nil {
		t.Skip("the harness gives no other store over the same letters")
	}
	f := NewFunder(t)
	first := letters("L-rs", f.URL+"/v1/applications", 1)[0]
	second := letters("L-rt", f.URL+"/reject/v1/applications", 1)[0]
	second.Created = first.Created.Add(time.Second)
	fx.Put(t, first, second)
	var other result
	f.OnRequest = func(k int, r *http.Request) {
		if k == 1 { // the run listed both and is sending the first: another names the second
			other = redeliver(t, context.Background(), fx.Other, nil, []string{second.ID}, "-budget", "0")
		}
	}
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-budget", "0")
	if other.sum == nil || other.sum.NotDeliveredBy["answered 422 Unprocessable Entity"] != 1 {
		t.Fatalf("the other run did not get the second letter refused: %v", other)
	}
	if n := f.Got()[second.IdempotencyKey]; n != 1 {
		t.Errorf("the letter refused since the listing was sent %d times, want once (by the run that named it)\n%v", n, r)
	}
	if s := r.sum; r.err != nil || s.Sent != 1 || s.Delivered != 1 || s.LeftRefused != 1 || s.Selected != 2 {
		t.Errorf("summary %+v, %v; want 2 selected, 1 sent and delivered, 1 left refused", *s, r.err)
	}
	wantAll(t, "stdout", r.stdout, "refused: "+operator.LetterName(second)+" was last answered 422 refused", "  left, refused: 1 (")
}

// testCannotBeSent: a letter whose body was not kept cannot be sent
// (nothing leaves): the real run and the dry run both count it not sent,
// "cannot be sent", and neither counts it sent.
func testCannotBeSent(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	l := letters("L-big", f.URL+"/v1/applications", 1)[0]
	l.Body, l.BodySHA256, l.BodyOmitted = nil, "", "larger than 1 MiB"
	fx.Put(t, l)
	for _, args := range [][]string{{"-all", "-dry-run"}, {"-all", "-budget", "0"}} {
		r := redeliver(t, context.Background(), fx.Store, nil, nil, args...)
		s := r.sum
		if operator.ExitCode(r.err) != operator.ExitFailure || s.Sent != 0 || s.NotSent != 1 || s.NotSentBy["cannot be sent"] != 1 || s.NotDelivered != 0 {
			t.Errorf("%q: summary %+v; want 0 sent, 1 not sent (cannot be sent), exit 1\n%v", args, *s, r)
		}
		wantAll(t, fmt.Sprintf("%q: stderr", args), r.stderr, l.ID)
		wantAll(t, fmt.Sprintf("%q: stdout", args), r.stdout, "  not sent: 1 (cannot be sent: 1)\n")
	}
	if f.Requests() != 0 {
		t.Errorf("the funder got %d requests, want none", f.Requests())
	}
}

func testDryRun(t *testing.T, h Harness) {
	fx := h.New(t)
	f := NewFunder(t)
	ls := letters("L-dry", f.URL+"/v1/applications", 2)
	Refused(ls[1])
	fx.Put(t, ls...)
	r := redeliver(t, context.Background(), fx.Store, nil, nil, "-all", "-dry-run", "-header", "Authorization: Bearer t-secret")
	if r.err != nil || f.Requests() != 0 {
		t.Fatalf("dry run: %v; the funder got %d requests, want none", r, f.Requests())
	}
	if s := r.sum; !s.DryRun || s.Sent != 1 || s.Selected != 1 || s.LeftRefused != 1 || s.Delivered != 0 {
		t.Errorf("summary %+v; want 1 planned, 1 refused left", *s)
	}
	wantAll(t, "stdout", r.stdout, "letter "+ls[0].ID+" (dry run: nothing sent)", "Authorization: [not shown: from -header]",
		"summary: 2 letters waiting, 1 selected, 1 planned\n", "  left, refused: 1 (")
	wantNone(t, "stdout", r.stdout, "t-secret", "delivered:")
	if ids := waitingIDs(t, fx.Store); len(ids) != 2 {
		t.Errorf("waiting %q after a dry run, want both", ids)
	}
}
