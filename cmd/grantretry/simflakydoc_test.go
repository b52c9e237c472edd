package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// flakyDocRun is one command of docs/choosing-budgets.md's flaky-funder
// section and the output the page shows for it.
type flakyDocRun struct {
	args   []string
	output string
}

// flakyDocRuns reads the section's commands, each in a sh block followed
// by a text block of its output.
func flakyDocRuns(t *testing.T) []flakyDocRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "choosing-budgets.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n### A flaky funder\n")
	if start < 0 {
		t.Fatal(`docs/choosing-budgets.md has no "### A flaky funder" section`)
	}
	sec := doc[start+1:]
	if end := strings.Index(sec, "\n## "); end >= 0 {
		sec = sec[:end]
	}
	const prefix = "go run ./cmd/grantretry sim "
	var runs []flakyDocRun
	for {
		i := strings.Index(sec, "```sh\n"+prefix)
		if i < 0 {
			break
		}
		sec = sec[i+len("```sh\n"):]
		line, rest, _ := strings.Cut(sec, "\n")
		j := strings.Index(rest, "```text\n")
		k := strings.Index(rest, "```sh\n")
		if j < 0 || (k >= 0 && k < j) {
			t.Fatalf("%q: no output block follows it", line)
		}
		out := rest[j+len("```text\n"):]
		out, _, _ = strings.Cut(out, "\n```")
		runs = append(runs, flakyDocRun{args: strings.Fields(strings.TrimPrefix(line, prefix)), output: out})
		sec = rest
	}
	return runs
}

// flakyTable splits a flaky report's text into what comes before its
// table, the table's rows by policy (the header first), and what comes
// after it, less the closing line of timings.
func flakyTable(t *testing.T, out string) (head string, rows [][]string, tail string) {
	t.Helper()
	before, rest, ok := strings.Cut(out, "\npolicy ")
	if !ok {
		t.Fatalf("no table in:\n%s", out)
	}
	table, after, _ := strings.Cut("policy "+rest, "\n\n")
	for _, line := range strings.Split(table, "\n") {
		f := strings.Split(strings.Join(strings.Fields(line), " "), " ")
		// The policy's name is every field before the 7 numbers.
		if len(f) < 8 {
			t.Fatalf("table row %q: want a name and 7 columns", line)
		}
		n := len(f) - 7
		rows = append(rows, append([]string{strings.Join(f[:n], " ")}, f[n:]...))
	}
	if i := strings.LastIndex(after, "\nran "); i >= 0 {
		after = after[:i]
	}
	return before, rows, strings.TrimSpace(after)
}

// TestFlakyFunderDoc runs each command of docs/choosing-budgets.md's
// flaky-funder section and checks what the page shows against it: the
// scenario and the key word for word, the policies in order, and each
// row's figures. The simulator runs in real time, so counts differ from
// run to run, and more on a busy machine: a figure the page shows as 0
// must be 0, each disposition's share of the calls must be within 10
// points of the page's, and the requests per call within 0.3.
func TestFlakyFunderDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator for about 20 s")
	}
	runs := flakyDocRuns(t)
	if len(runs) < 3 {
		t.Fatalf("the flaky-funder section shows %d commands with their output, want at least 3", len(runs))
	}
	for _, r := range runs {
		name := strings.Join(r.args, " ")
		var stdout bytes.Buffer
		if err := runSim(r.args, &stdout, io.Discard); err != nil {
			t.Fatalf("sim %s: %v", name, err)
		}
		docHead, docRows, docTail := flakyTable(t, r.output)
		gotHead, gotRows, gotTail := flakyTable(t, stdout.String())
		if docHead != gotHead {
			t.Errorf("sim %s: the page shows the scenario as\n%s\nthe run says\n%s", name, docHead, gotHead)
		}
		if docTail != gotTail {
			t.Errorf("sim %s: the page shows the key as\n%s\nthe run says\n%s", name, docTail, gotTail)
		}
		if len(docRows) != len(gotRows) {
			t.Fatalf("sim %s: the page shows %d rows, the run has %d:\n%s", name, len(docRows), len(gotRows), stdout.String())
		}
		if strings.Join(docRows[0], "|") != strings.Join(gotRows[0], "|") {
			t.Errorf("sim %s: header %q, the run's %q", name, docRows[0], gotRows[0])
		}
		for i := 1; i < len(docRows); i++ {
			checkFlakyRow(t, name, docRows[0], docRows[i], gotRows[i])
		}
	}
}

func checkFlakyRow(t *testing.T, name string, header, doc, got []string) {
	t.Helper()
	if doc[0] != got[0] {
		t.Errorf("sim %s: policy %q on the page, %q in the run", name, doc[0], got[0])
		return
	}
	num := func(row []string, i int) float64 {
		v, err := strconv.ParseFloat(row[i], 64)
		if err != nil {
			t.Fatalf("sim %s, %s: column %s: %v", name, row[0], header[i], err)
		}
		return v
	}
	// How many calls start depends on how well the machine keeps up with
	// the time scale, so the calls are compared as the shares below.
	docCalls, gotCalls := num(doc, 1), num(got, 1)
	for i := 2; i <= 5; i++ { // succeeded, dead_letter, circuit_open, throttled
		d, g := num(doc, i), num(got, i)
		if d == 0 && g != 0 {
			t.Errorf("sim %s, %s: %s %v, the page shows 0", name, doc[0], header[i], g)
		}
		if math.Abs(g/gotCalls-d/docCalls) > 0.1 {
			t.Errorf("sim %s, %s: %s %v of %v calls, the page shows %v of %v", name, doc[0], header[i], g, gotCalls, d, docCalls)
		}
	}
	if d, g := num(doc, 7), num(got, 7); math.Abs(g-d) > 0.3 {
		t.Errorf("sim %s, %s: %v requests per call, the page shows %v", name, doc[0], g, d)
	}
}
