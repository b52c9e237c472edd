package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/grantretry/grantretry/trail"
)

const auditSynopsis = `Usage: grantretry audit verify FILE...
       grantretry audit trace FILE...
           (-correlation ID | -submission ID | -key KEY)

Reads an audit trail written by grantretry's trail package: its live file,
its rotated files (FILE.000001 and on) and its head file (FILE.head), given
in any order; a glob such as trail.jsonl* gives them all. Flags may come
before or after the files.

  verify   checks the hash chain across the files and prints "ok" with the
           counts and the last hash (keep it outside the trail), or names
           the first broken record and what is wrong with it, and exits 1.
  trace    verifies the chain, then prints every logical call that matches:
           its ids, request and payload hash, one row per attempt, and the
           final disposition. A redelivered dead letter is a call of
           its own, after the one that left it, and names the letter.

Run 'grantretry audit verify -help' or 'grantretry audit trace -help' for
more; docs/audit-trail.md describes the records.
`

const auditVerifySynopsis = `Usage: grantretry audit verify FILE...

Checks the hash chain of an audit trail across its files: every record's
hash, that each follows the one before (seq and prev), that the trail starts
at seq 1, and that it reaches the last record its head file says was synced.
Prints "ok: N records in M files, seq A..B, last hash H" and the counts, or
names the first broken record and exits 1.
`

const auditTraceSynopsis = `Usage: grantretry audit trace FILE...
           (-correlation ID | -submission ID | -key KEY)

Verifies the trail, then reconstructs every logical call that matches
the one selector given, in the time order of their first records, each
call's records together: its ids, the request (method, host, path) and
payload hash, a table with one row per attempt (time, status, verdict,
wait, latency, error) and the final disposition, with the funder's time
(not before) of a call that ended owed_later, and the closing time (due
by) of a call made under one and whether it was late. A dead letter sent
again (grantretry deadletter redeliver, or deadletter.Redeliver through
a Transport with the same trail) is a call of its own, after the call
that left the letter, and says which letter it redelivers, even when it
began before that call's disposition was written. A dead letter retired
with its line on the trail (grantretry.retired) shows as a retirement,
in its time order: after the calls of the letter it ends. Text from a
funder or a caller is shown with its control characters escaped (\x1b),
never as they are. Exits 1 if no call matches or the chain is broken
(the calls read before the break are still printed).
`

// runAudit runs "grantretry audit": verify or trace.
func runAudit(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{err: errors.New("missing subcommand: verify or trace")}
	}
	switch sub := args[0]; {
	case isHelp(sub):
		io.WriteString(stdout, auditSynopsis)
		return flag.ErrHelp
	case sub == "verify":
		return subUsage(sub, auditVerify(args[1:], stdout))
	case sub == "trace":
		return subUsage(sub, auditTrace(args[1:], stdout))
	default:
		return usageError{err: fmt.Errorf("unknown subcommand %q: verify or trace", sub)}
	}
}

// subUsage names the subcommand, and its help, in a usage error: run's
// hint names only the command's help, which does not list trace's flags.
func subUsage(sub string, err error) error {
	var uerr usageError
	if !errors.As(err, &uerr) {
		return err
	}
	return usageError{err: fmt.Errorf("%s: %w", sub, uerr.err), help: "audit " + sub}
}

// parseFiles parses flags wherever they are among the file arguments (Go's
// flag package stops at the first non-flag) and returns the files, at
// least one. On -help it prints synopsis and the flags and returns
// flag.ErrHelp.
func parseFiles(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) ([]string, error) {
	var files []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(fs, synopsis, stdout)
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, usageError{err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			files = append(files, rest...)
			break
		}
		files, args = append(files, rest[0]), rest[1:]
	}
	if len(files) == 0 {
		return nil, usageError{err: errors.New("no trail file given")}
	}
	return files, nil
}

func printHelp(fs *flag.FlagSet, synopsis string, stdout io.Writer) {
	io.WriteString(stdout, synopsis)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		io.WriteString(stdout, "\nFlags:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func auditVerify(args []string, stdout io.Writer) error {
	files, err := parseFiles(newFlagSet("audit verify"), args, auditVerifySynopsis, stdout)
	if err != nil {
		return err
	}
	sum, err := trail.Verify(files...)
	if err != nil {
		return trailFailure("verify", err, sum)
	}
	writeSummary(stdout, sum)
	return nil
}

// trailFailure is the command's error for a trail that could not be read or
// does not verify, without the library's prefix, which run's already says.
func trailFailure(sub string, err error, sum trail.Summary) error {
	var te *trail.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &te) && te.NotTrail:
		return fmt.Errorf("%s: %s is not an audit trail: its first line is not a trail record (seq, prev, hash)", sub, te.File)
	case errors.As(err, &te):
		return fmt.Errorf("%s: %s: %s (%s before it verify)", sub, te.Position(), te.Problem, countNoun(sum.Records, "record"))
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", sub, pe)
	}
	return fmt.Errorf("%s: %w", sub, err)
}

