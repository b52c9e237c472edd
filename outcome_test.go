package grantretry

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An error a caller prints from http.Client.Do names the URL once: the
// *url.Error around grantretry's names it, and grantretry's does not.
func TestClientErrorNamesTheURLOnce(t *testing.T) {
	tr := New(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("connection reset by peer")
	}), WithClock(newFakeClock()), WithBudget(1, time.Hour))
	req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader(`{"a":1}`))
	_, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		t.Fatal("want an error")
	}
	if n := strings.Count(err.Error(), "funder.test/v1/applications"); n != 1 {
		t.Errorf("%q names the URL %d times, want once", err, n)
	}
	if n := strings.Count(strings.ToUpper(err.Error()), "POST"); n != 1 {
		t.Errorf("%q names the method %d times, want once", err, n)
	}
}
