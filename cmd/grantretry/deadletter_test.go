package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
)

// dlFunder is a loopback funder that honours Idempotency-Key (one effect
// per key, the first answer replayed for a repeat), wants the operator's
// credentials, and refuses anything sent to /reject with 422.
type dlFunder struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	effects  map[string]int // key -> times applied
	answers  map[string]string
	headers  []http.Header
}

const (
	dlToken  = "Bearer op-token-7731"
	dlAPIKey = "k-secret-5150"
	dlKeyEnv = "GRANTRETRY_TEST_DL_API_KEY"
)

func newDLFunder(t *testing.T) *dlFunder {
	f := &dlFunder{effects: map[string]int{}, answers: map[string]string{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *dlFunder) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get(grantretry.HeaderIdempotencyKey)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	f.headers = append(f.headers, r.Header.Clone())
	switch {
	case r.Header.Get("Authorization") != dlToken || r.Header.Get("X-Api-Key") != dlAPIKey:
		http.Error(w, "who are you?", http.StatusUnauthorized)
	case r.URL.Path == "/reject":
		http.Error(w, "budget narrative missing", http.StatusUnprocessableEntity)
	case f.answers[key] != "":
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, f.answers[key])
	default:
		f.effects[key]++
		f.answers[key] = fmt.Sprintf(`{"receipt":"R-%d"}`, len(f.answers)+1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, f.answers[key])
	}
}

func (f *dlFunder) stats() (requests int, effects map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	effects = map[string]int{}
	for k, v := range f.effects {
		effects[k] = v
	}
	return f.requests, effects
}

// apply sends l's call with its key and the credentials, as the pipeline
// did before the answer was lost.
func (f *dlFunder) apply(t *testing.T, l *grantretry.Letter) {
	t.Helper()
	req, _ := http.NewRequest(l.Method, l.URL, bytes.NewReader(l.Body))
	req.Header.Set(grantretry.HeaderIdempotencyKey, l.IdempotencyKey)
	req.Header.Set("Authorization", dlToken)
	req.Header.Set("X-Api-Key", dlAPIKey)
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func dlLetter(id, url string, body []byte) *grantretry.Letter {
	sum := sha256.Sum256(body)
	created := time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             id,
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopRetriesSpent,
		Reason:         "transient:503",
		Method:         http.MethodPost,
		URL:            url,
		Header:         http.Header{"Content-Type": {"application/json"}},
		Redacted:       []string{"Authorization", "X-Api-Key"},
		Body:           body,
		BodySHA256:     hex.EncodeToString(sum[:]),
		BodyBytes:      int64(len(body)),
		IdempotencyKey: grantretry.IdempotencyKey("GRANT-"+id, body),
		CorrelationID:  "corr-" + id,
		SubmissionID:   "GRANT-" + id,
		Attempts:       5,
		LastStatus:     503,
		FirstAttempt:   created.Add(-40 * time.Second),
		LastAttempt:    created.Add(-time.Second),
		Created:        created,
	}
}

// dlSeed writes letters into a new directory and returns its path.
func dlSeed(t *testing.T, letters ...*grantretry.Letter) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "letters")
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range letters {
		if err := d.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// dlRun runs "grantretry deadletter" with args. A redelivery that gives
// no -trail (and is no dry run) gets one beside its letter directory,
// trail.jsonl, as the command requires.
func dlRun(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = runDeadLetter(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func dlPending(t *testing.T, dir string) []string {
	t.Helper()
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	return ids
}

func wantAll(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, text)
		}
	}
}

func wantNone(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(text, s) {
			t.Errorf("%s shows %q:\n%s", what, s, text)
		}
	}
}

var dlBody = []byte(`{"applicant":"Riverside Food Bank","amount":25000}`)

