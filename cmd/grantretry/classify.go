package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantsgov"
	"github.com/grantretry/grantretry/internal/operator"
)

const classifySynopsis = `Usage: grantretry classify [-status N] [-header 'Name: value']... [-headers FILE]
                          [-rules FILE] [-classifier none|soap|grantsgov] [-retries N] [-deadline D]
                          [-now TIME] FILE

Prints what grantretry does with a captured answer of a funder: the
verdict, whether the call retries it and after what waits, whether it is
owed (and until when), whether it says an earlier attempt was applied, and
how the call ends. FILE is the answer's body, byte for byte ("-" reads
standard input); -status and -header give its status and headers, or
-headers reads them from a file (curl -D writes one: its last block is
the answer, after any 100 Continue or redirect, and its "HTTP/1.1 403"
line gives the status unless -status is set). With neither, the answer
is judged as a 500, and the output says the status was assumed.

The answer goes through a real Transport, the one a pipeline builds with
the same classifier and budget: the classifier chosen, then the limits
every Transport reads (grantretry.ClassifyLimits), then the status sets.
Its funder answers every attempt with the same answer, as one that keeps
failing would, and its clock does not sleep: the waits are printed, never
slept. The call is made at -now (RFC 3339; default the present): give the
time the answer was captured, so that a Retry-After date in it is read
against that time, as the pipeline read it. -classifier none is a Transport without WithClassifier. -rules
reads a funder's own rules (grantretry.Rule) as JSON, checks them with
grantretry.CheckRules, and asks them first, as
ClassifyFirst(ClassifyRules(rules...), classifier) does:

  [{"Status": 500, "Contains": "System.ArgumentException",
    "Verdict": {"Reason": "asmx:argument"}}]
`

// classifyFlags are the command's flags.
type classifyFlags struct {
	status     int
	header     http.Header
	headers    string
	rules      string
	classifier string
	retries    int
	deadline   time.Duration
	now        time.Time
}

// runClassify is "grantretry classify".
func runClassify(args []string, stdout, _ io.Writer) error {
	f := classifyFlags{header: http.Header{}}
	fs := newFlagSet("classify")
	fs.IntVar(&f.status, "status", 0, "the answer's status (default: the status line of -headers, else 500, said to be assumed)")
	fs.Var(responseHeaderFlag{f.header}, "header", `"Name: value": a header of the answer, such as Retry-After (repeatable)`)
	fs.StringVar(&f.headers, "headers", "", "a file of the answer's headers, one \"Name: value\" a line, as curl -D writes them")
	fs.StringVar(&f.rules, "rules", "", "a JSON file of the funder's own rules (grantretry.Rule), asked before the classifier")
	fs.StringVar(&f.classifier, "classifier", "none", "the WithClassifier function: none, soap (ClassifySOAPFault) or grantsgov (grantsgov.ClassifyFault)")
	fs.IntVar(&f.retries, "retries", grantretry.DefaultMaxRetries, "the budget's retries, as WithBudget")
	fs.DurationVar(&f.deadline, "deadline", grantretry.DefaultDeadline, "the budget's deadline, as WithBudget")
	fs.Func("now", "when the call is made, RFC 3339, such as when the answer was captured (default the present)", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return errors.New("want an RFC 3339 time, such as 2026-12-04T18:00:00Z")
		}
		f.now = t
		return nil
	})
	if err := parseFlagsAndArgs(fs, args, classifySynopsis, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{err: errors.New("give one FILE: the answer's body")}
	}
	fn, ok := classifiers[f.classifier]
	if !ok {
		return usageError{err: fmt.Errorf("-classifier %q: want none, soap or grantsgov", f.classifier)}
	}
	if f.rules != "" {
		rules, err := operator.ReadRules(f.rules)
		if err != nil {
			return fmt.Errorf("-rules: %w", libError{err})
		}
		if fn == nil {
			fn = grantretry.ClassifyRules(rules...)
		} else {
			fn = grantretry.ClassifyFirst(grantretry.ClassifyRules(rules...), fn)
		}
	}
	if f.status != 0 && (f.status < 100 || f.status > 999) {
		return usageError{err: fmt.Errorf("-status %d: not an HTTP status", f.status)}
	}
	a := answer{status: f.status, header: http.Header{}}
	if f.headers != "" {
		if err := a.readHeaders(f.headers); err != nil {
			return err
		}
	}
	for k, vs := range f.header {
		a.header[k] = vs
	}
	if a.status == 0 {
		a.status, a.assumed = 500, true
	}
	var err error
	if a.body, err = readBody(fs.Arg(0)); err != nil {
		return err
	}
	if f.now.IsZero() {
		f.now = time.Now()
	}
	r, err := a.run(fn, f.retries, f.deadline, f.now)
	if err != nil {
		return err
	}
	return r.write(stdout)
}

// classifiers are the functions -classifier names.
var classifiers = map[string]grantretry.ClassifyFunc{
	"none":      nil,
	"soap":      grantretry.ClassifySOAPFault,
	"grantsgov": grantsgov.ClassifyFault,
}

// responseHeaderFlag is -header: "Name: value", added to h.
type responseHeaderFlag struct{ h http.Header }

func (responseHeaderFlag) String() string { return "" }

