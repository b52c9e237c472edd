package operator_test

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

type dirRun struct {
	stdout, stderr string
	sum            *operator.Summary
	err            error
}

// redeliverDir runs the core's redeliver over a DirStore of d, with the
// letters ids named and the flags args, through a grantretry Transport.
func redeliverDir(t *testing.T, d *deadletter.Dir, ids []string, args ...string) dirRun {
	t.Helper()
	fs := flag.NewFlagSet("redeliver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f operator.RedeliverFlags
	f.Register(fs, "in DIR")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ids); err != nil {
		t.Fatal(err)
	}
	var client *http.Client
	if !f.DryRun {
		tr := grantretry.New(nil, grantretry.WithBudget(0, 10*time.Second))
		t.Cleanup(tr.CloseIdleConnections)
		client = &http.Client{Transport: tr}
	}
	var stdout, stderr bytes.Buffer
	r := &operator.Run{Store: operator.DirStore{Dir: d}, Flags: &f, IDs: ids, Client: client, Note: "test",
		Stdout: &stdout, Stderr: &stderr, Prefix: "test: ", AskWith: "deadletter.Redeliver"}
	sum, err := r.Redeliver(context.Background())
	return dirRun{stdout.String(), stderr.String(), sum, err}
}

func newDirWith(t *testing.T, letters ...*grantretry.Letter) *deadletter.Dir {
	t.Helper()
	d, err := deadletter.Open(filepath.Join(t.TempDir(), "letters"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range letters {
		if err := d.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func created() time.Time { return time.Now().Add(-time.Hour).Truncate(time.Second).UTC() }

// A letter the funder took (201) that cannot be marked redelivered is
// said to be so, in its own words, and fails the run; it is not "no
// answer".
func TestRedeliverSaysALetterDeliveredButNotRecorded(t *testing.T) {
	f := storetest.NewFunder(t)
	l := storetest.Letter("L-mark", f.URL+"/v1/applications", created())
	d := newDirWith(t, l)
	// The archive holds a file of its name already: MarkRedelivered fails.
	if err := os.WriteFile(filepath.Join(d.Path(), deadletter.RedeliveredDir, l.ID+".json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := redeliverDir(t, d, []string{l.ID})
	s := r.sum
	if operator.ExitCode(r.err) != operator.ExitFailure || s.NotRecorded != 1 || s.NotDelivered != 0 || s.Sent != 1 ||
		s.DeliveredBy["answered 201 Created, not recorded"] != 1 {
		t.Errorf("summary %+v, %v; want 1 sent, answered 201 Created and not recorded, exit 1\n%s%s", *s, r.err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "  delivered: 1 (answered 201 Created, not recorded: 1)\n") || strings.Contains(r.stdout, "no answer") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "test: letter L-mark (submission GRANT-L-mark) was answered 201 Created") || !strings.Contains(r.stderr, "could not be marked redelivered") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if !strings.Contains(r.err.Error(), "1 delivered but not recorded") {
		t.Errorf("error %q does not say it", r.err)
	}
}

// A named id that no letter can have counts "no such letter".
func TestRedeliverCountsAnInvalidIDNoSuchLetter(t *testing.T) {
	d := newDirWith(t)
	r := redeliverDir(t, d, []string{"../etc/passwd"}, "-dry-run")
	if r.sum.NotSentBy["no such letter"] != 1 || operator.ExitCode(r.err) != operator.ExitFailure {
		t.Errorf("summary %+v; want not sent, no such letter\n%s%s", *r.sum, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "no such letter") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// A dry run refuses a named ambiguous letter with a key, without
// -trust-key, as the real run does.
func TestDryRunRefusesANamedAmbiguousLetterAsTheRunDoes(t *testing.T) {
	l := storetest.Ambiguous(storetest.Letter("L-amb", "https://funder.example/v1/applications", created()))
	d := newDirWith(t, l)
	r := redeliverDir(t, d, []string{l.ID}, "-dry-run")
	if operator.ExitCode(r.err) != operator.ExitFailure || r.sum.Sent != 0 || r.sum.NotSentBy["ambiguous"] != 1 {
		t.Errorf("dry run of a named ambiguous letter: %+v, %v; want it not planned, not sent (ambiguous), exit 1\n%s%s", *r.sum, r.err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "test: letter L-amb (submission GRANT-L-amb) not sent: its last attempt may have been applied") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if r = redeliverDir(t, d, []string{l.ID}, "-dry-run", "-trust-key"); r.err != nil || r.sum.Sent != 1 {
		t.Errorf("dry run -trust-key: %+v, %v; want it planned", *r.sum, r.err)
	}
}
