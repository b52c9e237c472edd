package deadletter_test

import (
	"context"
	"errors"
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

// A letter of version 2, written before letters kept the funder's time,
// still reads, with no NotBefore: it is due now.
func TestDeadLetterOfVersion2ReadsWithoutNotBefore(t *testing.T) {
	dir := t.TempDir()
	const id = "20260101T000000.000000000Z-0123456789abcdef"
	const v2 = `{"version":2,"id":"` + id + `","disposition":"dead_letter",
"stop_reason":"owed_later","reason":"owed:429","method":"PUT","url":"http://127.0.0.1:1/a",
"body_sha256":"","body_bytes":0,"correlation_id":"c1","attempts":1,
"last_status":429,"first_attempt":"2026-01-01T00:00:00Z","last_attempt":"2026-01-01T00:00:00Z","created":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 2 || !l.NotBefore.IsZero() || l.StopReason != "owed_later" {
		t.Fatalf("letter %+v, want version 2 with a zero NotBefore", l)
	}
	if _, err := deadletter.NewRedeliveryRequest(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// owedLetter is ledgerLetter owed by a quota until notBefore.
func owedLetter(url string, notBefore time.Time) *grantretry.Letter {
	l := ledgerLetter(url)
	l.StopReason, l.Reason, l.LastStatus = grantretry.StopOwedLater, "owed:429;quota", 429
	l.NotBefore = notBefore
	return l
}

// A letter not yet due is refused before anything is sent or asked: the
// error matches ErrNotYet and names the time. An ambiguous letter's
// reconciler is not asked either.
func TestRedeliverRefusesLetterNotYetDue(t *testing.T) {
	for name, client := range redeliveryClients(t) {
		t.Run(name, func(t *testing.T) {
			f := newLedgerFunder(t)
			until := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
			for _, ambiguous := range []bool{false, true} {
				l := owedLetter(f.URL, until)
				l.Ambiguous = ambiguous
				asked := 0
				rec := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
					asked++
					return nil, nil
				}
				resp, err := deadletter.Redeliver(context.Background(), client, l, rec)
				if resp != nil || !errors.Is(err, deadletter.ErrNotYet) {
					t.Fatalf("ambiguous %v: %v, %v; want no response and ErrNotYet", ambiguous, resp, err)
				}
				if want := until.Format(time.RFC3339); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), l.ID) {
					t.Errorf("error %q does not name the letter and %s", err, want)
				}
				if asked != 0 {
					t.Errorf("ambiguous %v: the reconciler was asked %d times", ambiguous, asked)
				}
			}
			if _, keys := f.counts(); len(keys) != 0 {
				t.Errorf("funder got %d requests, want none", len(keys))
			}
		})
	}
}

// A letter whose time has come is sent, and SendEarly sends one that is
// not yet due: the operator's explicit override.
func TestRedeliverSendsLetterWhenDueOrSentEarly(t *testing.T) {
	for name, tc := range map[string]struct {
		until time.Time
		ctx   context.Context
	}{
		"due":        {time.Now().Add(-time.Minute), context.Background()},
		"sent early": {time.Now().Add(time.Hour), deadletter.SendEarly(context.Background())},
	} {
		t.Run(name, func(t *testing.T) {
			f := newLedgerFunder(t)
			resp, err := deadletter.Redeliver(tc.ctx, redeliveryClients(t)["plain client"], owedLetter(f.URL, tc.until), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if effects, _ := f.counts(); resp.StatusCode != http.StatusCreated || effects != 1 {
				t.Errorf("status %d, %d effects; want 201 and 1", resp.StatusCode, effects)
			}
		})
	}
}

// Dir.Redeliver refuses a letter not yet due as Redeliver does, and
// leaves it as it was: no mark in flight, no attempt, no ambiguity.
func TestDirRedeliverRefusesLetterNotYetDue(t *testing.T) {
	f := newLedgerFunder(t)
	l := owedLetter(f.URL, time.Now().Add(time.Hour).UTC())
	d := seedDir(t, l)
	resp, err := d.Redeliver(context.Background(), redeliveryClients(t)["plain client"], l.ID, nil)
	if resp != nil || !errors.Is(err, deadletter.ErrNotYet) {
		t.Fatalf("%v, %v; want no response and ErrNotYet", resp, err)
	}
	if _, keys := f.counts(); len(keys) != 0 {
		t.Errorf("funder got %d requests, want none", len(keys))
	}
	got, err := d.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != l.Attempts || got.Ambiguous || !got.NotBefore.Equal(l.NotBefore) {
		t.Errorf("letter after the refusal: %+v; want it as it was", got)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), l.ID+".sending")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("letter marked in flight: %v", err)
	}
	resp, err = d.Redeliver(deadletter.SendEarly(context.Background()), redeliveryClients(t)["plain client"], l.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if effects, _ := f.counts(); effects != 1 {
		t.Errorf("sent early: %d effects, want 1", effects)
	}
}

// A redelivery that the funder owes for later again leaves the letter
// with the funder's new time, so that the next run waits for it.
func TestDirRedeliverOwedAgainKeepsTheNewTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "36000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	l := owedLetter(srv.URL, time.Now().Add(-time.Minute).UTC())
	d := seedDir(t, l)
	tr := grantretry.New(nil)
	defer tr.CloseIdleConnections()
	start := time.Now()
	resp, err := d.Redeliver(context.Background(), &http.Client{Transport: tr}, l.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("redelivery answered %d, want 429", resp.StatusCode)
	}
	got, err := d.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.NotBefore.Before(start.Add(9 * time.Hour)) {
		t.Errorf("NotBefore %v, want about 10 h from %v", got.NotBefore, start)
	}
}

// A redelivery that a host in quota holds sends nothing, but the funder's
// time it is held to is the letter's from then on: the next run waits for
// it rather than picking the letter again.
func TestDirRedeliverHeldByAQuotaKeepsTheHostsTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "36000")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tr := grantretry.New(nil)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	start := time.Now()
	resp, err := client.Post(srv.URL+"/v1/other", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o, ok := grantretry.OutcomeOf(resp); !ok || o.StopReason != grantretry.StopOwedLater || o.NotBefore.IsZero() {
		t.Fatalf("first call: %+v; want owed_later with a NotBefore", o)
	}
	l := owedLetter(srv.URL, time.Now().Add(-time.Minute).Truncate(time.Second).UTC())
	d := seedDir(t, l)
	resp, err = d.Redeliver(context.Background(), client, l.ID, nil)
	var ge *grantretry.Error
	if resp != nil || !errors.As(err, &ge) || ge.StopReason != grantretry.StopOwedLater || ge.Attempts != 0 {
		t.Fatalf("redelivery: %v, %v; want it held, nothing sent", resp, err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("funder got %d requests, want 1", n)
	}
	got, err := d.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NotBefore.Equal(ge.NotBefore) || got.NotBefore.Before(start.Add(9*time.Hour)) {
		t.Errorf("letter NotBefore %v, want the host's %v, about 10 h from %v", got.NotBefore, ge.NotBefore, start)
	}
	if got.Attempts != l.Attempts || got.Ambiguous || got.Late {
		t.Errorf("letter %+v; want its attempts, not ambiguous, not late", got)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), l.ID+".sending")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("letter marked in flight: %v", err)
	}
	resp, err = d.Redeliver(context.Background(), client, l.ID, nil)
	if resp != nil || !errors.Is(err, deadletter.ErrNotYet) {
		t.Errorf("next redelivery: %v, %v; want ErrNotYet", resp, err)
	}
}
