package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// buildGrantretry builds cmd/grantretry, the directory's tool, into dir
// and returns its path.
func buildGrantretry(t *testing.T, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build grantretry with: %v", err)
	}
	bin := filepath.Join(dir, "grantretry")
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/grantretry/grantretry/cmd/grantretry").CombinedOutput()
	if err != nil {
		t.Fatalf("go build grantretry: %v\n%s", err, out)
	}
	return bin
}

// unavailableFunder answers 503 to a request under /unavailable and 201
// to any other, and counts the requests by Idempotency-Key.
type unavailableFunder struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string]int
}

func newUnavailableFunder(t *testing.T) *unavailableFunder {
	f := &unavailableFunder{got: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.got[r.Header.Get(grantretry.HeaderIdempotencyKey)]++
		f.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/unavailable") {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.Close)
	return f
}

// wordsScenario is a few letters, one of each fate: two delivered, one
// each left refused, not due, late and ambiguous, and one the funder
// answers 503.
func wordsScenario(url string) []*grantretry.Letter {
	created := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	at := func(i int) time.Time { return created.Add(time.Duration(i) * time.Millisecond) }
	return []*grantretry.Letter{
		storetest.Letter("W-0-delivered", url+"/v1/applications", at(0)),
		storetest.Letter("W-1-delivered", url+"/v1/applications", at(1)),
		storetest.Refused(storetest.Letter("W-2-refused", url+"/v1/applications", at(2))),
		storetest.NotDue(storetest.Letter("W-3-notdue", url+"/v1/applications", at(3)), time.Now().Add(time.Hour).Truncate(time.Second).UTC()),
		storetest.Late(storetest.Letter("W-4-late", url+"/v1/applications", at(4)), time.Now().Add(-time.Hour).Truncate(time.Second).UTC()),
		storetest.Ambiguous(storetest.Letter("W-5-ambiguous", url+"/v1/applications", at(5))),
		storetest.Letter("W-6-unavailable", url+"/unavailable/v1/applications", at(6)),
	}
}

// lines is text's lines, each with where replaced by "WHERE" and the
// tool's prefix by "TOOL: ", sorted: the two tools list the letters
// waiting each in its own store's order.
func lines(text, prefix, where string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = strings.ReplaceAll(l, where, "WHERE")
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			l = "TOOL: " + rest
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// The two tools print the same words for the same run: grantretry over a
// directory and grantretry-fleet over the database, each redelivering
// the same letters with -all, print the same summary, byte for byte, the
// same line for each letter and the same errors (but for where the
// letters wait, and each tool's prefix), and exit alike; their help says
// the summary and the exit status in the same words.
func TestDeadLetterRedeliverSaysTheSameWordsAsGrantretry(t *testing.T) {
	bin := buildGrantretry(t, t.TempDir())

	t.Run("SummaryAndLinesOfTheSameRun", func(t *testing.T) {
		f := newUnavailableFunder(t)
		base := t.TempDir()
		dir := filepath.Join(base, "letters")
		d, err := deadletter.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		scenario := wordsScenario(f.URL) // the same times in both stores
		for _, l := range scenario {
			if err := d.PutDeadLetter(context.Background(), l); err != nil {
				t.Fatal(err)
			}
		}
		dsn, pool := newDB(t)
		putLetters(t, pool, scenario...)

		var rootOut, rootErr bytes.Buffer
		cmd := exec.Command(bin, "deadletter", "redeliver", dir, "-all", "-budget", "0", "-trail", filepath.Join(base, "trail.jsonl"))
		cmd.Stdout, cmd.Stderr = &rootOut, &rootErr
		rootCode := 0
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatal(err)
			}
			rootCode = exit.ExitCode()
		}
		fleetCode, fleetOut, fleetErr := runCLI("deadletter", "redeliver", "-pg", dsn, "-all", "-budget", "0")

		if rootCode != exitFailure || fleetCode != exitFailure {
			t.Errorf("exit %d (grantretry) and %d (grantretry-fleet), want %d each: a letter was answered 503", rootCode, fleetCode, exitFailure)
		}
		rootSum, fleetSum := storetest.SummaryBlock(t, rootOut.String()), storetest.SummaryBlock(t, fleetOut)
		if rootSum != fleetSum {
			t.Errorf("the summaries differ:\ngrantretry:\n%sgrantretry-fleet:\n%s", rootSum, fleetSum)
		}
		for _, want := range []string{
			"summary: 7 letters waiting, 3 selected, 3 sent\n",
			"  delivered: 2 (answered 201 Created: 2)\n",
			"  not delivered: 1 (answered 503 Service Unavailable: 1)\n",
			"  left, refused: 1 (", "  left, not due: 1 (", "  left, late: 1 (", "  left, ambiguous: 1 (",
		} {
			if !strings.Contains(fleetSum, want) {
				t.Errorf("the summary lacks %q:\n%s", want, fleetSum)
			}
		}
		if r, fl := lines(rootOut.String(), "", ""), lines(fleetOut, "", ""); !slices.Equal(r, fl) {
			t.Errorf("the lines of stdout differ:\ngrantretry:\n%s\ngrantretry-fleet:\n%s", strings.Join(r, "\n"), strings.Join(fl, "\n"))
		}
		r := lines(rootErr.String(), "grantretry: deadletter: ", "in "+dir)
		fl := lines(fleetErr, "grantretry-fleet: deadletter: ", "in the database")
		if !slices.Equal(r, fl) {
			t.Errorf("the lines of stderr differ:\ngrantretry:\n%s\ngrantretry-fleet:\n%s", strings.Join(r, "\n"), strings.Join(fl, "\n"))
		}
		if want := "TOOL: letter W-6-unavailable (submission GRANT-W-6-unavailable) not redelivered: answered 503 Service Unavailable"; !slices.ContainsFunc(fl, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("stderr lacks %q:\n%s", want, fleetErr)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, l := range scenario {
			want := 0
			if strings.Contains(l.ID, "delivered") || strings.Contains(l.ID, "unavailable") {
				want = 2 // once by each tool
			}
			if f.got[l.IdempotencyKey] != want {
				t.Errorf("%s was sent %d times, want %d", l.ID, f.got[l.IdempotencyKey], want)
			}
		}
	})

	t.Run("HelpOfTheSummaryAndTheExitStatus", func(t *testing.T) {
		out, err := exec.Command(bin, "deadletter", "redeliver", "-help").Output()
		if err != nil {
			t.Fatal(err)
		}
		_, fleetHelp, _ := runCLI("deadletter", "redeliver", "-help")
		for _, part := range []struct{ from, to string }{
			{"\nsummary: ", "\n\n"},
			{"\nExit status: ", "\n\n"},
		} {
			r, fl := section(string(out), part.from, part.to), section(fleetHelp, part.from, part.to)
			if r == "" || r != fl {
				t.Errorf("the help's %q differs:\ngrantretry:\n%s\ngrantretry-fleet:\n%s", part.from, r, fl)
			}
		}
	})
}

// section is text from the first from up to the next to after it, or ""
// if it has none.
func section(text, from, to string) string {
	i := strings.Index(text, from)
	if i < 0 {
		return ""
	}
	j := strings.Index(text[i+len(from):], to)
	if j < 0 {
		return ""
	}
	return text[i : i+len(from)+j]
}