func TestDeadLetterListPrintsATableAndTheCount(t *testing.T) {
	a := dlLetter("L-a", "https://funder.example/v1/applications", dlBody)
	b := dlLetter("L-b", "https://funder.example/v1/reports", nil)
	b.Disposition, b.StopReason, b.LastStatus, b.LastError = grantretry.CircuitOpen, grantretry.StopCircuitOpen, 0, "connection refused"
	dir := dlSeed(t, a, b)
	stdout, _, err := dlRun("list", dir)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "list", stdout, "ID ", "AMBIGUOUS", "LAST ANSWER", "L-a", "L-b", "2026-01-15T09:30:00Z",
		"connection refused", "https://funder.example/v1/reports", "2 letters waiting in "+dir)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 4 {
		t.Errorf("list printed %d lines, want a header, two letters and the count:\n%s", len(lines), stdout)
	}
}

func TestDeadLetterListOfAnEmptyDirectory(t *testing.T) {
	dir := dlSeed(t)
	stdout, _, err := dlRun("list", dir)
	if err != nil || strings.TrimSpace(stdout) != "0 letters waiting in "+dir {
		t.Errorf("list = %q, %v; want the count alone", stdout, err)
	}
}

func TestDeadLetterListJSONLeavesBodiesOut(t *testing.T) {
	dir := dlSeed(t, dlLetter("L-a", "https://funder.example/x", dlBody))
	stdout, _, err := dlRun("list", "--json", dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []grantretry.Letter
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("list -json is not a JSON array of letters: %v\n%s", err, stdout)
	}
	if len(got) != 1 || got[0].ID != "L-a" || got[0].Body != nil || got[0].BodyBytes != int64(len(dlBody)) {
		t.Errorf("list -json = %+v; want L-a, its size and no body", got)
	}
}

