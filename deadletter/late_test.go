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

// lateLetters are the two ways a letter is late: its call (or a
// redelivery of it) was judged late, or its closing time has passed.
func lateLetters(url string) map[string]*grantretry.Letter {
	judged := ledgerLetter(url)
	judged.DueBy, judged.Late = time.Now().Add(time.Hour).Truncate(time.Second).UTC(), true
	passed := ledgerLetter(url)
	passed.DueBy = time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	return map[string]*grantretry.Letter{"judged late": judged, "closing time passed": passed}
}

// A late letter is refused before anything is sent or asked: the error
// matches ErrLate and names the letter, its submission and its due time.
func TestRedeliverRefusesLateLetter(t *testing.T) {
	for name, client := range redeliveryClients(t) {
		f := newLedgerFunder(t)
		for kind, l := range lateLetters(f.URL) {
			t.Run(name+"/"+kind, func(t *testing.T) {
				for _, ambiguous := range []bool{false, true} {
					l.Ambiguous = ambiguous
					asked := 0
					rec := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
						asked++
						return nil, nil
					}
					resp, err := deadletter.Redeliver(context.Background(), client, l, rec)
					if resp != nil || !errors.Is(err, deadletter.ErrLate) {
						t.Fatalf("ambiguous %v: %v, %v; want no response and ErrLate", ambiguous, resp, err)
					}
					for _, want := range []string{l.ID, l.SubmissionID, l.DueBy.Format(time.RFC3339)} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q does not name %s", err, want)
						}
					}
					if asked != 0 {
						t.Errorf("ambiguous %v: the reconciler was asked %d times", ambiguous, asked)
					}
				}
			})
		}
		if _, keys := f.counts(); len(keys) != 0 {
			t.Errorf("%s: funder got %d requests, want none", name, len(keys))
		}
	}
}

// SendLate is the explicit choice to send a late letter; a letter whose
// closing time is ahead is sent without it.
func TestRedeliverSendsLateLetterUnderSendLate(t *testing.T) {
	f := newLedgerFunder(t)
	client := redeliveryClients(t)["plain client"]
	inTime := ledgerLetter(f.URL)
	inTime.DueBy = time.Now().Add(time.Hour).UTC()
	sends := []struct {
		ctx context.Context
		l   *grantretry.Letter
	}{{context.Background(), inTime}}
	for _, l := range lateLetters(f.URL) {
		sends = append(sends, struct {
			ctx context.Context
			l   *grantretry.Letter
		}{deadletter.SendLate(context.Background()), l})
	}
	for i, s := range sends {
		resp, err := deadletter.Redeliver(s.ctx, client, s.l, nil)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if _, keys := f.counts(); len(keys) != len(sends) {
		t.Errorf("funder got %d requests, want %d", len(keys), len(sends))
	}
}

// Dir.Redeliver refuses a late letter as Redeliver does, and leaves it as
// it was; under SendLate it sends it.
func TestDirRedeliverRefusesLateLetter(t *testing.T) {
	f := newLedgerFunder(t)
	l := lateLetters(f.URL)["closing time passed"]
	d := seedDir(t, l)
	client := redeliveryClients(t)["plain client"]
	resp, err := d.Redeliver(context.Background(), client, l.ID, nil)
	if resp != nil || !errors.Is(err, deadletter.ErrLate) {
		t.Fatalf("%v, %v; want no response and ErrLate", resp, err)
	}
	if _, keys := f.counts(); len(keys) != 0 {
		t.Errorf("funder got %d requests, want none", len(keys))
	}
	got, err := d.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != l.Attempts || got.Ambiguous || !got.DueBy.Equal(l.DueBy) {
		t.Errorf("letter after the refusal: %+v; want it as it was", got)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), l.ID+".sending")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("letter marked in flight: %v", err)
	}
	resp, err = d.Redeliver(deadletter.SendLate(context.Background()), client, l.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if effects, _ := f.counts(); effects != 1 {
		t.Errorf("sent late: %d effects, want 1", effects)
	}
}

// clockAt is a Clock that reads a fixed time and never waits.
type clockAt struct{ now time.Time }