// writeSummary prints a verified trail's summary.
func writeSummary(w io.Writer, sum trail.Summary) {
	fmt.Fprintf(w, "ok: %s in %s, seq %d..%d, last hash %s\n",
		countNoun(sum.Records, "record"), countNoun(len(sum.Files), "file"), sum.FirstSeq, sum.LastSeq, sum.LastHash)
	names := make([]string, len(sum.Files))
	for i, f := range sum.Files {
		names[i] = filepath.Base(f)
	}
	fmt.Fprintf(w, "files: %s\n", strings.Join(names, " "))
	if sum.HeadSeq > 0 {
		fmt.Fprintf(w, "head: seq %d synced\n", sum.HeadSeq)
	} else {
		fmt.Fprintln(w, "head: none found (a truncated tail would go unnoticed)")
	}
	fmt.Fprintf(w, "records: %s\n", countList(sum.Messages))
	fmt.Fprintf(w, "dispositions: %s\n", countList(sum.Dispositions))
}

// countList lists a count map as "a 3, b 1", by key.
func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// traceFlags are the trace selectors; exactly one is given.
type traceFlags struct {
	correlation, submission, key string
}

func newTraceFlags(fs *flag.FlagSet) *traceFlags {
	f := &traceFlags{}
	fs.StringVar(&f.correlation, "correlation", "", "the call's correlation id (X-Correlation-ID)")
	fs.StringVar(&f.submission, "submission", "", "a submission id: every call made for it")
	fs.StringVar(&f.key, "key", "", "an Idempotency-Key: every call that carried it")
	return f
}

// selector returns the field to match and its value.
func (f *traceFlags) selector() (field, value string, err error) {
	var given []string
	for _, s := range []struct{ name, field, value string }{
		{"-correlation", grantretry.FieldCorrelationID, f.correlation},
		{"-submission", grantretry.FieldSubmissionID, f.submission},
		{"-key", grantretry.FieldIdempotencyKey, f.key},
	} {
		if s.value != "" {
			given = append(given, s.name)
			field, value = s.field, s.value
		}
	}
	if len(given) != 1 {
		return "", "", usageError{err: fmt.Errorf("give exactly one of -correlation, -submission, -key (got %d)", len(given))}
	}
	return field, value, nil
}

func auditTrace(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit trace")
	f := newTraceFlags(fs)
	files, err := parseFiles(fs, args, auditTraceSynopsis, stdout)
	if err != nil {
		return err
	}
	field, value, err := f.selector()
	if err != nil {
		return err
	}
	calls := &traceCalls{byID: map[callID]*tracedCall{}}
	sum, err := trail.Read(files, calls.collect(field, value))
	switch {
	case err != nil && (len(calls.order) == 0 || !errors.As(err, new(*trail.Error))):
		return trailFailure("trace", err, sum)
	case err != nil:
		calls.write(stdout)
		fmt.Fprintln(stdout, "\nWARNING: the chain is broken; only the records before the break are shown")
		return trailFailure("trace", err, sum)
	case len(calls.order) == 0:
		return fmt.Errorf("trace: no call with %s %q in %s", field, value, countNoun(sum.Records, "record"))
	}
	fmt.Fprintf(stdout, "chain verified: %s in %s, seq %d..%d\n",
		countNoun(sum.Records, "record"), countNoun(len(sum.Files), "file"), sum.FirstSeq, sum.LastSeq)
	calls.write(stdout)
	return nil
}

// tracedCall is one logical call's records.
type tracedCall struct {
	first       trail.Record // the call's first record
	attempts    []trail.Record
	disposition *trail.Record
	retired     bool // first is a retirement line, not a call's record
}

// traceCalls gathers the matching records by call: by correlation id,
// and by the letter a redelivery sends again (FieldRedelivers). A
// redelivered dead letter keeps its correlation id, and a worker may send
// it again before the call that left it has written its disposition (the
// letter is kept first): its records are a call of their own, not the
// first call's. A call ends with its disposition record: a later record
// of the same id starts another call (a second redelivery of the letter,
// or a caller reusing its own correlation id).
type traceCalls struct {
	byID  map[callID]*tracedCall // the open call of each id
	order []*tracedCall
}

