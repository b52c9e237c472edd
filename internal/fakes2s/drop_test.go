package fakes2s_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

func TestDropRecordsThenHangsUp(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: 1})
	s := submit(context.Background(), newClient(t, f), f.URL(), "GRANT-42", "key-1")
	if !errors.Is(s.err, io.EOF) {
		t.Fatalf("submit: status %d, err %v; want io.EOF, the connection closed without an answer", s.status, s.err)
	}
	if f.Applications("GRANT-42") != 1 || f.Dropped() != 1 {
		t.Errorf("applications %d, dropped %d; want 1, 1: recorded, then dropped", f.Applications("GRANT-42"), f.Dropped())
	}
	// A fresh connection: net/http does not resend, key or no key.
	if !slices.Equal(s.reused, []bool{false}) || f.Received() != 1 {
		t.Errorf("connections %v, received %d; want [false], 1", s.reused, f.Received())
	}
}

// net/http's own resend, as the fake reproduces it: its Transport
// resends a POST by itself when the connection it reused is
// closed before any answer, if the request has GetBody and an
// Idempotency-Key header. The funder ignores the key, so the resend is a
// second application. A first submission, of A, on a fresh connection puts
// that connection in the idle pool, so B goes out on a reused one; the
// funder never drops A.
func TestNetHTTPResendsOnReusedConnection(t *testing.T) {
	dropB := func(id string, _ int) bool { return id == "B" }
	dropFirstB := func(id string, n int) bool { return id == "B" && n == 1 }
	cases := []struct {
		name       string
		drop       func(string, int) bool
		warm       bool   // submit A first
		key        string // B's Idempotency-Key
		wantReused []bool // per connection B was sent on, whether it was reused
		wantErr    bool   // B's call fails with io.EOF; else it is answered 200
		wantApps   int    // applications of B recorded
	}{
		{"fresh connection: not resent", dropB, false, "key-B", []bool{false}, true, 1},
		{"reused, no Idempotency-Key: not resent", dropB, true, "", []bool{true}, true, 1},
		{"reused, Idempotency-Key: resent, dropped again on a fresh connection", dropB, true, "key-B", []bool{true, false}, true, 2},
		{"reused, Idempotency-Key: resent, answered: a silent duplicate", dropFirstB, true, "key-B", []bool{true, false}, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, fakes2s.Options{Drop: tc.drop})
			client := newClient(t, f)
			ctx := context.Background()
			warmApps := 0
			if tc.warm {
				if a := submit(ctx, client, f.URL(), "A", "key-A"); a.err != nil || !slices.Equal(a.reused, []bool{false}) {
					t.Fatalf("A: err %v, connections %v; want no error, [false]", a.err, a.reused)
				}
				warmApps = 1
			}
			b := submit(ctx, client, f.URL(), "B", tc.key)
			if !slices.Equal(b.reused, tc.wantReused) {
				t.Errorf("B went out on connections %v (reused?), want %v", b.reused, tc.wantReused)
			}
			if tc.wantErr != (b.err != nil) || (tc.wantErr && !errors.Is(b.err, io.EOF)) {
				t.Errorf("B: status %d, err %v; want an io.EOF error: %v", b.status, b.err, tc.wantErr)
			}
			recorded := f.TrackingNumbers("B")
			if len(recorded) != tc.wantApps || f.Duplicates() != tc.wantApps-1 {
				t.Errorf("B recorded %v, duplicates %d; want %d applications", recorded, f.Duplicates(), tc.wantApps)
			}
			if !tc.wantErr && (b.status != http.StatusOK || b.tracking != recorded[len(recorded)-1]) {
				t.Errorf("B answered %d with %q, want 200 with the resend's %q", b.status, b.tracking, recorded[len(recorded)-1])
			}
			if f.Received() != warmApps+len(tc.wantReused) {
				t.Errorf("received %d, want %d", f.Received(), warmApps+len(tc.wantReused))
			}
		})
	}
}

// The measurement, with plain net/http: 200 submissions, one after
// another on one client, against the default 10% of drops. With an
// Idempotency-Key, every drop on a reused connection is resent by
// net/http and becomes a second application, and only a drop on a fresh
// connection reaches the caller as an error; without one, nothing is
// resent and every drop is an ambiguous error. Either way each drop is
// accounted for exactly once.
func TestResendsOver200Submissions(t *testing.T) {
	for _, key := range []bool{false, true} {
		name := "no Idempotency-Key"
		if key {
			name = "Idempotency-Key"
		}
		t.Run(name, func(t *testing.T) {
			f := start(t, fakes2s.Options{Seed: 12})
			client := newClient(t, f)
			var errs, resends int
			for i := range 200 {
				k := ""
				if key {
					k = "key-" + id(i)
				}
				s := submit(context.Background(), client, f.URL(), id(i), k)
				if s.err != nil {
					errs++
				}
				resends += len(s.reused) - 1
			}
			t.Logf("%s: received %d, dropped %d, resent by net/http %d, duplicates %d, errors %d",
				name, f.Received(), f.Dropped(), resends, f.Duplicates(), errs)
			if f.Received() != 200+resends || f.Dropped() != f.Duplicates()+errs || f.Duplicates() != resends {
				t.Errorf("received %d, dropped %d, duplicates %d, errors %d, resends %d: want received = 200 + resends, dropped = duplicates + errors, duplicates = resends",
					f.Received(), f.Dropped(), f.Duplicates(), errs, resends)
			}
			if key != (resends > 0) {
				t.Errorf("net/http resent %d requests, want some only with a key", resends)
			}
			if d := f.Dropped(); d < 10 || d > 30 {
				t.Errorf("dropped %d of about 200, want about DefaultDropRate (10%%)", d)
			}
		})
	}
}

// Drops are a function of the seed, the id and the application's number,
// so a run is reproducible.
func TestDropsAreReproducible(t *testing.T) {
	dropped := func(seed uint64) []string {
		f := start(t, fakes2s.Options{DropRate: 0.5, Seed: seed})
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: f.ClientTLS()}} // no resends
		var ids []string
		for i := range 40 {
			if s := submit(context.Background(), client, f.URL(), id(i), "key"); s.err != nil {
				ids = append(ids, id(i))
			}
		}
		if len(ids) != f.Dropped() {
			t.Errorf("seed %d: %d calls failed, the funder dropped %d", seed, len(ids), f.Dropped())
		}
		return ids
	}
	a, b, c := dropped(1), dropped(1), dropped(2)
	if !slices.Equal(a, b) {
		t.Errorf("seed 1 dropped %v, then %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 both dropped %v", a)
	}
}