func (c clockAt) Now() time.Time                                   { return c.now }
func (c clockAt) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// A redelivery carries the letter's closing time to the Transport: one
// that ends owed again after it (on the Transport's Clock) makes the letter
// late, keeping its DueBy; one that ends owed again before it leaves the
// letter in time.
func TestDirRedeliverOwedAgainIsJudgedByTheLettersClosingTime(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	due := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	for _, tc := range []struct {
		name string
		at   time.Time // the redelivering Transport's Clock
		late bool
	}{
		{"ends_after_the_closing_time", due.Add(time.Minute), true},
		{"ends_before_the_closing_time", due.Add(-time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ledgerLetter(srv.URL)
			l.DueBy = due
			d := seedDir(t, l)
			tr := grantretry.New(nil, grantretry.WithClock(clockAt{tc.at}), grantretry.WithBudget(0, time.Hour))
			defer tr.CloseIdleConnections()
			resp, err := d.Redeliver(context.Background(), &http.Client{Transport: tr}, l.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if o, ok := grantretry.OutcomeOf(resp); !ok || o.Late != tc.late {
				t.Errorf("outcome %+v, want Late %v", o, tc.late)
			}
			got, err := d.Get(l.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Late != tc.late || !got.DueBy.Equal(due) {
				t.Errorf("letter Late %v DueBy %v; want %v and %v", got.Late, got.DueBy, tc.late, due)
			}
		})
	}
	if hits.Load() != 2 {
		t.Errorf("funder got %d requests, want 2", hits.Load())
	}
}

// A letter of version 3, written before letters kept a closing time,
// still reads, is not late, and is sent.
func TestDeadLetterOfVersion3ReadsWithoutDueBy(t *testing.T) {
	f := newLedgerFunder(t)
	dir := t.TempDir()
	const id = "20260101T000000.000000000Z-0123456789abcdef"
	v3 := `{"version":3,"id":"` + id + `","disposition":"dead_letter",
"stop_reason":"owed_later","reason":"owed:429","method":"PUT","url":"` + f.URL + `/a",
"body_sha256":"","body_bytes":0,"correlation_id":"c1","attempts":1,
"last_status":429,"first_attempt":"2026-01-01T00:00:00Z","last_attempt":"2026-01-01T00:00:00Z","created":"2026-01-01T00:00:00Z",
"not_before":"2026-01-01T01:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(v3), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 3 || !l.DueBy.IsZero() || l.Late || deadletter.Late(l, time.Now()) {
		t.Fatalf("letter %+v, want version 3, not late", l)
	}
	resp, err := d.Redeliver(context.Background(), redeliveryClients(t)["plain client"], id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, keys := f.counts(); len(keys) != 1 {
		t.Errorf("funder got %d requests, want 1", len(keys))
	}
}

// A redelivery refused by an open breaker after the letter's closing time
// (on the Transport's Clock) sends nothing, but is late: the letter says
// so from then on.
func TestDirRedeliverCircuitOpenAfterTheClosingTimeMakesTheLetterLate(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	due := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	tr := grantretry.New(nil, grantretry.WithClock(clockAt{due.Add(time.Minute)}),
		grantretry.WithBudget(0, time.Hour), grantretry.WithBreaker(1, time.Hour))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Post(srv.URL+"/v1/other", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	l := ledgerLetter(srv.URL)
	l.DueBy = due
	d := seedDir(t, l)
	resp, err = d.Redeliver(context.Background(), client, l.ID, nil)
	var ge *grantretry.Error
	if resp != nil || !errors.As(err, &ge) || ge.Disposition != grantretry.CircuitOpen || ge.Attempts != 0 || !ge.Late {
		t.Fatalf("redelivery: %v, %v; want circuit_open, late, nothing sent", resp, err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("funder got %d requests, want 1", n)
	}
	got, err := d.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Late || !got.DueBy.Equal(due) || got.Attempts != l.Attempts || got.Ambiguous {
		t.Errorf("letter %+v; want late, due by %v, its attempts, not ambiguous", got, due)
	}
	resp, err = d.Redeliver(context.Background(), client, l.ID, nil)
	if resp != nil || !errors.Is(err, deadletter.ErrLate) {
		t.Errorf("next redelivery: %v, %v; want ErrLate", resp, err)
	}
}
