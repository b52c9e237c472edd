package deadletter_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// rawFunder answers 503 while down, then 200, and keeps what it received,
// byte for byte as net/http's server reads it.
type rawFunder struct {
	*httptest.Server
	mu   sync.Mutex
	down bool
	got  []*http.Request
}

func newRawFunder(t *testing.T) *rawFunder {
	f := &rawFunder{down: true}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.got = append(f.got, r)
		if f.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *rawFunder) last(t *testing.T) *http.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		t.Fatal("the funder received nothing")
	}
	return f.got[len(f.got)-1]
}

// A call whose header values, key, correlation id, query and submission
// id are not valid UTF-8 (Latin-1 "Caf\xe9") is kept in a Dir and
// redelivered with the same bytes, not with U+FFFD in their place.
func TestDeadLetterKeepsHeaderBytesThatAreNotUTF8(t *testing.T) {
	f := newRawFunder(t)
	dir, err := deadletter.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inner := &http.Transport{}
	t.Cleanup(inner.CloseIdleConnections)
	tr := grantretry.New(inner, grantretry.WithDeadLetter(dir), grantretry.WithBudget(1, time.Minute),
		grantretry.WithBackoff(time.Millisecond, time.Millisecond))

	const (
		name  = "Caf\xe9 Nord"
		key   = "key-\xe9\xe9-1"
		corr  = "corr-\xff"
		sub   = "GRANT-\xe9"
		query = "applicant=Caf\xe9"
	)
	ctx := grantretry.WithSubmissionID(context.Background(), sub)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/v1/applications?"+query, strings.NewReader(`{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["X-Applicant"] = []string{"plain", name}
	req.Header.Set(grantretry.HeaderIdempotencyKey, key)
	req.Header.Set(grantretry.HeaderCorrelationID, corr)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	o, _ := grantretry.OutcomeOf(resp)
	if o.DeadLetterID == "" {
		t.Fatalf("outcome %+v: no letter kept", o)
	}
	sent := f.last(t)
	if got := sent.Header["X-Applicant"]; len(got) != 2 || got[1] != name || sent.URL.RawQuery != query {
		t.Fatalf("the funder received %q and query %q: the test's premise fails", got, sent.URL.RawQuery)
	}

	data, err := os.ReadFile(filepath.Join(dir.Path(), o.DeadLetterID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"version": %d`, grantretry.LetterVersion); !strings.Contains(string(data), want) {
		t.Errorf("the letter is not of version %d:\n%s", grantretry.LetterVersion, data)
	}
	l, err := dir.Get(o.DeadLetterID)
	if err != nil {
		t.Fatal(err)
	}
	if l.SubmissionID != sub {
		t.Errorf("submission id %q, want %q", l.SubmissionID, sub)
	}
	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
	resp, err = deadletter.Redeliver(context.Background(), &http.Client{}, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	again := f.last(t)
	for _, c := range []struct{ what, got, want string }{
		{"X-Applicant", strings.Join(again.Header["X-Applicant"], "|"), "plain|" + name},
		{"Idempotency-Key", again.Header.Get(grantretry.HeaderIdempotencyKey), key},
		{"X-Correlation-ID", again.Header.Get(grantretry.HeaderCorrelationID), corr},
		{"query", again.URL.RawQuery, query},
	} {
		if c.got != c.want {
			t.Errorf("redelivered %s %q, want %q", c.what, c.got, c.want)
		}
	}
}

// A letter of version 1, as written before raw bytes were kept, still
// reads and redelivers.
func TestDeadLetterOfVersion1StillReads(t *testing.T) {
	dir := t.TempDir()
	const v1 = `{"version":1,"id":"20260101T000000.000000000Z-0123456789abcdef","disposition":"dead_letter",
"stop_reason":"max_retries","reason":"http:503","method":"PUT","url":"http://127.0.0.1:1/a",
"header":{"X-Name":["Caf\ufffd Nord"]},"body_sha256":"","body_bytes":0,"correlation_id":"c1","attempts":2,
"last_status":503,"first_attempt":"2026-01-01T00:00:00Z","last_attempt":"2026-01-01T00:00:00Z","created":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, "20260101T000000.000000000Z-0123456789abcdef.json"), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Get("20260101T000000.000000000Z-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 1 || l.Header.Get("X-Name") != "Caf\ufffd Nord" || l.Method != http.MethodPut {
		t.Fatalf("letter %+v", l)
	}
	if _, err := deadletter.NewRedeliveryRequest(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}
