package grantretry

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// callBy sends one POST through h under the closing time due (none if
// zero) and returns its outcome, with or without a response.
func callBy(t *testing.T, h *harness, due time.Time) Outcome {
	t.Helper()
	ctx := context.Background()
	if !due.IsZero() {
		ctx = WithClosingTime(ctx, due)
	}
	req, _ := newPost(t, ctx, "x", true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		return mustError(t, err).Outcome
	}
	resp.Body.Close()
	return mustOutcome(t, resp)
}

// A call is late when it ends owed under a closing time it misses: the
// funder will not take it before a time after the closing time, or it is
// still owed when the closing time has passed. A call that ends any other
// way, or without a closing time, is never late.
func TestOutcomeIsLateWhenOwedWorkMissesItsClosingTime(t *testing.T) {
	start := newFakeClock().Now()
	for _, tc := range []struct {
		name      string
		notBefore time.Time // of the owed verdict; zero for none
		status    int
		due       time.Time
		late      bool
	}{
		{"owed_until_after_closing", start.Add(2 * time.Hour), 429, start.Add(time.Hour), true},
		{"owed_until_before_closing", start.Add(30 * time.Minute), 429, start.Add(time.Hour), false},
		{"owed_without_a_time_before_closing", time.Time{}, 429, start.Add(time.Hour), false},
		{"owed_after_closing_passed", start.Add(time.Minute), 429, start.Add(-time.Minute), true},
		{"owed_without_closing_time", start.Add(2 * time.Hour), 429, time.Time{}, false},
		{"succeeded_after_closing", time.Time{}, 201, start.Add(-time.Hour), false},
		{"terminal_after_closing", time.Time{}, 422, start.Add(-time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithClassifier(owedClassifier(tc.notBefore)))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(tc.status))
			o := callBy(t, h, tc.due)
			if o.Late != tc.late {
				t.Errorf("Late = %v, want %v (outcome %+v)", o.Late, tc.late, o)
			}
		})
	}
}

// The closing time does not cut a call short: its retries run as they
// would, and a call whose budget runs out after the closing time, on the
// Transport's Clock, is late; one whose budget runs out before it is not.
func TestOutcomeIsLateWhenItsBudgetRunsOutAfterTheClosingTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		due  time.Duration // after the clock's start
		late bool
	}{
		{"closing_during_retries", time.Second, true},
		{"closing_after_the_budget", time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithBudget(3, time.Hour), WithBackoff(time.Second, 4*time.Second), WithRandSource(maxSource{}))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
			o := callBy(t, h, h.clock.Now().Add(tc.due))
			if o.Disposition != DeadLetter || o.Attempts != 4 {
				t.Fatalf("outcome %+v, want dead_letter after 4 attempts: the closing time cuts nothing short", o)
			}
			if o.Late != tc.late {
				t.Errorf("Late = %v, want %v (ended at %v)", o.Late, tc.late, h.clock.Now())
			}
		})
	}
}

// A zero closing time leaves the context without one, even under a
// context that had one.
func TestZeroClosingTimeClearsIt(t *testing.T) {
	h := newHarness(t, WithClassifier(owedClassifier(time.Time{})))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(429))
	ctx := WithClosingTime(WithClosingTime(context.Background(), h.clock.Now().Add(-time.Hour)), time.Time{})
	req, _ := newPost(t, ctx, "x", true)
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Late {
		t.Errorf("Late under a cleared closing time: %+v", o)
	}
	if got := WithClosingTime(context.Background(), time.Time{}); got != context.Background() {
		t.Error("a zero closing time on a context without one made a new context")
	}
}

