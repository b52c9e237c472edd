package oteltest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// quotaScript answers 429 LimitExceededException, AWS API Gateway's quota:
// owed, with no time given.
func quotaScript() *script {
	return &script{statuses: []int{429}, header: http.Header{"X-Amzn-Errortype": {"LimitExceededException"}}}
}

func TestCallsHeldByAQuotaAreCounted(t *testing.T) {
	r, mp := reader(t)
	rt := grantretry.New(quotaScript(), grantretry.WithMeterProvider(mp), fast, grantretry.WithBreakerProbe(time.Hour))
	for i := 0; i < 3; i++ {
		post(t, rt, context.Background(), funderURL) // owed, then held twice
	}
	ms := collect(t, r)
	if n := sum(t, ms, "grantretry.calls.held", with(funderHost, "http.request.method", "POST")); n != 2 {
		t.Errorf("grantretry.calls.held = %v, want 2", n)
	}
	if n := sum(t, ms, "grantretry.calls", with(funderHost, "grantretry.disposition", "dead_letter", "grantretry.stop_reason", "owed_later")); n != 3 {
		t.Errorf("owed_later calls = %v, want 3", n)
	}
}

func TestAHeldCallsSpanSaysSo(t *testing.T) {
	sr, tp := recorder(t)
	rt := grantretry.New(quotaScript(), grantretry.WithTracerProvider(tp), fast, grantretry.WithBreakerProbe(time.Hour))
	post(t, rt, context.Background(), funderURL)
	post(t, rt, context.Background(), funderURL)
	var held []bool
	for _, s := range sr.Ended() {
		if s.Name() != "grantretry.call" {
			continue
		}
		v, ok := attr(s, "grantretry.quota.held")
		held = append(held, ok && v == "true")
	}
	if len(held) != 2 || held[0] || !held[1] {
		t.Errorf("grantretry.quota.held on the call spans: %v; want only on the second, the held call", held)
	}
}
