package oteltest

import (
	"context"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A call that ends owed after its closing time is counted on
// grantretry.calls.late, by disposition; one that ends owed in time, or
// without a closing time, is not.
func TestLateCallsAreCountedByDisposition(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithMeterProvider(mp), fast, grantretry.WithBudget(0, time.Minute))
	post(t, rt, grantretry.WithClosingTime(context.Background(), time.Now().Add(-time.Hour)), funderURL)
	post(t, rt, grantretry.WithClosingTime(context.Background(), time.Now().Add(time.Hour)), funderURL)
	post(t, rt, context.Background(), funderURL)
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.calls.late", with(funderHost, "grantretry.disposition", "dead_letter", "http.request.method", "POST")); n != 1 {
		t.Errorf("late calls = %v, want 1", n)
	}
	if n := sum(t, ms, "grantretry.calls", nil); n != 3 {
		t.Errorf("calls = %v, want 3", n)
	}
}

// The span of a late call says so; the span of a call in time does not
// carry the attribute.
func TestALateCallsSpanSaysItIsLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		due  time.Duration
		late bool
	}{{"late", -time.Hour, true}, {"in_time", time.Hour, false}} {
		t.Run(tc.name, func(t *testing.T) {
			sr, tp := recorder(t)
			rt := grantretry.New(&script{statuses: []int{503}}, grantretry.WithTracerProvider(tp), fast, grantretry.WithBudget(0, time.Minute))
			post(t, rt, grantretry.WithClosingTime(context.Background(), time.Now().Add(tc.due)), funderURL)
			for _, s := range sr.Ended() {
				if s.Name() != "grantretry.call" {
					continue
				}
				v, ok := attr(s, "grantretry.late")
				if ok != tc.late || (ok && v != "true") {
					t.Errorf("grantretry.late = %q (present %v), want present %v", v, ok, tc.late)
				}
				return
			}
			t.Fatal("no call span")
		})
	}
}
