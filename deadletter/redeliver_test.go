package deadletter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// ledgerFunder is a loopback funder that honours Idempotency-Key: it
// applies a submission once per key and answers a repeated key with the
// first answer, marked Idempotent-Replayed. It wants the redelivering
// client's own credentials, which no letter carries.
type ledgerFunder struct {
	*httptest.Server
	mu       sync.Mutex
	effects  int
	answers  map[string]string // key -> first answer's body
	keys     []string          // Idempotency-Key of every request, "" if none
	last     *http.Request
	lastBody []byte
}

const ledgerToken = "Bearer redeliverer-token"

func newLedgerFunder(t *testing.T) *ledgerFunder {
	f := &ledgerFunder{answers: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *ledgerFunder) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get(grantretry.HeaderIdempotencyKey)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
	f.last, f.lastBody = r, body
	if r.Header.Get("Authorization") != ledgerToken {
		http.Error(w, "who are you?", http.StatusUnauthorized)
		return
	}
	if answer, ok := f.answers[key]; ok && key != "" {
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, answer)
		return
	}
	f.effects++
	answer := fmt.Sprintf(`{"receipt":"R-%d"}`, f.effects)
	f.answers[key] = answer
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, answer)
}

func (f *ledgerFunder) counts() (effects int, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.effects, append([]string(nil), f.keys...)
}

// credentials adds the redelivering client's Authorization on a clone of
// each request, as a pipeline's own client would.
type credentials struct{ next http.RoundTripper }

func (c credentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", ledgerToken)
	return c.next.RoundTrip(r)
}

// redeliveryClients are the two ways to redeliver: a plain client, and one
// whose Transport is grantretry's.
func redeliveryClients(t *testing.T) map[string]*http.Client {
	plain := &http.Transport{}
	retrying := grantretry.New(nil)
	t.Cleanup(plain.CloseIdleConnections)
	t.Cleanup(retrying.CloseIdleConnections)
	return map[string]*http.Client{
		"plain client":         {Transport: credentials{plain}},
		"grantretry transport": {Transport: credentials{retrying}},
	}
}

