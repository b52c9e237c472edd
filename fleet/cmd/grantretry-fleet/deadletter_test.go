package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/jackc/pgx/v5/pgxpool"
)

// toolFunder counts the submissions it receives by Idempotency-Key and
// answers each with status after delay; one whose key is in hold gets no
// answer until its client goes away.
type toolFunder struct {
	srv     *httptest.Server
	delay   time.Duration
	status  int
	hold    map[string]bool
	arrived chan string

	mu   sync.Mutex
	seen map[string]int
	auth []string
}

func newToolFunder(t *testing.T, delay time.Duration, status int, hold ...string) *toolFunder {
	f := &toolFunder{delay: delay, status: status, hold: map[string]bool{}, arrived: make(chan string, 1000), seen: map[string]int{}}
	for _, k := range hold {
		f.hold[k] = true
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(grantretry.HeaderIdempotencyKey)
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.seen[key]++
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		f.arrived <- key
		wait := f.delay
		if f.hold[key] {
			wait = time.Hour
		}
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(f.status)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *toolFunder) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.seen))
	for k, v := range f.seen {
		m[k] = v
	}
	return m
}

func (f *toolFunder) authorizations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auth...)
}

func putLetters(t *testing.T, pool *pgxpool.Pool, letters ...*grantretry.Letter) {
	t.Helper()
	s := fleet.NewLetters(pool, fleet.WithLimit(5*time.Second))
	for _, l := range letters {
		if err := s.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
}

// withBody returns l with body in place of its own.
func withBody(l *grantretry.Letter, body []byte) *grantretry.Letter {
	sum := sha256.Sum256(body)
	l.Body, l.BodySHA256, l.BodyBytes = body, hex.EncodeToString(sum[:]), int64(len(body))
	return l
}

// A second operator runs redeliver -all well into a first one's long batch,
// after the lease the first would have held every letter under had it
// claimed them all at once: the two share the letters, and none is sent
// twice.
func TestRedeliverAllBySecondOperatorDuringALongBatchSendsNoneTwice(t *testing.T) {
	const n = 40
	dsn, pool := newDB(t)
	f := newToolFunder(t, 60*time.Millisecond, http.StatusCreated)
	for i := range n {
		putLetters(t, pool, testLetter(f.srv.URL, i, false))
	}
	const timeout = 400 * time.Millisecond // a lease of 500 ms
	type result struct {
		code        int
		out, errOut string
	}
	first := make(chan result, 1)
	go func() {
		code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-worker", "first", "-timeout", timeout.String())
		first <- result{code, out, errOut}
	}()
	// Past the lease: 15 letters at 60 ms each.
	for range 15 {
		select {
		case <-f.arrived:
		case r := <-first:
			t.Fatalf("the first operator ended before the second started: exit %d\n%s%s", r.code, r.out, r.errOut)
		}
	}
	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-worker", "second", "-timeout", timeout.String())
	if code != exitOK {
		t.Errorf("second operator: exit %d\n%s%s", code, out, errOut)
	}
	r := <-first
	if r.code != exitOK {
		t.Errorf("first operator: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	seen := f.counts()
	for k, c := range seen {
		if c != 1 {
			t.Errorf("letter %s received %d times", k, c)
		}
	}
	if len(seen) != n {
		t.Errorf("the funder received %d letters, want %d", len(seen), n)
	}
	mine, theirs := strings.Count(r.out, "redelivered letter letter-"), strings.Count(out, "redelivered letter letter-")
	if mine+theirs != n || theirs == 0 {
		t.Errorf("the first operator redelivered %d letters and the second %d; want %d between them, some by the second", mine, theirs, n)
	}
}

// TestHelperToolProcess is the tool run as a process of its own, by
// TestRedeliverKilledMidSendLeavesItsLetterAmbiguous; it does nothing in
// a test run.
func TestHelperToolProcess(t *testing.T) {
	args := os.Getenv("GRANTRETRY_FLEET_TOOL_ARGS")
	if args == "" {
		t.Skip("run as a subprocess only")
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

// The tool's process is killed (SIGKILL) with its request on the wire. Its
// letter stays leased until the lease ends (another's to -all), then is
// claimed again as ambiguous: -all leaves it, a run naming it is refused
// without -trust-key, and show says it is ambiguous.
func TestRedeliverKilledMidSendLeavesItsLetterAmbiguous(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated, "key-0")
	putLetters(t, pool, testLetter(f.srv.URL, 0, false))
	const timeout = time.Second // a lease of 1.25 s
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperToolProcess$")
	cmd.Env = append(os.Environ(), "GRANTRETRY_FLEET_TOOL_ARGS="+strings.Join(
		[]string{"deadletter", "redeliver", "-pg", dsn, "letter-0", "-worker", "killed", "-timeout", timeout.String()}, "\x1f"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.arrived: // the request is on the wire
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the tool sent nothing:\n%s", out.String())
	}
	cmd.Process.Kill()
	cmd.Wait()

	var code int
	var stdout, errOut string
	for deadline := time.Now().Add(10 * timeout); time.Now().Before(deadline); time.Sleep(timeout / 10) {
		code, stdout, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-worker", "next", "-timeout", timeout.String())
		if !strings.Contains(stdout, "another's: letter letter-0") {
			break // claimed: the lease has ended
		}
	}
	if code != exitOK || !strings.Contains(stdout, "ambiguous: letter letter-0: its last attempt may have been applied") ||
		!strings.Contains(stdout, "  left, ambiguous: 1 (") {
		t.Fatalf("redeliver -all after the kill: exit %d\n%s%s", code, stdout, errOut)
	}
	code, stdout, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "-worker", "next", "-timeout", timeout.String())
	if code != exitFailure || !strings.Contains(errOut, "letter letter-0 not sent: its last attempt may have been applied") || !strings.Contains(errOut, "-trust-key") {
		t.Fatalf("redeliver letter-0 after the kill: exit %d\n%s%s", code, stdout, errOut)
	}
	if n := f.counts()["key-0"]; n != 1 {
		t.Fatalf("the letter received %d times, want 1", n)
	}
	code, stdout, _ = runCLI("deadletter", "show", "-pg", dsn, "letter-0")
	if code != exitOK || !strings.Contains(stdout, "ambiguous") || !strings.Contains(stdout, "waiting") {
		t.Fatalf("show after the kill: exit %d\n%s", code, stdout)
	}
}

// A redelivery's attempts and disposition are in the fleet's trail, under
// the letter's submission id, and audit trace finds them.
func TestRedeliverWritesItsAttemptsAndDispositionToTheFleetsTrail(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated)
	l := testLetter(f.srv.URL, 0, false)
	l.SubmissionID = "GRANT-42"
	putLetters(t, pool, l)
	if code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0"); code != exitOK {
		t.Fatalf("redeliver: exit %d\n%s%s", code, out, errOut)
	}
	msgs := map[string]int{}
	var disposition any
	_, err := fleet.ReadTrail(context.Background(), pool, func(r fleet.TrailRecord) error {
		if r.Fields[grantretry.FieldSubmissionID] == "GRANT-42" {
			msgs[r.Msg]++
			if r.Msg == grantretry.MsgDisposition {
				disposition = r.Fields[grantretry.FieldDisposition]
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if msgs[grantretry.MsgAttempt] != 1 || msgs[grantretry.MsgDisposition] != 1 || disposition != string(grantretry.Succeeded) {
		t.Fatalf("the trail's records of GRANT-42: %v, disposition %v; want one attempt and a succeeded disposition", msgs, disposition)
	}
	code, out, errOut := runCLI("audit", "trace", "-pg", dsn, "--submission", "GRANT-42")
	if code != exitOK || !strings.Contains(out, "disposition=succeeded") {
		t.Fatalf("audit trace: exit %d\n%s%s", code, out, errOut)
	}
}

// show prints the letter field by field, its body as text when it is
// printable text of at most 4096 bytes and as its size and SHA-256
// otherwise; -json prints it as stored.
func TestShowPrintsTheLetterAsFieldsAndItsBodyAsText(t *testing.T) {
	dsn, pool := newDB(t)
	text := testLetter("http://funder.example", 0, false)
	binary := withBody(testLetter("http://funder.example", 1, false), []byte{0x1b, '[', '2', 'J', 0xff, 0})
	putLetters(t, pool, text, binary)

	code, out, _ := runCLI("deadletter", "show", "-pg", dsn, "letter-0")
	for _, want := range []string{"idempotency key  key-0", "state            waiting", "\n{\"application\":0}\n", "body             17 bytes, sha256 " + text.BodySHA256} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show letter-0: exit %d, want %q in\n%s", code, want, out)
		}
	}
	code, out, _ = runCLI("deadletter", "show", "-pg", dsn, "letter-1")
	if code != exitOK || !strings.Contains(out, "(the body is not text of at most 4096 bytes: -body writes it out)") || strings.Contains(out, "\x1b") {
		t.Errorf("show letter-1: exit %d\n%q", code, out)
	}
	code, out, _ = runCLI("deadletter", "show", "-pg", dsn, "letter-1", "-body")
	if code != exitOK || out != string(binary.Body) {
		t.Errorf("show -body: exit %d, %q", code, out)
	}
	code, out, _ = runCLI("deadletter", "show", "-pg", dsn, "letter-1", "-json")
	var raw struct {
		Letter     grantretry.Letter `json:"letter"`
		Redelivery any               `json:"redelivery"`
	}
	if err := json.Unmarshal([]byte(out), &raw); code != exitOK || err != nil || !bytes.Equal(raw.Letter.Body, binary.Body) || raw.Redelivery != nil {
		t.Errorf("show -json: exit %d, %v\n%s", code, err, out)
	}
}

// -dry-run prints what would be sent, with a -header-env header named by
// its variable and never shown, and a warning on an ambiguous letter
// named; -all's leaves the ambiguous letter; neither sends, claims or
// records anything.
func TestRedeliverDryRunSendsNothingAndShowsNoHeaderEnvValue(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated)
	putLetters(t, pool, testLetter(f.srv.URL, 0, false), testLetter(f.srv.URL, 1, true))
	t.Setenv("FLEET_TEST_TOKEN", "Bearer s3cret")
	// Named without -trust-key, the ambiguous letter is refused, as the
	// real run refuses it.
	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "letter-1", "-dry-run", "-header-env", "Authorization=FLEET_TEST_TOKEN")
	if code != exitFailure || strings.Contains(out+errOut, "s3cret") || !strings.Contains(errOut, "letter letter-1 not sent: its last attempt may have been applied") ||
		!strings.Contains(out, "summary: 2 letters waiting, 2 selected, 1 planned\n") {
		t.Fatalf("dry run without -trust-key: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "letter-1", "-dry-run", "-trust-key", "-header-env", "Authorization=FLEET_TEST_TOKEN")
	if code != exitOK || strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"letter letter-0 (dry run: nothing sent)\n  POST " + f.srv.URL + "/submit\n",
		"  Authorization: [not shown: from $FLEET_TEST_TOKEN]\n",
		"letter letter-1 (dry run: nothing sent)",
		"  warning: its last attempt may have been applied: it is sent only with -trust-key\n",
		"summary: 2 letters waiting, 2 selected, 2 planned\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run: want %q in\n%s", want, out)
		}
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-dry-run", "-header-env", "Authorization=FLEET_TEST_TOKEN")
	if code != exitOK || strings.Contains(out+errOut, "s3cret") || strings.Contains(out, "letter letter-1 (dry run") {
		t.Fatalf("dry run -all: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"letter letter-0 (dry run: nothing sent)", "ambiguous: letter letter-1: ", "summary: 2 letters waiting, 1 selected, 1 planned\n", "  left, ambiguous: 1 ("} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run -all: want %q in\n%s", want, out)
		}
	}
	if seen := f.counts(); len(seen) != 0 {
		t.Errorf("a dry run sent %v", seen)
	}
	var claimed, records int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM grantretry_letters WHERE claims > 0 OR state <> 'waiting'`).Scan(&claimed); err != nil || claimed != 0 {
		t.Errorf("a dry run claimed or changed %d letters (%v)", claimed, err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM grantretry_trail`).Scan(&records); err != nil || records != 0 {
		t.Errorf("a dry run wrote %d trail records (%v)", records, err)
	}

	// The real run sends the header's value, read from the variable.
	t.Setenv("FLEET_TEST_TOKEN", "Bearer s3cret")
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "-header-env", "Authorization=FLEET_TEST_TOKEN")
	if auth := f.authorizations(); code != exitOK || len(auth) != 1 || auth[0] != "Bearer s3cret" {
		t.Fatalf("redeliver -header-env: exit %d, Authorization %q\n%s%s", code, auth, out, errOut)
	}
	code, _, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-header-env", "Authorization=FLEET_TEST_UNSET")
	if code != exitUsage || !strings.Contains(errOut, "-header-env #1 (Authorization): the environment variable it names is not set") {
		t.Fatalf("-header-env of an unset variable: exit %d, %s", code, errOut)
	}
}

