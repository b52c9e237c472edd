package grantretrytest_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantretrytest"
)

// TestFiveAttemptCallInASynctestBubbleTakesNoWallTime runs the pipeline's
// call of Example_synctest under grantretry's default policy, backoff
// included, inside a bubble: the bubble's clock moves by the waits, and
// the wall clock by almost nothing.
func TestFiveAttemptCallInASynctestBubbleTakesNoWallTime(t *testing.T) {
	var advance time.Duration
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f, ref, out, err := fiveAttemptCall()
		advance = time.Since(t0)
		if err != nil {
			t.Fatalf("the call failed: %v", err)
		}
		if ref != "FND-0001" || out.Attempts != 5 || out.Disposition != grantretry.Succeeded {
			t.Fatalf("got reference %q, %d attempts, %v; want FND-0001, 5 attempts, succeeded", ref, out.Attempts, out.Disposition)
		}
		reqs := f.Requests()
		if len(reqs) != 5 || f.Count(out.IdempotencyKey) != 5 || out.IdempotencyKey == "" {
			t.Fatalf("the funder got %d requests, %d with the call's key %q; want 5 and 5", len(reqs), f.Count(out.IdempotencyKey), out.IdempotencyKey)
		}
		// The bubble's clock moved by the waits alone, each under its
		// full-jitter ceiling: DefaultBackoffBase, doubled each retry.
		for i := 1; i < len(reqs); i++ {
			wait := reqs[i].At.Sub(reqs[i-1].At)
			if ceiling := grantretry.DefaultBackoffBase << (i - 1); wait < 0 || wait > ceiling {
				t.Errorf("wait %d was %v, want 0 to %v", i, wait, ceiling)
			}
		}
		if waits := reqs[4].At.Sub(reqs[0].At); waits != advance {
			t.Errorf("the bubble's clock moved %v, the waits between attempts %v: want the same", advance, waits)
		}
		if err := f.Err(); err != nil || f.Unclosed() != 0 {
			t.Errorf("Err %v, %d bodies unclosed; want nil, 0", err, f.Unclosed())
		}
	})
	wall := time.Since(start)
	t.Logf("five attempts: %v on the bubble's clock, %v of wall time", advance, wall)
	if advance <= 0 {
		t.Errorf("the bubble's clock did not move: no backoff was waited")
	}
	if wall >= 100*time.Millisecond {
		t.Errorf("the call took %v of wall time, want under 100ms", wall)
	}
}

// TestDelayPastTheAttemptTimeoutIsCutByItInABubble: a Funder that takes a
// minute to answer is cut at WithAttemptTimeout on the bubble's clock, and
// the call is sent again; the funder processed both.
func TestDelayPastTheAttemptTimeoutIsCutByItInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := grantretrytest.NewFunder(
			grantretrytest.Reply(201, `{"reference":"FND-LATE"}`).After(time.Minute),
			grantretrytest.Reply(201, `{"reference":"FND-0001"}`),
		)
		client := &http.Client{Transport: grantretry.New(f, grantretry.WithAttemptTimeout(10*time.Second))}
		ref, out, err := submit(context.Background(), client, "https://funder.example/v1/applications", `{}`)
		if err != nil || ref != "FND-0001" || out.Attempts != 2 {
			t.Fatalf("got %q, %d attempts, %v; want FND-0001, 2 attempts, no error", ref, out.Attempts, err)
		}
		reqs := f.Requests()
		gap := reqs[1].At.Sub(reqs[0].At)
		if gap < 10*time.Second || gap > 10*time.Second+grantretry.DefaultBackoffBase {
			t.Errorf("the resend came %v after the first attempt, want the 10s timeout and a wait under %v", gap, grantretry.DefaultBackoffBase)
		}
		if !reqs[0].Processed || f.Processed(reqs[0].Key) != 2 {
			t.Errorf("the funder processed %d, first %v: want both attempts processed", f.Processed(reqs[0].Key), reqs[0].Processed)
		}
	})
}

// TestDelayEndsWhenTheCallersContextDoes: the caller's deadline ends a
// delay on the bubble's clock, and the call reports it.
func TestDelayEndsWhenTheCallersContextDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := grantretrytest.NewFunder(grantretrytest.Reply(201, "").After(time.Hour))
		client := &http.Client{Transport: grantretry.New(f)}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		t0 := time.Now()
		_, out, err := submit(ctx, client, "https://funder.example/v1/applications", `{}`)
		if err == nil || out.Reason != "transport:deadline" {
			t.Fatalf("got %v, reason %q; want the caller's deadline", err, out.Reason)
		}
		if d := time.Since(t0); d != 3*time.Second {
			t.Errorf("the call ended after %v on the bubble's clock, want 3s", d)
		}
	})
}