// ledgerLetter is the letter the Transport would write for a POST of an
// application to url that was dead-lettered.
func ledgerLetter(url string) *grantretry.Letter {
	body := []byte(`{"applicant":"Riverside Food Bank","amount":25000}`)
	sum := sha256.Sum256(body)
	created := time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             "20260115T093000Z-5f2a",
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopRetriesSpent,
		Method:         http.MethodPost,
		URL:            url + "/v1/applications?cycle=2026",
		Header:         http.Header{"Content-Type": {"application/json"}},
		Redacted:       []string{"Authorization"},
		Body:           body,
		BodySHA256:     hex.EncodeToString(sum[:]),
		BodyBytes:      int64(len(body)),
		IdempotencyKey: grantretry.IdempotencyKey("GRANT-2026-0042", body),
		CorrelationID:  "5f2a9c0d11e4b7a3",
		SubmissionID:   "GRANT-2026-0042",
		Attempts:       5,
		LastStatus:     503,
		Created:        created,
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// applyDirectly sends the letter's call as the pipeline first did, with
// its key: the funder applied it, and the answer never came back.
func applyDirectly(t *testing.T, l *grantretry.Letter) string {
	t.Helper()
	req, err := http.NewRequest(l.Method, l.URL, bytes.NewReader(l.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(grantretry.HeaderIdempotencyKey, l.IdempotencyKey)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: credentials{tr}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return readBody(t, resp)
}

func TestRedeliverOfAnAppliedLetterHasNoDuplicateEffect(t *testing.T) {
	for name, client := range redeliveryClients(t) {
		t.Run(name, func(t *testing.T) {
			f := newLedgerFunder(t)
			l := ledgerLetter(f.URL)
			first := applyDirectly(t, l)
			resp, err := deadletter.Redeliver(context.Background(), client, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			replayed := resp.Header.Get("Idempotent-Replayed")
			if got := readBody(t, resp); got != first || resp.StatusCode != http.StatusCreated || replayed != "true" {
				t.Errorf("redelivery answered %d %q (replayed %q), want the first answer %q replayed", resp.StatusCode, got, replayed, first)
			}
			effects, keys := f.counts()
			if effects != 1 {
				t.Errorf("funder applied the submission %d times, want once", effects)
			}
			if want := []string{l.IdempotencyKey, l.IdempotencyKey}; !reflect.DeepEqual(keys, want) {
				t.Errorf("funder saw keys %q, want the letter's key twice", keys)
			}
		})
	}
}

func TestRedeliverAppliesANeverAppliedLetterOnce(t *testing.T) {
	for name, client := range redeliveryClients(t) {
		t.Run(name, func(t *testing.T) {
			f := newLedgerFunder(t)
			resp, err := deadletter.Redeliver(context.Background(), client, ledgerLetter(f.URL), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := readBody(t, resp); resp.StatusCode != http.StatusCreated || got != `{"receipt":"R-1"}` {
				t.Errorf("redelivery answered %d %q, want 201 and the first receipt", resp.StatusCode, got)
			}
			if effects, keys := f.counts(); effects != 1 || len(keys) != 1 {
				t.Errorf("funder applied %d times in %d requests, want once in one", effects, len(keys))
			}
		})
	}
}

func TestRedeliverSendsTheLetterAsWritten(t *testing.T) {
	f := newLedgerFunder(t)
	l := ledgerLetter(f.URL)
	l.Header["idempotency-key"] = []string{"stale"} // a stray spelling must not be sent
	before := *l
	before.Header = l.Header.Clone()
	resp, err := deadletter.Redeliver(context.Background(), redeliveryClients(t)["grantretry transport"], l, nil)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	r := f.last
	if r.Method != l.Method || r.URL.String() != "/v1/applications?cycle=2026" || string(f.lastBody) != string(l.Body) {
		t.Errorf("funder got %s %s with %q", r.Method, r.URL, f.lastBody)
	}
	for name, want := range map[string][]string{
		"Content-Type":                  {"application/json"},
		grantretry.HeaderIdempotencyKey: {l.IdempotencyKey},
		grantretry.HeaderCorrelationID:  {l.CorrelationID},
	} {
		if got := r.Header.Values(name); !reflect.DeepEqual(got, want) {
			t.Errorf("header %s: %q, want %q", name, got, want)
		}
	}
	if out, ok := grantretry.OutcomeOf(resp); !ok || out.SubmissionID != l.SubmissionID || out.IdempotencyKey != l.IdempotencyKey {
		t.Errorf("outcome %+v: want submission %s and the letter's key", out, l.SubmissionID)
	}
	if !reflect.DeepEqual(*l, before) {
		t.Error("Redeliver modified the letter")
	}
}

func TestNewRedeliveryRequestIsReplayable(t *testing.T) {
	l := ledgerLetter("https://funder.example")
	req, err := deadletter.NewRedeliveryRequest(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody == nil || req.ContentLength != l.BodyBytes {
		t.Fatalf("GetBody set %v, ContentLength %d; want GetBody and %d", req.GetBody != nil, req.ContentLength, l.BodyBytes)
	}
	for range 2 {
		rc, _ := req.GetBody()
		if b, _ := io.ReadAll(rc); !bytes.Equal(b, l.Body) {
			t.Errorf("GetBody gave %q, want the letter's body", b)
		}
	}
}

func TestRedeliverSendsAnIdempotentMethodWithoutKey(t *testing.T) {
	f := newLedgerFunder(t)
	l := ledgerLetter(f.URL)
	l.Method, l.IdempotencyKey = http.MethodPut, ""
	resp, err := deadletter.Redeliver(context.Background(), redeliveryClients(t)["plain client"], l, nil)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if _, keys := f.counts(); !reflect.DeepEqual(keys, []string{""}) {
		t.Errorf("funder saw keys %q, want one request without a key", keys)
	}
}

func TestRedeliverRefusesUnsafeLetters(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(l *grantretry.Letter) *grantretry.Letter
	}{
		{"nil letter", func(*grantretry.Letter) *grantretry.Letter { return nil }},
		{"body omitted", func(l *grantretry.Letter) *grantretry.Letter {
			l.Body, l.BodyOmitted = nil, "body_not_replayable"
			return l
		}},
		{"body corrupt", func(l *grantretry.Letter) *grantretry.Letter { l.Body[3] = 'X'; return l }},
		{"body length wrong", func(l *grantretry.Letter) *grantretry.Letter { l.BodyBytes = 1; return l }},
		{"POST without key", func(l *grantretry.Letter) *grantretry.Letter { l.IdempotencyKey = ""; return l }},
		{"PATCH without key", func(l *grantretry.Letter) *grantretry.Letter {
			l.Method, l.IdempotencyKey = http.MethodPatch, ""
			return l
		}},
		{"unknown method without key", func(l *grantretry.Letter) *grantretry.Letter {
			l.Method, l.IdempotencyKey = "APPROVE", ""
			return l
		}},
		{"invalid method", func(l *grantretry.Letter) *grantretry.Letter { l.Method = "PO ST"; return l }},
		{"unparsable URL", func(l *grantretry.Letter) *grantretry.Letter { l.URL = "http://[::1"; return l }},
		{"relative URL", func(l *grantretry.Letter) *grantretry.Letter { l.URL = "/v1/applications"; return l }},
		{"other scheme", func(l *grantretry.Letter) *grantretry.Letter { l.URL = "ftp://funder.example/x"; return l }},
		{"no version", func(l *grantretry.Letter) *grantretry.Letter { l.Version = 0; return l }},
		{"future version", func(l *grantretry.Letter) *grantretry.Letter { l.Version++; return l }},
		{"unsafe id", func(l *grantretry.Letter) *grantretry.Letter { l.ID = "../x"; return l }},
		{"header splits", func(l *grantretry.Letter) *grantretry.Letter {
			l.Header["X-Note"] = []string{"a\r\nAuthorization: x"}
			return l
		}},
		{"bad header name", func(l *grantretry.Letter) *grantretry.Letter { l.Header["X Note"] = []string{"a"}; return l }},
		{"key splits", func(l *grantretry.Letter) *grantretry.Letter { l.IdempotencyKey += "\n"; return l }},
		{"bad submission id", func(l *grantretry.Letter) *grantretry.Letter { l.SubmissionID = "G\x00"; return l }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLedgerFunder(t)
			resp, err := deadletter.Redeliver(context.Background(), redeliveryClients(t)["plain client"], tc.edit(ledgerLetter(f.URL)), nil)
			if resp != nil {
				resp.Body.Close()
			}
			if !errors.Is(err, deadletter.ErrBadLetter) {
				t.Errorf("Redeliver: %v, want ErrBadLetter", err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "grantretry: letter") {
				t.Errorf("message %q does not start with \"grantretry: letter\"", err)
			}
			if _, keys := f.counts(); len(keys) != 0 {
				t.Errorf("funder got %d requests, want none", len(keys))
			}
		})
	}
}

func TestRedeliverRefusesNilClientAndContext(t *testing.T) {
	f := newLedgerFunder(t)
	l := ledgerLetter(f.URL)
	if _, err := deadletter.Redeliver(context.Background(), nil, l, nil); !errors.Is(err, grantretry.ErrInvalidRequest) {
		t.Errorf("nil client: %v, want ErrInvalidRequest", err)
	}
	var nilCtx context.Context
	if _, err := deadletter.Redeliver(nilCtx, redeliveryClients(t)["plain client"], l, nil); !errors.Is(err, grantretry.ErrInvalidRequest) {
		t.Errorf("nil context: %v, want ErrInvalidRequest", err)
	}
	if _, keys := f.counts(); len(keys) != 0 {
		t.Errorf("funder got %d requests, want none", len(keys))
	}
}

func ExampleRedeliver() {
	// A funder that applies each Idempotency-Key once and answers a
	// repeat with its first answer.
	var mu sync.Mutex
	receipts := map[string]string{}
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		key := r.Header.Get(grantretry.HeaderIdempotencyKey)
		if _, ok := receipts[key]; !ok {
			receipts[key] = fmt.Sprintf("R-%d", len(receipts)+1)
		}
		fmt.Fprint(w, receipts[key])
	}))
	defer funder.Close()

	dir, err := os.MkdirTemp("", "letters")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	letters, err := deadletter.Open(dir)
	if err != nil {
		panic(err)
	}
	// The Transport wrote this letter when the call was dead-lettered
	// (WithDeadLetter); here it is written by hand.
	letter := ledgerLetter(funder.URL)
	if err := letters.PutDeadLetter(context.Background(), letter); err != nil {
		panic(err)
	}

	// Later, an operator redelivers every letter, twice by mistake.
	pending, err := letters.List()
	if err != nil {
		panic(err)
	}
	for range 2 {
		for _, l := range pending {
			resp, err := deadletter.Redeliver(context.Background(), http.DefaultClient, l, nil)
			if err != nil {
				panic(err)
			}
			receipt, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Println(l.ID, resp.StatusCode, string(receipt))
		}
	}
	if err := letters.MarkRedelivered(letter.ID, deadletter.Redelivery{Status: http.StatusOK}); err != nil {
		panic(err)
	}
	pending, _ = letters.List()
	fmt.Println(len(pending), "letters left")
	// Output:
	// 20260115T093000Z-5f2a 200 R-1
	// 20260115T093000Z-5f2a 200 R-1
	// 0 letters left
}

// The whole path: a submission the funder applied but whose answers were
// lost (503s after the effect) is dead-lettered by the Transport into a
// deadletter.Dir, without the pipeline's token; once the funder is back, the
// letter read from the directory is redelivered with a fresh token and the
// same key, and the funder answers with the original receipt: one effect.
func TestDeadLetterDirThenRedeliverEndToEnd(t *testing.T) {
	f := newLedgerFunder(t)
	var down sync.Mutex
	losing := true
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Lock()
		lose := losing
		down.Unlock()
		if lose {
			f.serve(httptest.NewRecorder(), r) // applied, and the answer lost
			http.Error(w, "upstream timeout", http.StatusServiceUnavailable)
			return
		}
		f.serve(w, r)
	}))
	t.Cleanup(lossy.Close)
	dir, err := deadletter.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inner := &http.Transport{}
	t.Cleanup(inner.CloseIdleConnections)
	client := &http.Client{Transport: grantretry.New(inner,
		grantretry.WithDeadLetter(dir), grantretry.WithBudget(2, time.Minute),
		grantretry.WithBackoff(time.Millisecond, time.Millisecond))}

	body := `{"applicant":"Riverside Food Bank","amount":25000}`
	ctx := grantretry.WithSubmissionID(context.Background(), "GRANT-2026-0042")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lossy.URL+"/v1/applications", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", ledgerToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	o, _ := grantretry.OutcomeOf(resp)
	if o.Disposition != grantretry.DeadLetter || o.DeadLetterID == "" || o.RecordErr != nil {
		t.Fatalf("outcome %+v, want dead_letter with a kept letter", o)
	}

	l, err := dir.Get(o.DeadLetterID)
	if err != nil {
		t.Fatal(err)
	}
	if l.Header.Get("Authorization") != "" || strings.Join(l.Redacted, ",") != "Authorization" {
		t.Fatalf("letter header %v, redacted %v: the token must be left out and named", l.Header, l.Redacted)
	}
	down.Lock()
	losing = false
	down.Unlock()
	for name, rc := range redeliveryClients(t) {
		resp, err := deadletter.Redeliver(context.Background(), rc, l, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := readBody(t, resp); got != `{"receipt":"R-1"}` || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s: answer %q, want the original receipt, replayed", name, got)
		}
	}
	effects, keys := f.counts()
	if effects != 1 {
		t.Errorf("funder applied the submission %d times, want 1", effects)
	}
	for _, k := range keys {
		if k != o.IdempotencyKey {
			t.Errorf("funder saw keys %q, want %q on every request", keys, o.IdempotencyKey)
			break
		}
	}
}

