package deadletter_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// A sender killed mid-send leaves the letter's mark, which holds when the
// send began: for a letter that had no first attempt, that is its first,
// and the next question about it carries it.
func TestKilledSendersMarkGivesTheLetterItsFirstAttempt(t *testing.T) {
	l := ledgerLetter("http://127.0.0.1:1")
	d := seedDir(t, l)
	since := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	mark := []byte(`{"since":"` + since.Format(time.RFC3339) + `"}` + "\n")
	if err := os.WriteFile(filepath.Join(d.Path(), l.ID+".sending"), mark, 0o600); err != nil {
		t.Fatal(err)
	}
	var asked []time.Time
	rec := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
		asked = append(asked, q.FirstAttempt)
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
	}
	resp, err := d.Redeliver(context.Background(), http.DefaultClient, l.ID, rec)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(asked) != 1 || !asked[0].Equal(since) {
		t.Errorf("asked with FirstAttempt %v; want the mark's %v", asked, since)
	}
	if got, err := d.Get(l.ID); err != nil || !got.FirstAttempt.Equal(since) || !got.Ambiguous {
		t.Errorf("the letter after its mark was settled: %+v, %v; want ambiguous, first attempt %v", got, err, since)
	}
}

// A redelivery whose context is done before it sets out sends nothing,
// and so writes nothing into its letter: no attempt, no ambiguity.
func TestDirRedeliverWithADoneContextSendsAndRecordsNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	for name, client := range map[string]*http.Client{
		"plain client":         srv.Client(),
		"grantretry transport": {Transport: grantretry.New(srv.Client().Transport)},
	} {
		l := ledgerLetter(srv.URL)
		d := seedDir(t, l)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		resp, err := d.Redeliver(ctx, client, l.ID, nil)
		if err == nil || resp != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, %v; want no response and an error matching context.Canceled", name, resp, err)
		}
		got, gerr := d.Get(l.ID)
		if gerr != nil || got.Ambiguous || got.Attempts != l.Attempts {
			t.Errorf("%s: the letter after a redelivery that never set out: ambiguous %v, attempts %d (was %d), %v",
				name, got != nil && got.Ambiguous, got.Attempts, l.Attempts, gerr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the funder got %d requests", n)
	}
}

// A plain client whose error says the request was not sent (an auth
// layer that failed before calling the next RoundTripper, saying so with
// ErrNotSent), or whose transport asked for a connection and never got
// one, sent nothing: the letter is left as it was.
func TestDirRedeliverOfARequestThatNeverLeftLeavesTheLetter(t *testing.T) {
	refused := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.Join(errors.New("auth: no token"), grantretry.ErrNotSent)
	})
	unreachable := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, errors.New("dial: connection refused")
	}}
	for name, rt := range map[string]http.RoundTripper{"ErrNotSent": refused, "never connected": unreachable} {
		l := ledgerLetter("http://funder.invalid")
		d := seedDir(t, l)
		_, err := d.Redeliver(context.Background(), &http.Client{Transport: rt}, l.ID, nil)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		got, gerr := d.Get(l.ID)
		if gerr != nil || got.Ambiguous || got.Attempts != l.Attempts {
			t.Errorf("%s: ambiguous %v, attempts %d (was %d), %v; want the letter as it was", name, got != nil && got.Ambiguous, got.Attempts, l.Attempts, gerr)
		}
	}
}

// Two calls of one Dir never both send a letter: while one call's
// redelivery of it is in flight, another is refused (ErrInFlight) and
// sends nothing.
func TestDirRedeliverOfALetterInFlightIsRefused(t *testing.T) {
	var hits atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if hits.Add(1) == 1 {
			close(arrived)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	l := ledgerLetter(srv.URL)
	d := seedDir(t, l)
	first := make(chan error, 1)
	go func() {
		resp, err := d.Redeliver(context.Background(), srv.Client(), l.ID, nil)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-arrived
	resp, err := d.Redeliver(context.Background(), srv.Client(), l.ID, deadletter.TrustKey)
	if err == nil {
		resp.Body.Close()
	}
	close(release)
	if ferr := <-first; ferr != nil {
		t.Fatal(ferr)
	}
	if !errors.Is(err, deadletter.ErrInFlight) || resp != nil {
		t.Errorf("the second redelivery: %v, %v; want no response and an error matching ErrInFlight", resp, err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the funder got the letter %d times", n)
	}
}

// Dir.Redeliver follows http.Client's convention: an error comes with no
// response. A failed answer that could not be written into the letter is
// an error, and its body is closed for the caller.
func TestDirRedeliverReturnsNoResponseWithAnError(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		os.Rename(path, path+".moved") // the letter cannot be rewritten
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "upstream failure")
	}))
	defer srv.Close()
	l := ledgerLetter(srv.URL)
	d := seedDir(t, l)
	path = filepath.Join(d.Path(), l.ID+".json")
	resp, err := d.Redeliver(context.Background(), srv.Client(), l.ID, nil)
	if resp != nil {
		resp.Body.Close()
	}
	if err == nil || resp != nil {
		t.Errorf("%v, %v; want an error and no response", resp, err)
	}
}

// Every error of Dir.Redeliver starts "grantretry:" and names the letter,
// whatever it comes from: the letter's file, the client.
func TestDirRedeliverErrorsNameTheLetter(t *testing.T) {
	l := ledgerLetter("http://127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	for _, tc := range []struct {
		name  string
		setup func(d *deadletter.Dir)
		ctx   context.Context
		match error
	}{
		{"malformed file", func(d *deadletter.Dir) {
			os.WriteFile(filepath.Join(d.Path(), l.ID+".json"), []byte("{}"), 0o600)
		}, context.Background(), deadletter.ErrBadLetter},
		{"client error", func(d *deadletter.Dir) { cancel() }, ctx, context.Canceled},
		{"missing letter", func(d *deadletter.Dir) { os.Remove(filepath.Join(d.Path(), l.ID+".json")) }, context.Background(), os.ErrNotExist},
	} {
		d := seedDir(t, ledgerLetter("http://127.0.0.1:1"))
		tc.setup(d)
		_, err := d.Redeliver(tc.ctx, http.DefaultClient, l.ID, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "grantretry:") || !strings.Contains(err.Error(), l.ID) || !errors.Is(err, tc.match) {
			t.Errorf("%s: %v; want an error that starts grantretry:, names %s and matches %v", tc.name, err, l.ID, tc.match)
		}
	}
}
