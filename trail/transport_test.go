package trail_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

// The trail's whole promise, end to end, across a crash: a process that
// makes calls through a Transport with an audit trail and a dead-letter
// directory is killed at an arbitrary moment. Every call whose RoundTrip
// had returned before the kill has its disposition in the trail, with the
// letter it reported, and every reported letter is whole on disk.

const transportCrashEnv = "GRANTRETRY_TRANSPORT_CRASH_DIR"

// TestTransportCrashChild is the child: it submits applications to a
// loopback funder that fails every third one for good, and prints each
// call's correlation id, disposition and letter once RoundTrip returned.
func TestTransportCrashChild(t *testing.T) {
	dir := os.Getenv(transportCrashEnv)
	if dir == "" {
		t.Skip("the transport crash test's child process")
	}
	var n atomic.Int64
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/0") {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		n.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer funder.Close()
	sink, err := trail.Open(filepath.Join(dir, "trail.jsonl"), trail.Options{MaxFileSize: 16 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	letters, err := deadletter.Open(filepath.Join(dir, "letters"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	tr := grantretry.New(nil, grantretry.WithAuditTrail(sink), grantretry.WithDeadLetter(letters), grantretry.WithBudget(1, time.Minute),
		grantretry.WithBackoff(time.Millisecond, time.Millisecond), grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	out := bufio.NewWriter(os.Stdout)
	for i := 1; ; i++ {
		ctx := grantretry.WithSubmissionID(context.Background(), fmt.Sprintf("GRANT-%d", i))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/apply/%d", funder.URL, i%3), strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		resp, err := tr.RoundTrip(req)
		var o grantretry.Outcome
		if err != nil {
			o = err.(*grantretry.Error).Outcome
		} else {
			resp.Body.Close()
			o, _ = grantretry.OutcomeOf(resp)
		}
		if o.RecordErr != nil {
			fmt.Fprintln(os.Stderr, o.RecordErr)
			os.Exit(3)
		}
		fmt.Fprintf(out, "reported %s %s %s\n", o.CorrelationID, o.Disposition, dashIfNone(o.DeadLetterID))
		out.Flush()
	}
}

func dashIfNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reportedCall is one call the child reported as ended.
type reportedCall struct {
	disposition, letter string
}

// runTransportCrashChild runs the child on dir and SIGKILLs it once it has
// reported n calls; it returns the reported calls by correlation id.
func runTransportCrashChild(t *testing.T, dir string, n int) map[string]reportedCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTransportCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), transportCrashEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reported := map[string]reportedCall{}
	sc := bufio.NewScanner(stdout)
	for len(reported) < n && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "reported" {
			reported[f[1]] = reportedCall{disposition: f[2], letter: f[3]}
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if len(reported) < n {
		t.Fatalf("the child reported %d calls before it ended, want %d; stderr:\n%s", len(reported), n, stderr.String())
	}
	return reported
}

func TestTransportCrashLosesNoReportedDispositionOrLetter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	dir := t.TempDir()
	reported := runTransportCrashChild(t, dir, 60)

	// Reopening repairs a torn tail the kill may have left, as a
	// restarted pipeline would; then the chain must verify.
	reopened, err := trail.Open(filepath.Join(dir, "trail.jsonl"), trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "trail.jsonl*"))
	if err != nil {
		t.Fatal(err)
	}
	inTrail := map[string]reportedCall{}
	if _, err := trail.Read(files, func(r trail.Record) error {
		if r.Msg == grantretry.MsgDisposition {
			corr, _ := r.Fields[grantretry.FieldCorrelationID].(string)
			disp, _ := r.Fields[grantretry.FieldDisposition].(string)
			letter, _ := r.Fields[grantretry.FieldDeadLetterID].(string)
			inTrail[corr] = reportedCall{disposition: disp, letter: dashIfNone(letter)}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	letters, err := deadletter.OpenReadOnly(filepath.Join(dir, "letters"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := letters.List()
	if err != nil {
		t.Fatalf("the letters after the crash: %v", err)
	}
	deadLetters := 0
	for corr, rep := range reported {
		if got, ok := inTrail[corr]; !ok || got != rep {
			t.Errorf("call %s reported %+v, the trail says %+v (found: %v)", corr, rep, got, ok)
		}
		if rep.letter == "-" {
			continue
		}
		deadLetters++
		if l, err := letters.Get(rep.letter); err != nil || l.CorrelationID != corr || len(l.Body) == 0 {
			t.Errorf("letter %s of call %s: %v, %+v", rep.letter, corr, err, l)
		}
	}
	if deadLetters == 0 || len(all) < deadLetters {
		t.Errorf("%d letters reported, %d listed: want some, and all of them", deadLetters, len(all))
	}
}

// A funder whose error text is huge, or a caller whose own correlation id
// is, cannot break a trail shared by every call: the Transport cuts the
// fields, saying how many bytes it left out, so the trail never sees a
// record over its limit, and stays healthy.
func TestAuditFieldsAreBoundedSoNoCallBreaksTheTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	sink, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	huge := strings.Repeat("x", 2<<20)
	inner := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Body.Close()
		return nil, errors.New("malformed HTTP status line " + huge)
	})
	tr := grantretry.New(inner, grantretry.WithAuditTrail(sink), grantretry.WithBudget(1, time.Hour),
		grantretry.WithBackoff(time.Millisecond, time.Millisecond))
	req, _ := http.NewRequest(http.MethodPost, "https://funder.test/v1/applications", strings.NewReader(`{"a":1}`))
	req.Header.Set(grantretry.HeaderCorrelationID, "corr-"+huge)
	if _, err := tr.RoundTrip(req); !errors.Is(err, grantretry.ErrDeadLetter) {
		t.Fatalf("error %v, want a dead letter", err)
	}
	if err := sink.Err(); err != nil {
		t.Fatalf("the trail broke: %v", err)
	}
	sink.Close()
	cut := 0
	if _, err := trail.Read([]string{path}, func(r trail.Record) error {
		for _, k := range []string{grantretry.FieldCorrelationID, grantretry.FieldError} {
			v, _ := r.Fields[k].(string)
			if len(v) > 4<<10+200 {
				t.Errorf("%s %s: %d bytes kept", r.Msg, k, len(v))
			}
			if strings.Contains(v, " more bytes") {
				cut++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if cut < 4 { // the correlation id of every line, and the error of each attempt
		t.Errorf("%d fields cut with the length left out, want at least 4", cut)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