func TestDeadLetterListReportsACorruptFile(t *testing.T) {
	dir := dlSeed(t, dlLetter("L-a", "https://funder.example/x", dlBody))
	if err := os.WriteFile(filepath.Join(dir, "L-b.json"), []byte(`{"version":1,`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := dlRun("list", dir)
	if !errors.Is(err, deadletter.ErrBadLetter) {
		t.Fatalf("list: %v, want ErrBadLetter", err)
	}
	wantAll(t, "error", err.Error(), "L-b.json")
	wantNone(t, "error", err.Error(), "grantretry:")
	wantAll(t, "list", stdout, "L-a", "1 letter waiting in")
}

func TestDeadLetterShowPrintsEveryField(t *testing.T) {
	l := dlLetter("L-a", "https://funder.example/v1/applications?cycle=2026", dlBody)
	stdout, _, err := dlRun("show", dlSeed(t, l), l.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", stdout, "L-a", "waiting", "dead_letter", "retries_exhausted", "transient:503",
		"2026-01-15T09:29:20Z", "2026-01-15T09:29:59Z", "503", "POST", l.URL, l.SubmissionID,
		l.IdempotencyKey, l.CorrelationID, "Content-Type: application/json", "Authorization, X-Api-Key",
		fmt.Sprintf("%d bytes, sha256 %s", len(dlBody), l.BodySHA256), string(dlBody))
}

func TestDeadLetterShowKeepsBinaryBodyOffTheTerminal(t *testing.T) {
	body := []byte("PDF\x1b[31m\x00\x01binary")
	l := dlLetter("L-a", "https://funder.example/x", body)
	dir := dlSeed(t, l)
	stdout, _, err := dlRun("show", dir, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", stdout, "-body writes it out", l.BodySHA256)
	wantNone(t, "show", stdout, "\x1b[31m")
	raw, _, err := dlRun("show", dir, l.ID, "-body")
	if err != nil || raw != string(body) {
		t.Errorf("show -body = %q, %v; want the raw body", raw, err)
	}
}

func TestDeadLetterShowFindsARedeliveredLetter(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-a", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	t.Setenv(dlKeyEnv, dlAPIKey)
	if _, _, err := dlRun("redeliver", dir, l.ID, "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := dlRun("show", dir, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", stdout, "redelivered 20", "answered 201 Created (succeeded after 1 attempt)")
}

func TestDeadLetterRedeliverAppliesEachLetterOnceAndMovesIt(t *testing.T) {
	f := newDLFunder(t)
	applied := dlLetter("L-applied", f.URL+"/v1/applications", dlBody)
	fresh := dlLetter("L-fresh", f.URL+"/v1/applications", []byte(`{"applicant":"Hillside Clinic"}`))
	dir := dlSeed(t, applied, fresh)
	f.apply(t, applied) // the funder applied it; the answer was lost
	t.Setenv(dlKeyEnv, dlAPIKey)
	stdout, stderr, err := dlRun("redeliver", dir, "-all", "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, stderr)
	}
	wantAll(t, "redeliver", stdout, "redelivered letter L-applied (submission GRANT-L-applied): answered 201 Created (succeeded after 1 attempt)\n", "redelivered letter L-fresh (submission GRANT-L-fresh): answered 201 Created")
	if requests, effects := f.stats(); requests != 3 || effects[applied.IdempotencyKey] != 1 || effects[fresh.IdempotencyKey] != 1 {
		t.Errorf("funder got %d requests with effects %v; want 3 requests and one effect per letter", requests, effects)
	}
	if ids := dlPending(t, dir); len(ids) != 0 {
		t.Errorf("letters still waiting: %q", ids)
	}
	for _, name := range []string{"L-applied.json", "L-applied.result.json", "L-fresh.json", "L-fresh.result.json"} {
		if _, err := os.Stat(filepath.Join(dir, deadletter.RedeliveredDir, name)); err != nil {
			t.Error(err)
		}
	}
}

func TestDeadLetterRedeliverDryRunSendsNothingAndHidesCredentials(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-a", f.URL+"/v1/applications?cycle=2026", dlBody)
	l.Redacted = append(l.Redacted, "X-Portal-Session")
	dir := dlSeed(t, l)
	t.Setenv(dlKeyEnv, dlAPIKey)
	stdout, _, err := dlRun("redeliver", "-dry-run", dir, l.ID, "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "dry run", stdout, "nothing sent", "POST "+l.URL, "Content-Type: application/json",
		"Idempotency-Key: "+l.IdempotencyKey, "X-Correlation-Id: "+l.CorrelationID,
		"Authorization: [not shown: from -header]", "X-Api-Key: [not shown: from $"+dlKeyEnv+"]",
		fmt.Sprintf("body: %d bytes, sha256 %s", len(dlBody), l.BodySHA256), "X-Portal-Session was left out")
	wantNone(t, "dry run", stdout, "op-token", dlAPIKey)
	if requests, _ := f.stats(); requests != 0 {
		t.Errorf("dry run sent %d requests", requests)
	}
	if ids := dlPending(t, dir); len(ids) != 1 {
		t.Errorf("dry run moved the letter: waiting %q", ids)
	}
}

func TestDeadLetterRedeliverLeavesRefusedLettersInPlace(t *testing.T) {
	f := newDLFunder(t)
	rejected := dlLetter("L-rejected", f.URL+"/reject", dlBody)
	ok := dlLetter("L-ok", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, rejected, ok)
	t.Setenv(dlKeyEnv, dlAPIKey)
	_, stderr, err := dlRun("redeliver", dir, "L-rejected", "L-ok", "L-ok", "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv)
	if err == nil {
		t.Fatal("redeliver succeeded; the funder refused a letter")
	}
	wantAll(t, "error", err.Error(), "1 of 2 letters not redelivered")
	wantAll(t, "stderr", stderr, "grantretry: deadletter: letter L-rejected (submission GRANT-L-rejected) not redelivered: answered 422 Unprocessable Entity (failed_terminal after 1 attempt)")
	if ids := dlPending(t, dir); len(ids) != 1 || ids[0] != "L-rejected" {
		t.Errorf("waiting %q, want L-rejected alone", ids)
	}
}

func TestDeadLetterRedeliverWithoutCredentialsIsRefusedByTheFunder(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-a", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	_, stderr, err := dlRun("redeliver", dir, l.ID)
	if err == nil {
		t.Fatal("redeliver without credentials succeeded")
	}
	wantAll(t, "stderr", stderr, "answered 401")
	if sent := f.headers[0]; sent.Get("Authorization") != "" {
		t.Errorf("the letter carried credentials of its own: %q", sent.Get("Authorization"))
	}
	if ids := dlPending(t, dir); len(ids) != 1 {
		t.Errorf("waiting %q, want the letter", ids)
	}
}

func TestDeadLetterRedeliverRefusesAnUnsafeLetterWithoutSending(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-a", f.URL+"/v1/applications", dlBody)
	l.IdempotencyKey = ""
	dir := dlSeed(t, l)
	_, stderr, err := dlRun("redeliver", dir, l.ID, "-header", "Authorization: "+dlToken)
	if err == nil {
		t.Fatal("redeliver of a POST without a key succeeded")
	}
	wantAll(t, "stderr", stderr, "grantretry: deadletter: letter L-a: POST without an Idempotency-Key")
	if requests, _ := f.stats(); requests != 0 {
		t.Errorf("funder got %d requests", requests)
	}
}

func TestWithHeadersLeavesTheCallersRequestAlone(t *testing.T) {
	var got http.Header
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, "https://funder.example/x", nil)
	req.Header.Set("Authorization", "stale")
	_, err := operator.WithHeaders{Next: next, Header: http.Header{"Authorization": {dlToken}}}.RoundTrip(req)
	if err != nil || got.Get("Authorization") != dlToken || req.Header.Get("Authorization") != "stale" {
		t.Errorf("sent %q, caller's request now %q (%v); want %q sent and the caller's untouched",
			got.Get("Authorization"), req.Header.Get("Authorization"), err, dlToken)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDeadLetterHelp(t *testing.T) {
	for _, args := range [][]string{
		{"-help"}, {"--help"}, {"help"},
		{"list", "-help"}, {"list", "DIR", "--help"},
		{"show", "-help"}, {"show", "--help"},
		{"redeliver", "-help"}, {"redeliver", "DIR", "ID", "--help"},
	} {
		stdout, stderr, err := dlRun(args...)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout, "Usage: grantretry deadletter") || stderr != "" {
			t.Errorf("%q: %v, stdout %q, stderr %q; want the help on stdout and flag.ErrHelp", args, err, stdout, stderr)
		}
	}
}

func TestDeadLetterCalledWrongly(t *testing.T) {
	dir := dlSeed(t, dlLetter("L-a", "https://funder.example/x", dlBody))
	t.Setenv(dlKeyEnv, "")
	os.Unsetenv(dlKeyEnv)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"purge", dir}, `unknown subcommand "purge"`},
		{[]string{"list"}, "list wants one directory"},
		{[]string{"list", dir, dir}, "list wants one directory"},
		{[]string{"list", dir, "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"show", dir}, "show wants a directory and one letter id"},
		{[]string{"redeliver"}, "redeliver wants a directory"},
		{[]string{"redeliver", dir}, "letter ids or -all"},
		{[]string{"redeliver", dir, "L-a", "-all"}, "letter ids or -all"},
		{[]string{"redeliver", dir, "-all", "-timeout", "0s"}, "-timeout 0s"},
		{[]string{"redeliver", dir, "-all", "-header", "X-Correlation-ID: c"}, "(X-Correlation-Id): comes from the letter"},
		{[]string{"redeliver", dir, "-all", "-header", "idempotency-key: k"}, "(Idempotency-Key): comes from the letter"},
	} {
		_, _, err := dlRun(tc.args...)
		var uerr usageError
		if !errors.As(err, &uerr) {
			t.Errorf("%q: %v, want a usage error", tc.args, err)
			continue
		}
		wantAll(t, fmt.Sprintf("%q", tc.args), err.Error(), tc.want)
	}
}

// TestDeadLetterRedeliverNeverEchoesABadHeaderFlag runs the whole command,
// as main does, on every malformed -header and -header-env: each is a usage
// error that points at the flag, and nothing the operator typed after the
// header name (nor a name that is not a valid one) reaches the output.
func TestDeadLetterRedeliverNeverEchoesABadHeaderFlag(t *testing.T) {
	dir := dlSeed(t, dlLetter("L-a", "https://funder.example/x", dlBody))
	t.Setenv(dlKeyEnv, dlAPIKey)
	t.Setenv("GRANTRETRY_TEST_DL_CONTROL", "a\x01sk_live_ctl9")
	t.Setenv("GRANTRETRY_TEST_DL_EMPTY", "")
	for _, tc := range []struct {
		flags   []string
		want    string
		secrets []string // each is in flags or in an environment value
	}{
		{[]string{"-header", "Authorization Bearer op-token-7731"}, `-header #1: want "Name: value"`, []string{"Bearer", "op-token"}},
		{[]string{"-header", "Authorization=Bearer op-token-7731"}, `-header #1: want "Name: value"`, []string{"Bearer", "op-token"}},
		{[]string{"-header", "Authorization Bearer abc:op-token-7731"}, "-header #1: not a valid header name", []string{"Bearer", "abc", "op-token"}},
		{[]string{"-header", "Bearer op-token-7731: x"}, "-header #1: not a valid header name", []string{"Bearer", "op-token"}},
		{[]string{"-header", "Idempotency-Key: op-token-7731"}, "-header #1 (Idempotency-Key): comes from the letter", []string{"op-token"}},
		{[]string{"-header", "X-Note: a\x00op-token-7731"}, "-header #1 (X-Note): control character", []string{"op-token"}},
		{[]string{"-header", "Authorization:"}, "-header #1 (Authorization): empty value", nil},
		{[]string{"-header", "Authorization: " + dlToken, "-header", "X-Api-Key k-op-token"}, "-header #2: want", []string{"op-token", "k-op"}},
		{[]string{"-header-env", "Authorization: Bearer sk_live_SECRET123"}, `-header-env #1: want "Name=VAR"`, []string{"Bearer", "sk_live", "SECRET123"}},
		{[]string{"-header-env", "Authorization=Bearer abc/SECRET=="}, "-header-env #1 (Authorization): the environment variable it names is not set", []string{"Bearer", "abc", "SECRET"}},
		{[]string{"-header-env", "Authorization=sk_live_SECRET123"}, "-header-env #1 (Authorization): the environment variable it names is not set", []string{"sk_live", "SECRET123"}},
		{[]string{"-header-env", "sk_live_SECRET123"}, `-header-env #1: want "Name=VAR"`, []string{"sk_live", "SECRET123"}},
		{[]string{"-header-env", "Authorization="}, `-header-env #1: want "Name=VAR"`, nil},
		{[]string{"-header-env", "Bearer sk_live_SECRET123=" + dlKeyEnv}, "-header-env #1: not a valid header name", []string{"Bearer", "sk_live", "SECRET123"}},
		{[]string{"-header-env", "X-Correlation-ID=" + dlKeyEnv}, "-header-env #1 (X-Correlation-Id): comes from the letter", []string{dlAPIKey}},
		{[]string{"-header-env", "X-Note=GRANTRETRY_TEST_DL_CONTROL"}, "-header-env #1 (X-Note): control character", []string{"sk_live_ctl9"}},
		{[]string{"-header-env", "X-Note=GRANTRETRY_TEST_DL_EMPTY"}, "-header-env #1 (X-Note): empty value", nil},
		{[]string{"-header-env", "X-Api-Key=" + dlKeyEnv, "-header-env", "Authorization=op-token-7731"}, "-header-env #2 (Authorization)", []string{"op-token", dlAPIKey}},
	} {
		name := fmt.Sprintf("%q", tc.flags)
		typed := strings.Join(tc.flags, " ") + " " + os.Getenv("GRANTRETRY_TEST_DL_CONTROL") + " " + dlAPIKey
		for _, s := range tc.secrets {
			if !strings.Contains(typed, s) {
				t.Fatalf("%s: the row's secret %q is nowhere in its input, so the test could not fail", name, s)
			}
		}
		var out bytes.Buffer
		code := run(append([]string{"deadletter", "redeliver", dir, "-all"}, tc.flags...), &out, &out)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d:\n%s", name, code, exitUsage, out.String())
		}
		wantAll(t, name, out.String(), tc.want)
		wantNone(t, name, out.String(), tc.secrets...)
	}
}

func TestDeadLetterFailures(t *testing.T) {
	dir := dlSeed(t, dlLetter("L-a", "https://funder.example/x", dlBody))
	missing := filepath.Join(t.TempDir(), "nowhere")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", missing}, "no such file or directory"},
		{[]string{"show", dir, "L-zz"}, "letter L-zz: not in"},
		{[]string{"show", dir, "../L-a"}, "not a safe file name"},
		{[]string{"redeliver", dir, "L-zz", "-dry-run"}, "1 of 1 letter not redelivered"},
	} {
		_, _, err := dlRun(tc.args...)
		var uerr usageError
		if err == nil || errors.As(err, &uerr) || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: %v, want a failure", tc.args, err)
			continue
		}
		wantAll(t, fmt.Sprintf("%q", tc.args), err.Error(), tc.want)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("list created the missing directory: %v", err)
	}
}

