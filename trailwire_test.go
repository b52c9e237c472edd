package grantretry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/zap"
)

// fakeTrail is an AuditSink that records what the Transport did to it, and
// fails as told: from the failAt-th write on (0: never), or on Sync.
type fakeTrail struct {
	mu       sync.Mutex
	events   []string // "write <msg>" and "sync", in order
	records  []map[string]any
	writes   int
	failAt   int
	syncErr  error
	writeErr error // the failure, once it happened: the trail is broken
}

var errDiskGone = errors.New("fake trail: disk gone")

func (f *fakeTrail) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.writeErr != nil || (f.failAt > 0 && f.writes >= f.failAt) {
		f.writeErr = errDiskGone
		return 0, f.writeErr
	}
	var rec map[string]any
	if err := json.Unmarshal(p, &rec); err != nil {
		return 0, err
	}
	f.records = append(f.records, rec)
	f.events = append(f.events, fmt.Sprint("write ", rec["msg"]))
	return len(p), nil
}

func (f *fakeTrail) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "sync")
	return f.syncErr
}

func (f *fakeTrail) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeErr
}

func (f *fakeTrail) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func withFakeTrail(f *fakeTrail) Option {
	return WithAuditTrail(f)
}

// A nil sink, and an interface holding a nil pointer, are refused before
// they could panic on the first record.
func TestWithAuditTrailRefusesNilAndTypedNil(t *testing.T) {
	var typed *fakeTrail
	for name, sink := range map[string]AuditSink{"nil": nil, "typed nil": typed} {
		tr := New(httpmock.NewMockTransport(), WithAuditTrail(sink))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: error %v, want ErrInvalidOption", name, err)
		}
	}
}

// A sink whose errors do not match ErrAuditTrail still yields errors that
// do, as Outcome.RecordErr promises: the failed record, and the call not
// sent after it.
func TestSinkErrorsMatchErrAuditTrail(t *testing.T) {
	trail := &fakeTrail{failAt: 1}
	h := newHarness(t, withFakeTrail(trail))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if o := mustOutcome(t, resp); !errors.Is(o.RecordErr, ErrAuditTrail) || !errors.Is(o.RecordErr, errDiskGone) {
		t.Errorf("RecordErr %v, want it to match ErrAuditTrail and the sink's own error", o.RecordErr)
	}
	req, _ = http.NewRequest(http.MethodGet, funderURL, nil)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrAuditTrail) || !errors.Is(err, errDiskGone) {
		t.Errorf("error %v, want it to match ErrAuditTrail and the sink's own error", err)
	}
}

// Every audit line goes to the trail, and the trail is synced once per
// call, right after the disposition line, before the caller has it.
func TestTrailGetsEveryLineAndSyncsAtTheDisposition(t *testing.T) {
	trail := &fakeTrail{}
	h := newHarness(t, withFakeTrail(trail), WithBreaker(1, time.Hour), WithBudget(3, time.Hour), WithLogger(zap.NewNop()))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 503, 201))
	req, _ := newPost(t, context.Background(), `{"a":1}`, true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	want := []string{
		"write " + MsgAttempt,
		"write " + MsgBreaker, // the call's failure opened the breaker
		"write " + MsgDisposition, "sync",
	}
	if got := trail.log(); !equalStrings(got, want) {
		t.Errorf("trail saw %q, want %q", got, want)
	}
	if o := mustOutcome(t, resp); o.Disposition != CircuitOpen || o.RecordErr != nil {
		t.Errorf("outcome %+v, want circuit_open with nothing missing from the record", o)
	}
	// The trail alone, with the logger off, still gets the payload's hash.
	trail.mu.Lock()
	last := trail.records[len(trail.records)-1]
	trail.mu.Unlock()
	if last[FieldPayloadSHA256] != hexSHA256([]byte(`{"a":1}`)) {
		t.Errorf("disposition record %v lacks the payload's SHA-256", last)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The trail failing mid-call: the call's disposition stands (its attempts
// were made) and its outcome says the record is missing. The next call is
// not sent at all (fail closed) and is dead-lettered, so the work is not
// lost; its letter still reaches the dead-letter sink.
func TestTrailFailureIsReportedThenFailsClosed(t *testing.T) {
	trail := &fakeTrail{failAt: 2}
	letters := &memLetters{}
	h := newHarness(t, withFakeTrail(trail), WithDeadLetter(letters))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201))
	req, _ := newPost(t, context.Background(), `{"first":1}`, true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	o := mustOutcome(t, resp)
	if o.Disposition != Succeeded || !errors.Is(o.RecordErr, errDiskGone) {
		t.Fatalf("outcome %+v, want succeeded with RecordErr wrapping the trail's failure", o)
	}
	sent := h.mock.GetTotalCallCount()

	req, _ = newPost(t, context.Background(), `{"second":2}`, true)
	_, err = h.tr.RoundTrip(req)
	e := mustError(t, err)
	if h.mock.GetTotalCallCount() != sent {
		t.Errorf("a call was sent while the trail could not record it")
	}
	if e.Disposition != DeadLetter || e.StopReason != StopAuditTrail || e.Attempts != 0 {
		t.Errorf("outcome %+v, want dead_letter (%s) with no attempt", e.Outcome, StopAuditTrail)
	}
	if !errors.Is(err, errDiskGone) || !errors.Is(err, ErrDeadLetter) {
		t.Errorf("error %v, want it to match the trail's failure and ErrDeadLetter", err)
	}
	l := letters.only(t)
	if string(l.Body) != `{"second":2}` || l.StopReason != StopAuditTrail || e.DeadLetterID != l.ID {
		t.Errorf("letter %+v, want the unsent call, whole", l)
	}
}

// A Sync that fails is reported like a failed write: the disposition was
// not made durable.
func TestTrailSyncFailureIsReported(t *testing.T) {
	trail := &fakeTrail{syncErr: errDiskGone}
	h := newHarness(t, withFakeTrail(trail))
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(200))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if o := mustOutcome(t, resp); !errors.Is(o.RecordErr, errDiskGone) {
		t.Errorf("outcome %+v, want RecordErr wrapping the failed sync", o)
	}
}

