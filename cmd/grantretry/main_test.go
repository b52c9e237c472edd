package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry/internal/sim"
)

func TestDispatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // a substring of standard output, if not ""
		stderr     string // a substring of standard error, if not ""
		quietOnErr bool   // nothing on standard error
	}{
		{name: "no command", args: nil, code: exitUsage, stderr: "Usage: grantretry <command>"},
		{name: "help", args: []string{"help"}, code: exitOK, stdout: "sim ", quietOnErr: true},
		{name: "-h", args: []string{"-h"}, code: exitOK, stdout: "Commands:", quietOnErr: true},
		{name: "help sim", args: []string{"help", "sim"}, code: exitOK, stdout: "-workers", quietOnErr: true},
		{name: "unknown command", args: []string{"audit-everything"}, code: exitUsage, stderr: `grantretry: unknown command "audit-everything"`},
		{name: "sim -help", args: []string{"sim", "-help"}, code: exitOK, stdout: "Usage: grantretry sim [flags]", quietOnErr: true},
		{name: "sim --help", args: []string{"sim", "--help"}, code: exitOK, stdout: "-throttle", quietOnErr: true},
		{name: "help audit", args: []string{"help", "audit"}, code: exitOK, stdout: "verify", quietOnErr: true},
		{name: "audit verify --help", args: []string{"audit", "verify", "--help"}, code: exitOK, stdout: "FILE", quietOnErr: true},
		{name: "audit no subcommand", args: []string{"audit"}, code: exitUsage, stderr: "grantretry: audit:"},
		{name: "audit missing file", args: []string{"audit", "verify", "/nonexistent/grantretry-trail.jsonl"}, code: exitFailure, stderr: "grantretry: audit:"},
		{name: "help deadletter", args: []string{"help", "deadletter"}, code: exitOK, stdout: "redeliver", quietOnErr: true},
		{name: "deadletter -help", args: []string{"deadletter", "-help"}, code: exitOK, stdout: "list", quietOnErr: true},
		{name: "deadletter list --help", args: []string{"deadletter", "list", "--help"}, code: exitOK, stdout: "DIR", quietOnErr: true},
		{name: "deadletter no subcommand", args: []string{"deadletter"}, code: exitUsage, stderr: "grantretry: deadletter:"},
		{name: "deadletter missing dir", args: []string{"deadletter", "list", "/nonexistent/grantretry-letters"}, code: exitFailure, stderr: "grantretry: deadletter:"},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: ", built with go1.", quietOnErr: true},
		{name: "-version", args: []string{"-version"}, code: exitOK, stdout: "grantretry ", quietOnErr: true},
		{name: "--version", args: []string{"--version"}, code: exitOK, stdout: ", built with go1.", quietOnErr: true},
		{name: "help version", args: []string{"help", "version"}, code: exitOK, stdout: "Usage: grantretry version", quietOnErr: true},
		{name: "help lists version", args: []string{"help"}, code: exitOK, stdout: "\n  version ", quietOnErr: true},
		{name: "version extra", args: []string{"version", "extra"}, code: exitUsage, stderr: `grantretry: version: unexpected argument "extra"`},
		{name: "unknown flag", args: []string{"sim", "-bogus"}, code: exitUsage, stderr: "grantretry: sim: flag provided but not defined: -bogus"},
		{name: "positional argument", args: []string{"sim", "extra"}, code: exitUsage, stderr: `grantretry: sim: unexpected argument "extra"`},
		{name: "bad throttle", args: []string{"sim", "-throttle", "lots"}, code: exitUsage, stderr: "grantretry: sim: invalid value"},
		{name: "bad breaker", args: []string{"sim", "-breaker", "5,soon"}, code: exitUsage, stderr: "grantretry: sim: invalid value"},
		{name: "bad policy", args: []string{"sim", "-policies", "naive,yolo"}, code: exitUsage, stderr: `unknown policy "yolo"`},
		{name: "invalid scenario", args: []string{"sim", "-capacity", "0"}, code: exitUsage, stderr: "grantretry: sim: capacity 0"},
		{name: "unknown scenario", args: []string{"sim", "-scenario", "calm"}, code: exitUsage, stderr: `grantretry: sim: -scenario "calm"`},
		{name: "bad probes", args: []string{"sim", "-scenario", "low-volume", "-probes", "2m,soon"}, code: exitUsage, stderr: "grantretry: sim: invalid value"},
		{name: "probes out of order", args: []string{"sim", "-scenario", "low-volume", "-probes", "2m,1m"}, code: exitUsage, stderr: "probes [2m0s 1m0s]"},
		{name: "low-volume without grantretry", args: []string{"sim", "-scenario", "low-volume", "-policies", "naive"}, code: exitUsage, stderr: "naive is not a grantretry policy"},
		{name: "refill under 1ms of real time", args: []string{"sim", "-throttle-refill", "10ms"}, code: exitUsage, stderr: "throttle refill 10ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr.String())
			}
			if tc.quietOnErr && stderr.Len() > 0 {
				t.Errorf("stderr not empty:\n%s", stderr.String())
			}
		})
	}
}