// A failed redelivery is reported with the tool's prefix and no second
// "grantretry:" after it.
func TestRedeliverFailurePrintsTheGrantretryPrefixOnce(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusBadRequest)
	putLetters(t, pool, testLetter(f.srv.URL, 0, false))
	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "letter-9")
	if code != exitFailure || strings.Contains(out, "redelivered letter letter-0") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"grantretry-fleet: deadletter: letter letter-0 not redelivered: answered 400 Bad Request (failed_terminal after 1 attempt); it stays in the database\n",
		"grantretry-fleet: deadletter: letter letter-9 was not sent: there is no such letter in the database\n",
		"grantretry-fleet: deadletter: 2 of 2 letters not redelivered\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("want %q in\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, ": grantretry: ") {
		t.Errorf("the prefix twice:\n%s", errOut)
	}
}

// A redelivery that fails on the transport (a funder that refuses
// connections) is reported once, with the tool's prefix only (the
// client's *url.Error quotes the library's error), on a line that names
// the letter.
func TestRedeliverTransportErrorPrintsThePrefixOnceAndNamesTheLetter(t *testing.T) {
	dsn, pool := newDB(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	putLetters(t, pool, testLetter(refused, 0, false))
	code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "letter-0", "-timeout", "1s")
	if code != exitFailure {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	want := "grantretry-fleet: deadletter: letter letter-0: Post \"" + refused + "/submit\": "
	if !strings.Contains(errOut, want) {
		t.Errorf("want a line beginning %q in\n%s", want, errOut)
	}
	if strings.Contains(errOut, "grantretry: ") {
		t.Errorf("the prefix twice:\n%s", errOut)
	}
}

// deadletter's subcommands on a database no fleet process migrated say
// that it has no fleet letters, what to check and what creates them, not
// the server's "relation does not exist".
func TestDeadLetterOnADatabaseNeverMigratedSaysToMigrate(t *testing.T) {
	dsn := pgtest.DSN(t)
	path := t.TempDir()
	dir, err := deadletter.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.PutDeadLetter(context.Background(), testLetter("http://funder.example", 0, false)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"deadletter", "list", "-pg", dsn},
		{"deadletter", "show", "-pg", dsn, "letter-0"},
		{"deadletter", "redeliver", "-pg", dsn, "letter-0"},
		{"deadletter", "redeliver", "-pg", dsn, "letter-0", "letter-1"},
		{"deadletter", "redeliver", "-pg", dsn, "-all"},
		{"deadletter", "redeliver", "-pg", dsn, "-dry-run", "letter-0"},
		{"deadletter", "drain", "-pg", dsn, path},
	} {
		name := fmt.Sprintf("%q", args[:2])
		if len(args) > 4 {
			name = fmt.Sprintf("%q", append(args[:2:2], args[4:]...))
		}
		code, out, errOut := runCLI(args...)
		if code != exitFailure {
			t.Errorf("%s: exit %d, want %d", name, code, exitFailure)
		}
		for _, want := range []string{"no fleet letters (no table grantretry_letters)", "$" + envDSN, "fleet.Migrate"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, want, errOut)
			}
		}
		if strings.Contains(errOut, "does not exist") || strings.Count(errOut, "fleet.Migrate") != 1 {
			t.Errorf("%s: stderr %q, want the schema named missing once, without the server's words", name, errOut)
		}
		if strings.Contains(out, "moved") {
			t.Errorf("%s: stdout %q", name, out)
		}
	}
	if ls, err := dir.List(); err != nil || len(ls) != 1 {
		t.Errorf("the fallback directory after drain: %d letters, %v; want its letter left", len(ls), err)
	}
}