// The trail failing during a call stops the call's retries too: the
// attempt already made stands, the call is dead-lettered, and no retry is
// sent that the trail could not show.
func TestTrailFailureMidCallStopsRetries(t *testing.T) {
	trail := &fakeTrail{failAt: 1}
	letters := &memLetters{}
	h := newHarness(t, withFakeTrail(trail), WithDeadLetter(letters))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201))
	req, _ := newPost(t, context.Background(), `{"a":1}`, true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	o := mustOutcome(t, resp)
	if o.Disposition != DeadLetter || o.StopReason != StopAuditTrail || o.Attempts != 1 || !errors.Is(o.RecordErr, errDiskGone) {
		t.Errorf("outcome %+v, want dead_letter (%s) after 1 attempt, with the trail's failure", o, StopAuditTrail)
	}
	if n := h.mock.GetTotalCallCount(); n != 1 {
		t.Errorf("%d attempts sent, want 1", n)
	}
	if l := letters.only(t); l.ID != o.DeadLetterID {
		t.Errorf("letter %s, outcome names %s", l.ID, o.DeadLetterID)
	}
}

// trailBreakingClock is a fakeClock whose waits break the trail, as another
// call's failed write would while this call waits.
type trailBreakingClock struct {
	*fakeClock
	trail *fakeTrail
}

func (c trailBreakingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.trail.mu.Lock()
	c.trail.writeErr = errDiskGone
	c.trail.mu.Unlock()
	return c.fakeClock.Sleep(ctx, d)
}

// The trail broken by someone else while this call waits: the retry is not
// sent, and the call is dead-lettered.
func TestTrailBrokenDuringTheWaitStopsTheRetry(t *testing.T) {
	trail := &fakeTrail{}
	h := newHarness(t, withFakeTrail(trail))
	h.tr = New(h.mock, withFakeTrail(trail), WithClock(trailBreakingClock{newFakeClock(), trail}))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503, 201))
	req, _ := newPost(t, context.Background(), `{"a":1}`, true)
	_, err := h.tr.RoundTrip(req)
	e := mustError(t, err)
	if e.Disposition != DeadLetter || e.StopReason != StopAuditTrail || e.Attempts != 1 || !errors.Is(err, errDiskGone) {
		t.Errorf("outcome %+v (%v), want dead_letter (%s) after the 1 attempt made before the trail broke", e.Outcome, err, StopAuditTrail)
	}
	if n := h.mock.GetTotalCallCount(); n != 1 {
		t.Errorf("%d attempts sent, want 1", n)
	}
}

// A caller whose context has already ended is told so, and no letter is
// kept for it, even when the trail is broken too.
func TestCanceledCallIsNotDeadLetteredWhenTheTrailIsBroken(t *testing.T) {
	trail := &fakeTrail{writeErr: errDiskGone}
	letters := &memLetters{}
	h := newHarness(t, withFakeTrail(trail), WithDeadLetter(letters))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := newPost(t, ctx, `{"a":1}`, true)
	_, err := h.tr.RoundTrip(req)
	if e := mustError(t, err); e.Disposition != Canceled || len(letters.all()) != 0 {
		t.Errorf("outcome %+v with %d letters, want canceled and none", e.Outcome, len(letters.all()))
	}
}

// A funder whose error text is huge, or a caller whose own correlation id
// is, cannot make a record the sink must refuse: the fields are cut at
// maxFieldText, followed by the length and SHA-256 of the whole. (With the
// real trail file: trail's TestAuditFieldsAreBoundedSoNoCallBreaksTheTrail.)
func TestAuditFieldsAreCutWithTheirLengthAndHash(t *testing.T) {
	trail := &fakeTrail{}
	h := newHarness(t, withFakeTrail(trail), WithBudget(1, time.Hour))
	huge := strings.Repeat("x", 2<<20)
	h.mock.RegisterNoResponder(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("malformed HTTP status line " + huge)
	})
	req, _ := newPost(t, context.Background(), `{"a":1}`, true)
	req.Header.Set(HeaderCorrelationID, "corr-"+huge)
	if _, err := h.tr.RoundTrip(req); !errors.Is(err, ErrDeadLetter) {
		t.Fatalf("error %v, want a dead letter", err)
	}
	trail.mu.Lock()
	defer trail.mu.Unlock()
	for _, rec := range trail.records {
		for _, k := range []string{FieldCorrelationID, FieldError} {
			v, _ := rec[k].(string)
			if len(v) > maxFieldText+200 {
				t.Errorf("%s %s: %d bytes kept", rec["msg"], k, len(v))
			}
		}
	}
	corr := "corr-" + huge
	if got := capText(corr); len(got) > maxFieldText+200 || !strings.Contains(got, fmt.Sprintf("sha256 of all %d", len(corr))) {
		t.Errorf("capText kept %d bytes (%.80q...)", len(got), got[maxFieldText:])
	}
	if trail.records[0][FieldCorrelationID] != capText(corr) {
		t.Errorf("the correlation id is not cut as capText cuts it")
	}
}