func TestThrottleAndBreakerFlags(t *testing.T) {
	var stdout bytes.Buffer
	fs := newFlagSet("sim")
	f := newSimFlags(fs, sim.KindOutage)
	err := parseFlags(fs, []string{"-throttle", "20, 0.5", "-breaker", "3,2m"}, simSynopsis, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	if sc := f.sc; !sc.Throttle || sc.MaxTokens != 20 || sc.TokenRatio != 0.5 || !sc.Breaker || sc.Threshold != 3 || sc.Cooldown.Minutes() != 2 {
		t.Errorf("parsed %+v", sc)
	}
	if f.throttle.String() != "20,0.5" || f.breaker.String() != "3,2m0s" {
		t.Errorf("flags print as %q and %q", f.throttle.String(), f.breaker.String())
	}
	if err := parseFlags(fs, []string{"-throttle", "off", "-breaker", "off"}, simSynopsis, &stdout); err != nil {
		t.Fatal(err)
	}
	if f.sc.Throttle || f.sc.Breaker || f.throttle.String() != "off" || f.breaker.String() != "off" {
		t.Errorf("off: throttle %v (%s), breaker %v (%s)", f.sc.Throttle, &f.throttle, f.sc.Breaker, &f.breaker)
	}
}

// -scenario low-volume starts from its own preset, wherever the flag is,
// and the other flags given override it.
func TestLowVolumeFlags(t *testing.T) {
	var stdout bytes.Buffer
	f, err := parseSimFlags([]string{"-seeds", "3", "-scenario", "low-volume", "-probes", "1m, 90m", "-throttle-refill", "100000h"}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	want := sim.LowVolumeDefault()
	want.Seeds, want.Probes, want.Refill = 3, []time.Duration{time.Minute, 90 * time.Minute}, 100000*time.Hour
	if got := f.sc; got.Kind != sim.KindLowVolume || got.Seeds != 3 || got.Workers != want.Workers || got.Run != want.Run ||
		got.Refill != want.Refill || f.probes.String() != "1m0s,1h30m0s" || f.policies != lowVolumePolicies {
		t.Errorf("parsed %+v, policies %q, probes %s; want %+v", got, f.policies, &f.probes, want)
	}
	f, err = parseSimFlags([]string{"-scenario", "low-volume", "-probes", "none"}, &stdout)
	if err != nil || len(f.sc.Probes) != 0 || f.probes.String() != "none" {
		t.Errorf("-probes none: %v, %v", f.sc.Probes, err)
	}
	f, err = parseSimFlags(nil, &stdout)
	if err != nil || f.sc.Kind != sim.KindOutage || f.sc.Refill != time.Minute {
		t.Errorf("no flags: %+v, %v", f.sc, err)
	}
}

// A short low-volume run prints its tables and targets, and writes its
// Markdown and its chart.
func TestSimLowVolumeWritesReports(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "low.md"), filepath.Join(dir, "low.svg")
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "-scenario", "low-volume", "-policies", "default",
		"-run", "12m", "-blip-at", "2m", "-seeds", "2", "-probes", "2m,5m",
		"-md", md, "-svg", svg}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"refused a retry", "got its retry", "Low-volume targets", "wrote " + svg} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(doc), "\n| grantretry defaults |"); n != 1 {
		t.Errorf("the default policy has %d rows in the Markdown, want 1:\n%s", n, doc)
	}
	if !strings.Contains(string(doc), "| 5m0s |") {
		t.Errorf("the Markdown lacks the 5m probe's row:\n%s", doc)
	}
	pic, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(pic, new(struct{})); err != nil {
		t.Errorf("SVG does not parse: %v", err)
	}
}