// callID tells the calls of a trail apart.
type callID struct{ correlation, redelivers string }

func (c *traceCalls) collect(field, value string) func(trail.Record) error {
	return func(r trail.Record) error {
		switch r.Msg {
		case grantretry.MsgAttempt, grantretry.MsgReconcile, grantretry.MsgDisposition:
		case grantretry.MsgRetired:
			if rawText(r.Fields[field]) == value {
				c.order = append(c.order, &tracedCall{first: r, retired: true})
			}
			return nil
		default:
			return nil
		}
		if rawText(r.Fields[field]) != value {
			return nil
		}
		id := callID{rawText(r.Fields[grantretry.FieldCorrelationID]), rawText(r.Fields[grantretry.FieldRedelivers])}
		tc := c.byID[id]
		if tc == nil || tc.disposition != nil {
			tc = &tracedCall{first: r}
			c.byID[id] = tc
			c.order = append(c.order, tc)
		}
		if r.Msg == grantretry.MsgDisposition {
			tc.disposition = &r
		} else {
			tc.attempts = append(tc.attempts, r)
		}
		return nil
	}
}

// write prints every call and retirement, in the time order of their
// first records.
func (c *traceCalls) write(w io.Writer) {
	slices.SortStableFunc(c.order, func(a, b *tracedCall) int { return a.first.Time.Compare(b.first.Time) })
	calls := 0
	for _, tc := range c.order {
		if !tc.retired {
			calls++
		}
	}
	i := 0
	for _, tc := range c.order {
		if tc.retired {
			fmt.Fprintf(w, "\nretired\n")
			tc.writeRetired(w)
			continue
		}
		i++
		fmt.Fprintf(w, "\ncall %d of %d\n", i, calls)
		tc.write(w)
	}
}

// writeRetired prints a retirement line: the letter, its ids and
// request, and who retired it, when and why.
func (tc *tracedCall) writeRetired(w io.Writer) {
	r := tc.first
	f := r.Fields
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  dead letter\t%s\n", fieldText(f[grantretry.FieldDeadLetterID]))
	fmt.Fprintf(tw, "  correlation id\t%s\n", fieldText(f[grantretry.FieldCorrelationID]))
	fmt.Fprintf(tw, "  submission id\t%s\n", noneIfEmpty(fieldText(f[grantretry.FieldSubmissionID])))
	fmt.Fprintf(tw, "  idempotency key\t%s\n", noneIfEmpty(fieldText(f[grantretry.FieldIdempotencyKey])))
	fmt.Fprintf(tw, "  request\t%s %s %s\n", fieldText(f[grantretry.FieldMethod]), fieldText(f[grantretry.FieldHost]), fieldText(f[grantretry.FieldPath]))
	fmt.Fprintf(tw, "  retired\tat %s by %s\n", r.Time.Format(traceTime), fieldText(f[grantretry.FieldRetiredBy]))
	fmt.Fprintf(tw, "  reason\t%s\n", fieldText(f[grantretry.FieldRetiredReason]))
	fmt.Fprintf(tw, "  record\t%s line %d, seq %d\n", filepath.Base(r.File), r.Line, r.Seq)
	tw.Flush()
}

const traceTime = "2006-01-02T15:04:05.000000Z07:00"

func (tc *tracedCall) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	f := tc.first.Fields
	if id := fieldText(f[grantretry.FieldRedelivers]); id != "" {
		fmt.Fprintf(tw, "  redelivers\tdead letter %s\n", id)
	}
	fmt.Fprintf(tw, "  correlation id\t%s\n", fieldText(f[grantretry.FieldCorrelationID]))
	fmt.Fprintf(tw, "  submission id\t%s\n", noneIfEmpty(fieldText(f[grantretry.FieldSubmissionID])))
	fmt.Fprintf(tw, "  idempotency key\t%s\n", noneIfEmpty(fieldText(f[grantretry.FieldIdempotencyKey])))
	fmt.Fprintf(tw, "  request\t%s %s %s\n", fieldText(f[grantretry.FieldMethod]), fieldText(f[grantretry.FieldHost]), fieldText(f[grantretry.FieldPath]))
	fmt.Fprintf(tw, "  payload\t%s\n", tc.payload())
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tATTEMPT\tSTATUS\tREASON\tRETRYABLE\tWAIT\tWAIT SOURCE\tLATENCY\tERROR")
	for _, a := range tc.attempts {
		af := a.Fields
		if a.Msg == grantretry.MsgReconcile {
			// A question to the reconciler about the attempt before it.
			fmt.Fprintf(tw, "  %s	asked	%s	reconcile:%s	-	-	-	%s	%s\n", a.Time.Format(traceTime),
				fieldText(af[grantretry.FieldStatus]), fieldText(af[grantretry.FieldVerdict]),
				fieldText(af[grantretry.FieldLatency]), dashIfEmpty(fieldText(af[grantretry.FieldError])))
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Time.Format(traceTime),
			fieldText(af[grantretry.FieldAttempt]), fieldText(af[grantretry.FieldStatus]), fieldText(af[grantretry.FieldReason]),
			fieldText(af[grantretry.FieldRetryable]), fieldText(af[grantretry.FieldWait]), dashIfEmpty(fieldText(af[grantretry.FieldWaitSource])),
			fieldText(af[grantretry.FieldLatency]), dashIfEmpty(fieldText(af[grantretry.FieldError])))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tc.writeDisposition(w)
}

