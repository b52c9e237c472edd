package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// lateLetters puts four letters: one judged late, one whose closing time
// has passed, one in time and one without a closing time.
func putLateLetters(t *testing.T, s *Letters, url string) (late, passed, inTime, none *grantretry.Letter) {
	t.Helper()
	late, passed, inTime, none = testLetter(url, 1), testLetter(url, 2), testLetter(url, 3), testLetter(url, 4)
	late.DueBy, late.Late = time.Now().Add(time.Hour).UTC(), true
	passed.DueBy = time.Now().Add(-time.Hour).UTC()
	inTime.DueBy = time.Now().Add(time.Hour).UTC()
	for _, l := range []*grantretry.Letter{late, passed, inTime, none} {
		if err := s.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return late, passed, inTime, none
}

func claimedIDs(claims []*Claim) map[string]bool {
	got := map[string]bool{}
	for _, c := range claims {
		got[c.Letter.ID] = true
	}
	return got
}

// Put stores a letter's closing time and lateness in their columns, and
// Claim leaves the late letters, unless ctx comes from
// deadletter.SendLate: the explicit choice.
func TestClaimLeavesLateLettersWithoutTheExplicitChoice(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	late, passed, inTime, none := putLateLetters(t, s, "http://127.0.0.1:1")
	var dueBy *time.Time
	var isLate bool
	if err := pool.QueryRow(ctx, `SELECT due_by, late FROM grantretry_letters WHERE id = $1`, late.ID).Scan(&dueBy, &isLate); err != nil {
		t.Fatal(err)
	}
	if dueBy == nil || !dueBy.Equal(late.DueBy.Truncate(time.Microsecond)) || !isLate {
		t.Errorf("columns due_by %v, late %v; want %v and true", dueBy, isLate, late.DueBy)
	}
	claims, err := s.Claim(ctx, "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimedIDs(claims); len(got) != 2 || !got[inTime.ID] || !got[none.ID] {
		t.Errorf("claimed %v; want %s and %s, not the late %s and %s", got, inTime.ID, none.ID, late.ID, passed.ID)
	}
	claims, err = s.Claim(deadletter.SendLate(ctx), "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimedIDs(claims); len(got) != 2 || !got[late.ID] || !got[passed.ID] {
		t.Errorf("claimed under SendLate %v; want %s and %s", got, late.ID, passed.ID)
	}
}

// Letters.Redeliver of a late letter (claimed by its ID) sends nothing,
// the error matches deadletter.ErrLate, and the letter is released as it
// was; under deadletter.SendLate it is sent.
func TestLettersRedeliverOfALateLetterNeedsSendLate(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	_, passed, _, _ := putLateLetters(t, s, f.srv.URL)
	claims, err := s.ClaimIDs(ctx, "w", []string{passed.ID})
	if err != nil || len(claims) != 1 {
		t.Fatalf("ClaimIDs: %d, %v", len(claims), err)
	}
	if _, err := s.Redeliver(ctx, claims[0], f.srv.Client(), nil); !errors.Is(err, deadletter.ErrLate) {
		t.Fatalf("Redeliver: %v, want ErrLate", err)
	}
	if n := f.counts()[passed.IdempotencyKey]; n != 0 {
		t.Fatalf("the funder was sent the letter %d times, want never", n)
	}
	got, _, err := s.Get(ctx, passed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ambiguous {
		t.Errorf("the letter is ambiguous after a refusal that sent nothing")
	}
	claims, err = s.ClaimIDs(ctx, "w", []string{passed.ID})
	if err != nil || len(claims) != 1 {
		t.Fatalf("ClaimIDs after the refusal: %d, %v", len(claims), err)
	}
	if _, err := s.Redeliver(deadletter.SendLate(ctx), claims[0], f.srv.Client(), nil); err != nil {
		t.Fatalf("Redeliver under SendLate: %v", err)
	}
	if n := f.counts()[passed.IdempotencyKey]; n != 1 {
		t.Errorf("the funder was sent the letter %d times, want once", n)
	}
}

// fixedClock is a Clock that reads one time and never waits.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                                   { return c.now }
func (c fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// A redelivery that ends owed again after the letter's closing time (on
// the Transport's Clock) is late: the letter is released late, keeping
// its DueBy, and Claim leaves it from then on.
func TestRedeliveryLateAgainMakesTheLetterLate(t *testing.T) {
	pool := newPool(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := testLetter(srv.URL, 1)
	l.DueBy = time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	claims, err := s.Claim(ctx, "w", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	tr := grantretry.New(nil, grantretry.WithClock(fixedClock{l.DueBy.Add(time.Minute)}), grantretry.WithBudget(0, time.Hour))
	defer tr.CloseIdleConnections()
	r, err := s.Redeliver(ctx, claims[0], &http.Client{Transport: tr}, nil)
	if err == nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("Redeliver: %+v, %v; want a 503 and an error", r, err)
	}
	if hits.Load() != 1 {
		t.Fatalf("funder got %d requests, want 1", hits.Load())
	}
	got, _, err := s.Get(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Late || !got.DueBy.Equal(l.DueBy) {
		t.Errorf("letter Late %v DueBy %v; want true and %v", got.Late, got.DueBy, l.DueBy)
	}
	again, err := s.Claim(ctx, "w", 1)
	if err != nil || len(again) != 0 {
		t.Errorf("Claim after a late redelivery: %d, %v; want none", len(again), err)
	}
}

// A redelivery refused by an open breaker after the letter's closing time
// (on the Transport's Clock) sends nothing, but is late: the letter is
// released late, and Claim leaves it from then on.
func TestRedeliveryCircuitOpenAfterTheClosingTimeMakesTheLetterLate(t *testing.T) {
	pool := newPool(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	due := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	tr := grantretry.New(nil, grantretry.WithClock(fixedClock{due.Add(time.Minute)}),
		grantretry.WithBudget(0, time.Hour), grantretry.WithBreaker(1, time.Hour))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Post(srv.URL+"/other", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := NewLetters(pool, WithLimit(5*time.Second))
	ctx := context.Background()
	l := testLetter(srv.URL, 1)
	l.DueBy = due
	if err := s.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	claims, err := s.Claim(ctx, "w", 1)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %d, %v", len(claims), err)
	}
	_, err = s.Redeliver(ctx, claims[0], client, nil)
	var ge *grantretry.Error
	if !errors.As(err, &ge) || ge.Disposition != grantretry.CircuitOpen || ge.Attempts != 0 || !ge.Late {
		t.Fatalf("Redeliver: %v; want circuit_open, late, nothing sent", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("funder got %d requests, want 1", n)
	}
	got, _, err := s.Get(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Late || !got.DueBy.Equal(due) || got.Ambiguous || got.Attempts != l.Attempts {
		t.Errorf("letter %+v; want late, due by %v, its attempts, not ambiguous", got, due)
	}
	again, err := s.Claim(ctx, "w", 1)
	if err != nil || len(again) != 0 {
		t.Errorf("Claim after a late redelivery: %d, %v; want none", len(again), err)
	}
}
