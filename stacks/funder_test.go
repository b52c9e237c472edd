package stacks

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// funder is a funder API on 127.0.0.1 that answers the n-th request with
// the n-th status of its script (the last one repeats): 201 with a
// receipt, 422 with a problem, anything else with a short text. It keeps
// the headers of every request it received.
type funder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []int
	got    []http.Header
}

func newFunder(t *testing.T, script ...int) *funder {
	t.Helper()
	f := &funder{script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		status := f.script[min(len(f.got), len(f.script)-1)]
		f.got = append(f.got, r.Header.Clone())
		f.mu.Unlock()
		switch status {
		case http.StatusCreated:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"reference":"R-2026-0042"}`)
		case http.StatusUnprocessableEntity:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"detail":"budget narrative missing"}`)
		default:
			http.Error(w, http.StatusText(status), status)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *funder) url() string { return f.srv.URL + "/v1/applications" }

// requests returns the headers of the requests received so far.
func (f *funder) requests() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.got...)
}

// distinct returns how many different values of the header name the
// requests carried, and whether every request carried one.
func distinct(reqs []http.Header, name string) (n int, all bool) {
	seen := map[string]bool{}
	all = true
	for _, h := range reqs {
		v := h.Get(name)
		if v == "" {
			all = false
			continue
		}
		seen[v] = true
	}
	return len(seen), all
}

// dialCounting returns a net/http Transport that counts the connections
// it dials: a pool that keeps its connections dials once.
func dialCounting(t *testing.T) (*http.Transport, *atomic.Int64) {
	var dials atomic.Int64
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &dials
}

// post sends one application through client under the submission id the
// context names, and returns the response with its body read and closed.
func post(t *testing.T, client *http.Client, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"applicant":"Example Foundation"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// testClock is the start of a test's stepClock.
var testClock = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