func (tc *tracedCall) payload() string {
	if tc.disposition == nil {
		return "not recorded (no disposition)"
	}
	f := tc.disposition.Fields
	size, sum := fieldText(f[grantretry.FieldPayloadBytes]), fieldText(f[grantretry.FieldPayloadSHA256])
	if sum == "" {
		s := "not read"
		if why := fieldText(f[grantretry.FieldNotReplayable]); why != "" {
			s += " (" + why + ")"
		}
		return s
	}
	return "sha256 " + sum + ", " + size + " bytes"
}

func (tc *tracedCall) writeDisposition(w io.Writer) {
	if tc.disposition == nil {
		fmt.Fprintln(w, "  disposition: none recorded; the trail ends before the call did (a crash?)")
		return
	}
	d := tc.disposition
	f := d.Fields
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  disposition\t%s at %s\n", fieldText(f[grantretry.FieldDisposition]), d.Time.Format(traceTime))
	fmt.Fprintf(tw, "  stop reason\t%s\n", fieldText(f[grantretry.FieldStopReason]))
	fmt.Fprintf(tw, "  attempts\t%s\n", fieldText(f[grantretry.FieldAttempts]))
	if n := fieldText(f[grantretry.FieldReconciles]); n != "" && n != "0" {
		fmt.Fprintf(tw, "  reconciles\t%s\n", n)
	}
	if fieldText(f[grantretry.FieldAmbiguous]) == "true" {
		fmt.Fprintf(tw, "  ambiguous\tthe last attempt may have been applied\n")
	}
	fmt.Fprintf(tw, "  elapsed\t%s\n", fieldText(f[grantretry.FieldElapsed]))
	fmt.Fprintf(tw, "  last status\t%s (%s)\n", fieldText(f[grantretry.FieldStatus]), fieldText(f[grantretry.FieldReason]))
	writeOwedTimes(tw, f)
	for _, k := range []string{grantretry.FieldError, grantretry.FieldDeadLetterID, grantretry.FieldRecordError} {
		if v := fieldText(f[k]); v != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.ReplaceAll(k, "_", " "), v)
		}
	}
	fmt.Fprintf(tw, "  record\t%s line %d, seq %d\n", filepath.Base(d.File), d.Line, d.Seq)
	tw.Flush()
}

// writeOwedTimes prints the times of a disposition that has them: the
// funder's NotBefore of a call that ended owed_later, and the closing time
// of a call made under one, with whether it was late.
func writeOwedTimes(w io.Writer, f map[string]any) {
	if nb, ok := f[grantretry.FieldNotBefore]; ok {
		fmt.Fprintf(w, "  not before\t%s\n", notSaid(fieldText(nb)))
	}
	if due, ok := f[grantretry.FieldDueBy]; ok {
		fmt.Fprintf(w, "  due by\t%s\n", fieldText(due))
	}
	if late, ok := f[grantretry.FieldLate]; ok {
		what := "no"
		if rawText(late) == "true" {
			what = "yes: the work is still owed after its closing time"
		}
		fmt.Fprintf(w, "  late\t%s\n", what)
	}
}

// notSaid is s, the funder's NotBefore, or what its absence means.
func notSaid(s string) string {
	if s == "" {
		return "not said by the funder (a quota: one call probes per probe interval)"
	}
	return s
}

// fieldText renders a field value as the record has it, safe on a
// terminal: a funder's or a caller's text may hold escape sequences.
func fieldText(v any) string { return operator.EscapeControl(rawText(v)) }

// rawText is a field value as the record has it, as text.
func rawText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