// dlUntouchedFixture is a letter directory as deadletter.Open would
// change it: without its redelivered subdirectory, and with a temporary
// file a crashed write left over an hour ago.
func dlUntouchedFixture(t *testing.T) (dir string, l *grantretry.Letter) {
	t.Helper()
	l = dlLetter("L-a", "https://funder.example/v1/applications", dlBody)
	dir = dlSeed(t, l)
	if err := os.Remove(filepath.Join(dir, deadletter.RedeliveredDir)); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, ".tmp-L-z.json-1")
	if err := os.WriteFile(stale, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	return dir, l
}

// dlTree describes every name under dir with its mode, size and time.
func dlTree(t *testing.T, dir string) []string {
	t.Helper()
	var tree []string
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		tree = append(tree, fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// dlReadCommands are the commands that only read the directory.
func dlReadCommands(dir, id string) [][]string {
	return [][]string{
		{"list", dir},
		{"list", dir, "-json"},
		{"show", dir, id},
		{"redeliver", dir, id, "-dry-run", "-header", "Authorization: " + dlToken},
		{"redeliver", dir, "-all", "-dry-run"},
	}
}

func TestDeadLetterReadingCommandsChangeNothing(t *testing.T) {
	dir, l := dlUntouchedFixture(t)
	before := dlTree(t, dir)
	for _, args := range dlReadCommands(dir, l.ID) {
		if _, stderr, err := dlRun(args...); err != nil {
			t.Errorf("%q: %v\n%s", args, err, stderr)
		}
		if after := dlTree(t, dir); !reflect.DeepEqual(after, before) {
			t.Fatalf("%q changed the directory:\nbefore %q\nafter  %q", args, before, after)
		}
	}
}

func TestDeadLetterReadingCommandsWorkOnAReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	dir, l := dlUntouchedFixture(t)
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	for _, args := range dlReadCommands(dir, l.ID) {
		stdout, stderr, err := dlRun(args...)
		if err != nil {
			t.Errorf("%q on a read-only directory: %v\n%s", args, err, stderr)
		}
		wantAll(t, fmt.Sprintf("%q", args), stdout, l.ID)
	}
}

func TestDeadLetterShowAndDryRunNameTheLettersHost(t *testing.T) {
	l := dlLetter("L-a", "https://10.0.0.7/v1/applications", dlBody)
	l.Host = "portal.example-foundation.org"
	dir := dlSeed(t, l)
	show, _, err := dlRun("show", dir, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", show, "host             portal.example-foundation.org")
	plan, _, err := dlRun("redeliver", dir, l.ID, "-dry-run")
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "dry run", plan, "POST "+l.URL+"\n  Host: portal.example-foundation.org\n")
	plain := dlLetter("L-b", "https://portal.example-foundation.org/v1/applications", dlBody)
	plan, _, err = dlRun("redeliver", dlSeed(t, plain), plain.ID, "-dry-run")
	if err != nil {
		t.Fatal(err)
	}
	wantNone(t, "dry run of a letter without a host", plan, "Host:")
}

func TestDeadLetterRedeliverSendsTheLettersHost(t *testing.T) {
	hosts := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	l := dlLetter("L-a", srv.URL+"/v1/applications", dlBody)
	l.Host = "portal.example-foundation.org"
	dir := dlSeed(t, l)
	if _, stderr, err := dlRun("redeliver", dir, l.ID); err != nil {
		t.Fatalf("redeliver: %v\n%s", err, stderr)
	}
	if got := <-hosts; got != l.Host {
		t.Errorf("the funder was sent Host %q, want the letter's %q", got, l.Host)
	}
}

// A letter whose last attempt was ambiguous is not sent blindly: the
// command cannot ask the funder, so it refuses unless -trust-key says the
// funder honours Idempotency-Key.
func TestDeadLetterRedeliverRefusesAnAmbiguousLetterUnlessTrusted(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-ambiguous", f.URL+"/v1/applications", dlBody)
	l.Ambiguous = true
	dir := dlSeed(t, l)
	t.Setenv(dlKeyEnv, dlAPIKey)
	auth := []string{"-header", "Authorization: " + dlToken, "-header-env", "X-Api-Key=" + dlKeyEnv}

	stdout, _, err := dlRun("show", dir, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "show", stdout, "ambiguous", "ask the funder")
	_, stderr, err := dlRun(append([]string{"redeliver", dir, l.ID}, auth...)...)
	if err == nil {
		t.Fatal("redeliver sent an ambiguous letter without -trust-key")
	}
	wantAll(t, "stderr", stderr, "letter L-ambiguous (submission GRANT-L-ambiguous) not sent", "-trust-key")
	if requests, _ := f.stats(); requests != 0 {
		t.Errorf("the funder got %d requests, want none", requests)
	}
	if _, stderr, err = dlRun(append([]string{"redeliver", dir, l.ID, "-trust-key"}, auth...)...); err != nil {
		t.Fatalf("redeliver -trust-key: %v\n%s", err, stderr)
	}
	if requests, _ := f.stats(); requests != 1 {
		t.Errorf("the funder got %d requests, want 1", requests)
	}
}

// A redelivery that fails on the transport (a funder that refuses
// connections) is reported with the tool's prefix only, though the
// client's *url.Error quotes the library's error, on a line that names
// the letter; the letter stays.
func TestDeadLetterRedeliverTransportErrorNamesTheLetter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/submit"
	ln.Close() // nothing listens there now: connections are refused
	dir := dlSeed(t, dlLetter("L-a", refused, dlBody))
	var stdout, stderr bytes.Buffer
	code := run([]string{"deadletter", "redeliver", dir, "L-a", "-timeout", "1s", "-trail", filepath.Join(t.TempDir(), "trail.jsonl")}, &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitFailure, stdout.String(), stderr.String())
	}
	wantAll(t, "stderr", "\n"+stderr.String(), "\ngrantretry: deadletter: letter L-a: Post \""+refused+"\": ", "; it stays in "+dir+"\n")
	if strings.Count(stderr.String(), "grantretry: ") != 2 { // the letter's line and the count's
		t.Errorf("the prefix twice on a line:\n%s", stderr.String())
	}
	if got := dlPending(t, dir); len(got) != 1 {
		t.Errorf("waiting after the failure: %q, want L-a", got)
	}
}

// list shows each letter's submission id, which is what the pipeline and
// the funder know it by, and redeliver words its result in the words the
// fleet's tool uses too (internal/operator).
func TestDeadLetterListAndRedeliverNameTheSubmission(t *testing.T) {
	f := newDLFunder(t)
	l := dlLetter("L-a", f.URL+"/v1/applications", dlBody)
	dir := dlSeed(t, l)
	stdout, _, err := dlRun("list", dir)
	if err != nil {
		t.Fatal(err)
	}
	wantAll(t, "list", stdout, "SUBMISSION", "GRANT-L-a")
	t.Setenv(dlKeyEnv, dlAPIKey)
	stdout, stderr, err := dlRun("redeliver", dir, l.ID, "-header", "Authorization: "+dlToken, "-header-env", "X-Api-Key="+dlKeyEnv)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, stderr)
	}
	done := deadletter.Redelivery{Status: http.StatusCreated, Disposition: grantretry.Succeeded, Attempts: 1}
	wantAll(t, "redeliver", stdout, operator.Redelivered(l, done)+"\n")
}