// The letter of a late call keeps the closing time and says it is late;
// both survive its JSON. A letter of a call without a closing time has
// neither.
func TestLetterOfLateCallHasDueByAndLate(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithClassifier(owedClassifier(time.Time{})))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(429))
	due := h.clock.Now().Add(-time.Minute)
	o := callBy(t, h, due)
	if !o.Late {
		t.Fatalf("outcome %+v, want late", o)
	}
	l := sink.only(t)
	if !l.DueBy.Equal(due) || !l.Late || l.Version != LetterVersion || LetterVersion < 4 {
		t.Errorf("letter DueBy %v Late %v version %d; want %v, true, %d (4 or more)", l.DueBy, l.Late, l.Version, due, LetterVersion)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["due_by"] != due.Format(time.RFC3339Nano) || m["late"] != true {
		t.Errorf("due_by %v, late %v; want %s and true", m["due_by"], m["late"], due.Format(time.RFC3339Nano))
	}
	var back Letter
	if err := json.Unmarshal(b, &back); err != nil || !back.DueBy.Equal(due) || !back.Late {
		t.Errorf("read back DueBy %v Late %v (%v), want %v and true", back.DueBy, back.Late, err, due)
	}

	none := &memLetters{}
	h = newHarness(t, WithDeadLetter(none), WithClassifier(owedClassifier(time.Time{})))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(429))
	callBy(t, h, time.Time{})
	b, err = json.Marshal(none.only(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "due_by") || strings.Contains(string(b), `"late"`) {
		t.Errorf("letter without a closing time has due_by or late: %s", b)
	}
}

// A letter of version 3, written before letters kept a closing time,
// reads with neither.
func TestLetterOfVersion3ReadsWithoutDueBy(t *testing.T) {
	const v3 = `{"version":3,"id":"20261130T090000.000000000Z-abc","disposition":"dead_letter","stop_reason":"owed_later","reason":"owed:429","method":"POST","url":"https://funder.test/v1/applications","body_sha256":"","body_bytes":0,"correlation_id":"c","attempts":1,"last_status":429,"first_attempt":"2026-11-30T09:00:00Z","last_attempt":"2026-11-30T09:00:00Z","created":"2026-11-30T09:00:00Z","not_before":"2026-11-30T10:00:00Z"}`
	var l Letter
	if err := json.Unmarshal([]byte(v3), &l); err != nil {
		t.Fatal(err)
	}
	if l.Version != 3 || !l.DueBy.IsZero() || l.Late || l.NotBefore.IsZero() {
		t.Errorf("v3 letter read as version %d DueBy %v Late %v NotBefore %v", l.Version, l.DueBy, l.Late, l.NotBefore)
	}
}

// The disposition line of a call with a closing time carries it and
// whether the call is late; other calls' lines have neither field.
func TestDispositionLineCarriesDueByAndLate(t *testing.T) {
	at := newFakeClock().Now()
	for _, tc := range []struct {
		name   string
		status int
		due    time.Time
		late   any // nil: absent
	}{
		{"late", 429, at.Add(-time.Minute), true},
		{"owed_in_time", 429, at.Add(time.Hour), false},
		{"succeeded_after_closing", 201, at.Add(-time.Minute), false},
		{"no_closing_time", 429, time.Time{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithClassifier(owedClassifier(time.Time{})))
			h.mock.RegisterResponder(http.MethodPost, funderURL, seq(tc.status))
			callBy(t, h, tc.due)
			lines := h.dispositionLines()
			if len(lines) != 1 {
				t.Fatalf("%d disposition lines, want 1", len(lines))
			}
			f := lines[0].ContextMap()
			if f[FieldLate] != tc.late {
				t.Errorf("%s = %v, want %v", FieldLate, f[FieldLate], tc.late)
			}
			got, ok := f[FieldDueBy].(time.Time)
			switch {
			case tc.due.IsZero() && f[FieldDueBy] != nil:
				t.Errorf("%s = %v without a closing time, want it absent", FieldDueBy, f[FieldDueBy])
			case !tc.due.IsZero() && (!ok || !got.Equal(tc.due)):
				t.Errorf("%s = %v, want %v", FieldDueBy, f[FieldDueBy], tc.due)
			}
		})
	}
}