// A letter of a request sent with its own Host is redelivered with it.
func TestNewRedeliveryRequestKeepsTheHost(t *testing.T) {
	l := ledgerLetter("https://10.0.0.7")
	l.Host = "portal.funder.test"
	req, err := deadletter.NewRedeliveryRequest(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if req.Host != "portal.funder.test" || req.URL.Host != "10.0.0.7" {
		t.Errorf("request Host %q to %q, want portal.funder.test to 10.0.0.7", req.Host, req.URL.Host)
	}
	l.Host = "evil.test\r\nX-Injected: 1"
	if _, err := deadletter.NewRedeliveryRequest(context.Background(), l); !errors.Is(err, deadletter.ErrBadLetter) {
		t.Errorf("a Host with CR LF: error %v, want ErrBadLetter", err)
	}
}

// What NewRedeliveryRequest refuses in a submission id, a key or a header
// value is what a Transport refuses (ErrInvalidRequest) in the same place:
// the two keep their own copies of the rule (rules.go), and this holds
// them together.
func TestRedeliveryRulesAgreeWithTheTransport(t *testing.T) {
	long := strings.Repeat("g", grantretry.MaxSubmissionIDLen)
	values := []string{"GRANT-2026-0042", "tab\there", long, long + "g", "cr\rhere", "lf\nhere", "nul\x00", "del\x7f", "bell\x07"}
	ok := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: r}, nil
	})
	tr := grantretry.New(ok)
	for _, field := range []string{"submission id", "idempotency key", "correlation id", "header"} {
		for _, v := range values {
			l := ledgerLetter("https://funder.test")
			ctx := context.Background()
			req, _ := http.NewRequest(http.MethodPost, l.URL, bytes.NewReader(l.Body))
			switch field {
			case "submission id":
				l.SubmissionID = v
				req = req.WithContext(grantretry.WithSubmissionID(ctx, v))
			case "idempotency key":
				l.IdempotencyKey = v
				req.Header.Set(grantretry.HeaderIdempotencyKey, v)
			case "correlation id":
				l.CorrelationID = v
				req.Header.Set(grantretry.HeaderCorrelationID, v)
			case "header":
				l.Header.Set("X-Note", v)
				req.Header.Set("X-Note", v)
			}
			_, letterErr := deadletter.NewRedeliveryRequest(ctx, l)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			if refused := errors.Is(err, grantretry.ErrInvalidRequest); refused != (letterErr != nil) {
				t.Errorf("%s %.20q: the Transport refuses it: %v (%v); NewRedeliveryRequest: %v", field, v, refused, err, letterErr)
			}
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A letter whose last attempt was ambiguous is asked about before it is
// sent again, by the Transport's own rule: the funder has it (nothing is
// sent), has it not (sent once), or cannot tell (nothing is sent, and the
// error says so). A letter that was not ambiguous is never asked about.
func TestRedeliverAsksBeforeSendingAnAmbiguousLetter(t *testing.T) {
	cannot := errors.New("GetApplicationList: 503")
	for _, tc := range []struct {
		name       string
		ambiguous  bool
		has        bool
		err        error
		wantAsked  bool
		wantSent   int
		wantErr    error
		reconciled bool
	}{
		{"ambiguous, the funder has it", true, true, nil, true, 0, nil, true},
		{"ambiguous, the funder has it not", true, false, nil, true, 1, nil, false},
		{"ambiguous, cannot tell", true, false, cannot, true, 0, deadletter.ErrNotReconciled, false},
		{"not ambiguous", false, true, nil, false, 1, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLedgerFunder(t)
			l := ledgerLetter(f.URL)
			l.Ambiguous = tc.ambiguous
			var asked []grantretry.ReconcileQuery
			reconcile := func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
				asked = append(asked, q)
				if tc.err != nil {
					return nil, tc.err
				}
				if tc.has {
					return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("GRANT00012345"))}, nil
				}
				return nil, nil
			}
			resp, err := deadletter.Redeliver(context.Background(), redeliveryClients(t)["plain client"], l, reconcile)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Redeliver: %v, want %v", err, tc.wantErr)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if (len(asked) > 0) != tc.wantAsked {
				t.Errorf("asked %d times, want asked %v", len(asked), tc.wantAsked)
			}
			if len(asked) > 0 {
				q := asked[0]
				if q.SubmissionID != l.SubmissionID || q.IdempotencyKey != l.IdempotencyKey || q.Attempt != l.Attempts || q.Status != 503 {
					t.Errorf("query %+v does not describe the letter's last attempt", q)
				}
				if b, _ := io.ReadAll(q.Request.Body); !bytes.Equal(b, l.Body) {
					t.Errorf("query's request body %q", b)
				}
			}
			if effects, _ := f.counts(); effects != tc.wantSent {
				t.Errorf("the funder applied %d, want %d", effects, tc.wantSent)
			}
			if deadletter.Reconciled(resp) != tc.reconciled {
				t.Errorf("Reconciled(resp) = %v, want %v", deadletter.Reconciled(resp), tc.reconciled)
			}
		})
	}
}