func TestCommandLineQuotes(t *testing.T) {
	got := commandLine("grantretry sim", []string{"-md", "my report.md", "-svg", "", "-seed", "2"})
	if want := `grantretry sim -md 'my report.md' -svg '' -seed 2`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A short run of two policies prints both tables and the targets, and
// writes a Markdown file with both tables and an SVG that parses.
func TestSimWritesReports(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "run.md"), filepath.Join(dir, "run.svg")
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim",
		"-policies", "naive,default", "-workers", "8", "-capacity", "10",
		"-outage-start", "5s", "-outage", "10s", "-run", "25s", "-scale", "50",
		"-md", md, "-svg", svg}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"naive ", "grantretry defaults ", "dead_letter", "Storm targets", "Recovery target", "recovery lag", "wrote " + md} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "sim: running naive") {
		t.Errorf("no progress on stderr:\n%s", stderr.String())
	}

	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(doc), "\n| grantretry defaults |"); n != 2 {
		t.Errorf("the default policy has %d rows in the Markdown, want 2:\n%s", n, doc)
	}
	if !strings.Contains(string(doc), "`go run ./cmd/grantretry sim -policies naive,default") {
		t.Errorf("the Markdown does not quote the command:\n%s", doc)
	}

	pic, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(pic))
	var lines int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 2 {
		t.Errorf("SVG has %d lines, want 2", lines)
	}
}

// Without -md and -svg the sim writes no file: its report goes to the
// terminal only, no line wider than 100 columns.
func TestSimWritesNoFileUnasked(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "-policies", "default", "-workers", "4", "-capacity", "5",
		"-outage-start", "2s", "-outage", "3s", "-run", "6s", "-scale", "100"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the sim wrote %v (%v) into the current directory unasked", entries, err)
	}
	if strings.Contains(stdout.String(), "wrote ") {
		t.Errorf("the sim says it wrote a file:\n%s", stdout.String())
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("a line of %d columns: %q", n, line)
		}
	}
}

// An output path in a missing directory fails before anything runs.
func TestSimRefusesUnwritableOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "-policies", "default", "-workers", "4", "-capacity", "5",
		"-outage-start", "2s", "-outage", "3s", "-run", "6s", "-scale", "100",
		"-md", filepath.Join(t.TempDir(), "missing", "run.md"), "-svg", ""}, &stdout, &stderr)
	if code != exitFailure || !strings.HasPrefix(stderr.String(), "grantretry: sim: cannot write ") {
		t.Errorf("exit status %d, stderr:\n%s", code, stderr.String())
	}
}

// The synopses of the help are text an operator reads at a terminal: no
// line is wider than 80 columns, and a paragraph's line is broken only
// where its next word would not fit (a line with room for it and 8
// columns to spare reads as a sentence cut in the middle).
func TestHelpSynopsesFitEightyColumnsAndBreakNoSentenceMidLine(t *testing.T) {
	for _, args := range [][]string{
		{"audit", "-help"}, {"audit", "verify", "-help"}, {"audit", "trace", "-help"},
		{"deadletter", "-help"}, {"deadletter", "list", "-help"}, {"deadletter", "show", "-help"},
		{"deadletter", "redeliver", "-help"}, {"deadletter", "retire", "-help"}, {"sim", "-help"}, {"version", "-help"},
	} {
		var stdout bytes.Buffer
		run(args, &stdout, io.Discard)
		synopsis, _, _ := strings.Cut(stdout.String(), "\nFlags:\n")
		name := strings.Join(args, " ")
		lines := strings.Split(synopsis, "\n")
		for i, line := range lines {
			if n := utf8.RuneCountInString(line); n > 80 {
				t.Errorf("%s: a line of %d columns: %q", name, n, line)
			}
			if i+1 == len(lines) || line == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(lines[i+1], " ") {
				continue
			}
			next := strings.Fields(lines[i+1])
			if len(next) > 0 && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(next[0]) <= 72 {
				t.Errorf("%s: %q is broken before %q, which fits on it", name, line, next[0])
			}
		}
	}
}