func (f responseHeaderFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf(`want "Name: value", got %q`, s)
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// answer is the captured answer, which the funder gives every attempt.
type answer struct {
	status  int
	assumed bool // no -status nor status line gave status: it is 500
	header  http.Header
	body    []byte
}

// readHeaders reads a headers file: "Name: value" lines, and perhaps a
// status line first, as curl -D writes them. curl writes every block it
// receives, an interim 100 Continue or a redirect it followed before the
// answer: the last block is the answer's.
func (a *answer) readHeaders(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b = lastHeaderBlock(b)
	// A blank line ends the header block, whether or not the file has one.
	b = append(b, "\r\n\r\n"...)
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(b)))
	if first, _, _ := bytes.Cut(b, []byte("\n")); bytes.HasPrefix(first, []byte("HTTP/")) {
		first, _ := r.ReadLine()
		rest := strings.TrimPrefix(first, "HTTP/")
		_, code, _ := strings.Cut(rest, " ")
		code, _, _ = strings.Cut(code, " ")
		n, err := strconv.Atoi(code)
		if err != nil || n < 100 || n > 999 {
			return fmt.Errorf("%s: status line %q has no status", path, first)
		}
		if a.status == 0 {
			a.status = n
		}
	}
	h, err := r.ReadMIMEHeader()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for k, vs := range h {
		a.header[k] = append(a.header[k], vs...)
	}
	return nil
}

// lastHeaderBlock is the last block of b that holds a line, blocks being
// separated by a blank line (CRLF or LF).
func lastHeaderBlock(b []byte) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	end := len(lines)
	for end > 0 && len(bytes.TrimSpace(lines[end-1])) == 0 {
		end--
	}
	start := end
	for start > 0 && len(bytes.TrimSpace(lines[start-1])) != 0 {
		start--
	}
	return bytes.Join(lines[start:end], nil)
}

// readBody reads FILE, or standard input for "-".
func readBody(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// RoundTrip answers every attempt with the captured answer.
func (a *answer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: a.status, Status: strconv.Itoa(a.status) + " " + http.StatusText(a.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: a.header.Clone(), Body: io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)), Request: r,
	}, nil
}

// stillClock is a Clock that does not sleep: a wait moves it on, and is
// noted.
type stillClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *stillClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stillClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

// verdict is what the run found.
type verdict struct {
	status  int
	assumed bool // the status was given by neither -status nor -headers
	size    int
	applied bool // the classifier's verdict on the answer says an earlier attempt was applied
	out     grantretry.Outcome
	waits   []time.Duration
	start   time.Time // when the call was made, on the Transport's Clock
}

// run sends one call through a Transport whose funder gives the answer
// every time, and reports how it went.
func (a *answer) run(fn grantretry.ClassifyFunc, retries int, deadline time.Duration, now time.Time) (verdict, error) {
	clock := &stillClock{now: now}
	v := verdict{status: a.status, assumed: a.assumed, size: len(a.body), start: clock.now}
	opts := []grantretry.Option{grantretry.WithClock(clock), grantretry.WithBudget(retries, deadline)}
	if fn != nil {
		var mu sync.Mutex
		seen := false
		opts = append(opts, grantretry.WithClassifier(func(resp *http.Response, body []byte) (grantretry.Classification, bool) {
			c, ok := fn(resp, body)
			mu.Lock()
			defer mu.Unlock()
			if ok && !seen {
				seen, v.applied = true, c.Applied
			}
			return c, ok
		}))
	}
	tr := grantretry.New(a, opts...)
	if err := tr.Err(); err != nil {
		return v, usageError{err: err}
	}
	req, err := http.NewRequest(http.MethodPost, "https://funder.invalid/", strings.NewReader("captured"))
	if err != nil {
		return v, err
	}
	resp, err := tr.RoundTrip(req)
	switch {
	case err != nil:
		var e *grantretry.Error
		if !errors.As(err, &e) {
			return v, err
		}
		v.out = e.Outcome
	default:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		v.out, _ = grantretry.OutcomeOf(resp)
	}
	v.waits = clock.waits
	return v, nil
}

// write prints the verdict, one "label: value" a line.
func (v verdict) write(w io.Writer) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	status := strconv.Itoa(v.status)
	if v.assumed {
		status += " (assumed: neither -status nor a status line in -headers gives one)"
	}
	line("answer", "%s, %s", status, countNoun(v.size, "byte"))
	line("verdict", "%s", v.out.Reason)
	line("meaning", "%s", v.meaning())
	switch retries := len(v.waits); {
	case retries == 0:
		line("retried", "no")
	default:
		waits := make([]string, len(v.waits))
		for i, d := range v.waits {
			waits[i] = d.Round(time.Millisecond).String()
		}
		line("retried", "yes, %s, after %s, while the funder gives this answer", countNoun(retries, "time"), strings.Join(waits, ", "))
	}
	switch {
	case v.out.StopReason != grantretry.StopOwedLater:
		line("owed", "no")
	case v.out.NotBefore.IsZero():
		line("owed", "yes, the funder did not say until when")
	default:
		line("owed", "yes, not before %s (in %s)", v.out.NotBefore.UTC().Format(time.RFC3339), v.out.NotBefore.Sub(v.start).Round(time.Second))
	}
	line("applied", "%s", yesNo(v.applied))
	line("ends", "%s (%s) after %s", v.out.Disposition, v.out.StopReason, countNoun(v.out.Attempts, "attempt"))
	_, err := io.WriteString(w, b.String())
	return err
}

// meaning says the verdict in words.
func (v verdict) meaning() string {
	switch {
	case v.out.Disposition == grantretry.Succeeded && v.out.Attempts == 1:
		return "not a failure: the response is the caller's"
	case v.out.StopReason == grantretry.StopOwedLater:
		return "not refused: the funder takes the same request later"
	case strings.HasPrefix(v.out.Reason, "transient:"):
		return "an outage that passes: retried within the call's budget"
	case v.applied:
		return "a refusal that says an earlier attempt was applied"
	}
	return "a refusal: the same request meets this answer again"
}

func yesNo(b bool) string {
	if b {
		return "yes: a refusal on its own, as here; after an attempt that may have been applied, or to the redelivery of an ambiguous letter, the call ends succeeded (already_applied)"
	}
	return "no"
}
