package grantretry_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/grantretry/grantretry"
)

// A submission's closing time rides on the request's context. It cuts
// nothing short: the call is judged when it ends, and one still owed
// after the closing time is late.
func ExampleWithClosingTime() {
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "try later", http.StatusServiceUnavailable)
	}))
	defer funder.Close()
	client := &http.Client{Transport: grantretry.New(nil, grantretry.WithClock(noWait{}), grantretry.WithBudget(2, time.Minute))}

	closesAt := time.Now().Add(-time.Minute) // the programme closed a minute ago
	ctx := grantretry.WithClosingTime(grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042"), closesAt)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, funder.URL+"/applications", bytes.NewReader([]byte(`{"amount":25000}`)))
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if out, ok := grantretry.OutcomeOf(resp); ok {
		fmt.Println(out.Disposition, "late:", out.Late)
	}
	// Output: dead_letter late: true
}