// list shows each letter's submission id, and redeliver words its result
// in the words of grantretry deadletter redeliver (internal/operator):
// the letter, its submission, the answer with its status text, and how
// the Transport ended it; a refusal likewise.
func TestListAndRedeliverNameTheSubmissionInTheSharedWords(t *testing.T) {
	dsn, pool := newDB(t)
	ok := newToolFunder(t, 0, http.StatusCreated)
	refusing := newToolFunder(t, 0, http.StatusUnprocessableEntity)
	a, b := testLetter(ok.srv.URL, 0, false), testLetter(refusing.srv.URL, 1, false)
	a.SubmissionID, b.SubmissionID = "GRANT-2026-0042", "GRANT-2026-0043"
	putLetters(t, pool, a, b)

	code, out, errOut := runCLI("deadletter", "list", "-pg", dsn)
	if code != exitOK || !strings.Contains(out, "SUBMISSION") || !strings.Contains(out, "GRANT-2026-0042") || !strings.Contains(out, "GRANT-2026-0043") {
		t.Fatalf("list: exit %d, want the submission ids\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("deadletter", "redeliver", "-pg", dsn, "-all")
	if code != exitFailure {
		t.Fatalf("redeliver: exit %d, want %d\n%s%s", code, exitFailure, out, errOut)
	}
	done := deadletter.Redelivery{Status: http.StatusCreated, Disposition: grantretry.Succeeded, Attempts: 1}
	if want := operator.Redelivered(a, done) + "\n"; !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
	if want := "redelivered letter letter-0 (submission GRANT-2026-0042): answered 201 Created (succeeded after 1 attempt)\n"; !strings.Contains(out, want) {
		t.Errorf("want %q in\n%s", want, out)
	}
	if want := "letter letter-1 (submission GRANT-2026-0043) not redelivered: answered 422 Unprocessable Entity (failed_terminal after 1 attempt)"; !strings.Contains(errOut, want) {
		t.Errorf("want %q in\n%s", want, errOut)
	}
}

// SIGINT mid-send stops the run after the letter in flight, which ends
// at its own bound: its attempt and the redelivery's disposition are in
// the fleet's trail, it is released ambiguous (the funder may have it), the letters not tried are named
// and left waiting, the summary says the run was stopped, and the command
// exits 1.
func TestRedeliverInterruptedMidSendRecordsTheAttemptInFlight(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusCreated, "key-0")
	a, b := testLetter(f.srv.URL, 0, false), testLetter(f.srv.URL, 1, false)
	a.SubmissionID = "GRANT-50"
	putLetters(t, pool, a, b)
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		// The funder holds letter-0 without an answer: the run lets the
		// send in flight end at its own bound (-deadline, no retry) and
		// records it, then begins no other.
		code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, "-deadline", "2s", "-budget", "0", "letter-0", "letter-1")
		done <- result{code, out, errOut}
	}()
	select {
	case <-f.arrived: // letter-0 is on the wire: the command catches SIGINT by now
	case r := <-done:
		t.Fatalf("the command ended before sending: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not stop after SIGINT")
	}
	if r.code != exitFailure || !strings.Contains(r.out, "not tried: letter letter-1") || !strings.Contains(r.errOut, "stopped by interrupt (SIGINT): 2 of 2 letters not redelivered, 1 of them not tried") ||
		!strings.HasSuffix(r.out, "  not tried: 1\n  stopped: interrupt (SIGINT); the letters not tried stay waiting\n") {
		t.Fatalf("after SIGINT: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if n := f.counts(); n["key-0"] != 1 || n["key-1"] != 0 {
		t.Errorf("the funder received %v, want letter-0 once and letter-1 never", n)
	}
	letters := fleet.NewLetters(pool)
	if l, rec, err := letters.Get(context.Background(), "letter-0"); err != nil || rec != nil || !l.Ambiguous {
		t.Errorf("letter-0 after the interrupted send: %+v, %v; want it waiting, ambiguous", rec, err)
	}
	if l, _, err := letters.Get(context.Background(), "letter-1"); err != nil || l.Ambiguous {
		t.Errorf("letter-1, never tried: %v; want it as it was", err)
	}
	var msgs []string
	_, err := fleet.ReadTrail(context.Background(), pool, func(r fleet.TrailRecord) error {
		if r.Fields[grantretry.FieldSubmissionID] == "GRANT-50" {
			msgs = append(msgs, r.Msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 2 || msgs[0] != grantretry.MsgAttempt || msgs[len(msgs)-1] != grantretry.MsgDisposition {
		t.Errorf("the trail's lines of letter-0's redelivery: %q; want its attempt, then its disposition", msgs)
	}
}
