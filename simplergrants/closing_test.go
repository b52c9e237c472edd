package simplergrants_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
	"github.com/grantretry/grantretry/simplergrants"
)

// A closing date ends with its day in US Eastern time, standard or
// daylight.
func TestClosingTimeIsTheEndOfTheDayInUSEastern(t *testing.T) {
	for date, want := range map[string]time.Time{
		"2026-12-04": time.Date(2026, 12, 5, 5, 0, 0, 0, time.UTC), // EST, UTC-5
		"2027-07-01": time.Date(2027, 7, 2, 4, 0, 0, 0, time.UTC),  // EDT, UTC-4
		"2027-03-13": time.Date(2027, 3, 14, 5, 0, 0, 0, time.UTC), // the night clocks go forward, at 02:00 on the 14th
	} {
		got, err := simplergrants.ClosingTime(date)
		if err != nil || !got.Equal(want) {
			t.Errorf("ClosingTime(%q) = %v, %v; want %v", date, got, err, want)
		}
	}
	for _, bad := range []string{"", "2026-13-01", "04/12/2026", "2026-12-04T00:00:00Z"} {
		if _, err := simplergrants.ClosingTime(bad); err == nil || !strings.HasPrefix(err.Error(), "grantretry: ") {
			t.Errorf("ClosingTime(%q): err = %v, want a grantretry error", bad, err)
		}
	}
}

// closingAPI is the fake API on clk, with a competition that closes on
// closingDate ("" none), and a client with the credentials.
func closingAPI(t *testing.T, clk *fakeClock, closingDate string) (*fakesimpler.API, *http.Client) {
	t.Helper()
	a := fakesimpler.New(fakesimpler.Config{
		APIKeys: []string{apiKey}, Users: map[string]string{userToken: userID},
		Now: clk.Now, Sleep: clk.Sleep, RateLimit: -1,
	})
	t.Cleanup(a.Close)
	a.AddCompetition(fakesimpler.Competition{ID: competition, OpportunityNumber: "HHS-2026-ACF-0001", ClosingDate: closingDate})
	return a, &http.Client{Transport: credentials{a.Client().Transport}}
}

// CompetitionClosing reads the competition's closing_date from the API,
// and the fake closes it at that time.
func TestCompetitionClosingReadsTheCompetitionsClosingDate(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	a, client := closingAPI(t, clk, "2026-12-04")
	rec := simplergrants.NewReconciler(a.URL(), client)
	ctx := context.Background()
	closes, err := rec.CompetitionClosing(ctx, competition)
	if want := time.Date(2026, 12, 5, 5, 0, 0, 0, time.UTC); err != nil || !closes.Equal(want) {
		t.Fatalf("CompetitionClosing = %v, %v; want %v", closes, err, want)
	}
	// The API takes a start up to that instant, and none at it.
	_ = clk.Sleep(ctx, closes.Sub(clk.Now())-time.Second)
	startDirect(t, a, client, "sub-1")
	_ = clk.Sleep(ctx, time.Second)
	resp, err := client.Do(startRequest(t, ctx, a.URL(), "sub-2"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a start at the closing time: %d, want 422", resp.StatusCode)
	}

	// No closing date: no closing time, which WithClosingTime takes as none.
	b, bclient := closingAPI(t, clk, "")
	if closes, err := simplergrants.NewReconciler(b.URL(), bclient).CompetitionClosing(ctx, competition); err != nil || !closes.IsZero() {
		t.Errorf("no closing date: %v, %v; want the zero time", closes, err)
	}
}

func TestCompetitionClosingSaysWhyItHasNone(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	a, client := closingAPI(t, clk, "2026-12-04")
	rec := simplergrants.NewReconciler(a.URL(), client)
	ctx := context.Background()
	check := func(what, id, want string) {
		t.Helper()
		closes, err := rec.CompetitionClosing(ctx, id)
		if err == nil || !closes.IsZero() || !strings.HasPrefix(err.Error(), "grantretry: simplergrants: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, %v; want an error saying %q", what, closes, err, want)
		}
	}
	check("an unknown competition", "00000000-0000-4000-8000-000000000000", "answered 404")
	check("not a UUID", "HHS-2026-ACF-0001", "is not a UUID")
	a.SetMaintenance(time.Hour)
	check("maintenance", competition, "answered 503 (simplergrants:maintenance)")
	a.SetMaintenance(0)
	var nilRec *simplergrants.Reconciler
	if _, err := nilRec.CompetitionClosing(ctx, competition); err == nil {
		t.Error("a nil Reconciler answered no error")
	}
}

// A submit refused competition_not_open under a closing time ends
// failed_terminal, and its Reason names the refusal: that, not Late, is
// how a pipeline tells a missed deadline, for Late is of work still
// owed. An owed call past the closing time is Late.
func TestSubmitAfterTheClosingTimeIsTerminalAndItsReasonSaysSo(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)}
	a, client := closingAPI(t, clk, "2026-12-04")
	rec := simplergrants.NewReconciler(a.URL(), client).ForUser(userID)
	ctx := context.Background()
	closes, err := rec.CompetitionClosing(ctx, competition)
	if err != nil {
		t.Fatal(err)
	}
	ctx = grantretry.WithClosingTime(ctx, closes)
	pc := profileClient(t, a, client, clk)
	o, id := outcomeOf(t, pc, startRequest(t, grantretry.WithSubmissionID(ctx, "sub-1"), a.URL(), "sub-1"))
	if o.Disposition != grantretry.Succeeded || id == "" {
		t.Fatalf("start before the closing time: %+v", o)
	}
	_ = clk.Sleep(ctx, closes.Sub(clk.Now())+time.Minute)
	o, _ = outcomeOf(t, pc, submitRequest(t, grantretry.WithSubmissionID(ctx, "sub-1-submit"), a.URL(), id))
	if o.Disposition != grantretry.FailedTerminal || o.Attempts != 1 || o.Late ||
		o.Reason != "terminal:422;simplergrants:competition_not_open" {
		t.Errorf("submit after the closing time: %s/%s after %d, reason %q, late %v; want failed_terminal after 1, competition_not_open, not late",
			o.Disposition, o.StopReason, o.Attempts, o.Reason, o.Late)
	}
	if l := a.Ledger(); l.Submitted[id] != 0 {
		t.Errorf("the API submitted it %d times", l.Submitted[id])
	}

	// Maintenance past the closing time: owed, and late.
	a.SetMaintenance(time.Hour)
	o, _ = outcomeOf(t, pc, startRequest(t, grantretry.WithSubmissionID(ctx, "sub-2"), a.URL(), "sub-2"))
	if o.StopReason != grantretry.StopOwedLater || !o.Late {
		t.Errorf("owed after the closing time: %s, late %v; want owed_later, late", o.StopReason, o.Late)
	}
}
