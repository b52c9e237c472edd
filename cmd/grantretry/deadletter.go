package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/grantretry/grantretry/trail"
)

const deadLetterSynopsis = `Usage: grantretry deadletter <subcommand> DIR [ID...] [flags]

Reads and redelivers the dead letters a grantretry Transport wrote into
DIR with WithDeadLetter and a deadletter.Dir: calls that ended
dead_letter or circuit_open, which are work still owed. See
docs/dead-letters.md, the runbook.

Subcommands:
  list DIR [-submission ID]     the letters waiting in DIR, late ones
                                first, then due ones, and what each last
                                got
  show DIR ID                   every field of one letter, waiting,
                                redelivered or retired
  redeliver DIR (ID... | -all | -submission ID) [-rate N/s] [-trail PATH]
                                send letters again, with their own keys,
                                at a pace, on the record of an audit
                                trail; -all sends the letters that are
                                due, not late, not refused and not
                                ambiguous
  retire DIR ID... -reason TEXT [-trail PATH]
                                take letters out for good, with the
                                reason on the record and on an audit trail

Run 'grantretry deadletter <subcommand> -help' for its flags.
`

const dlListSynopsis = `Usage: grantretry deadletter list DIR [-submission ID] [-json]

Lists the letters waiting in DIR (not those redelivered or retired),
then a line that counts them: "N letters waiting in DIR: L late, R
refused, A ambiguous, D not due (next due at T)", leaving out the parts
that are zero.

DUE is "now", or the time before which the funder said it will not take
the letter (its not_before: a quota, a Retry-After past the deadline).
LATE is "late" for a letter that missed its closing time (its due_by,
from WithClosingTime): the funder must agree to take it late. AMBIGUOUS
is "yes" for a letter whose last attempt may have been applied. LAST
ANSWER is the funder's last status ("422 refused" when it refused the
letter, which redeliver -all then leaves), or the last error. The late
letters come first, then the letters due now, each oldest first, then
the others by when they are due.

-submission lists one submission's letters. -json prints them as a JSON
array, without their bodies. A file that is not a valid letter is
reported, not skipped, and makes the command fail after listing the
others.
`

const dlShowSynopsis = `Usage: grantretry deadletter show DIR ID [-body]

Prints every field of letter ID, waiting, redelivered (with the record
of its redelivery) or retired (with who retired it, when and why). The
body is printed if it is text of at most 4096 bytes; otherwise its size
and SHA-256: use -body to write it out.
`

const dlRedeliverSynopsis = `Usage: grantretry deadletter redeliver DIR (ID... | -all | -submission ID)
         [-rate N/s] [-budget RETRIES] [-deadline D] [-concurrency N]
         [-trail PATH] [-rules FILE] [flags]

Sends letters again through a grantretry Transport: same method, URL,
headers, body, Idempotency-Key and X-Correlation-ID. -budget and
-deadline are each letter's retry budget (grantretry.WithBudget);
-timeout bounds each letter's redelivery, by default one minute, or the
-deadline and a quarter more when -deadline is given. -rate paces the
run: at most N sends begin a second ("200/s", "30/m", "600/h", or N a
second), whichever of the -concurrency workers sends them.

The letters sent are those named, or with -all those waiting that are
due, not late, not refused and not ambiguous; -submission ID chooses
among a submission's letters as -all does. Each letter -all leaves gets
a line, and is no failure:

  late: letter ID (submission S) was due by T
  not due: letter ID (submission S) until T
  refused: letter ID (submission S) was last answered 422 ...
  ambiguous: letter ID (submission S): its last attempt may have ...

A late letter (it missed its closing time, its due_by) is sent only with
-late, the explicit choice that the funder takes it late. A letter that
is not due (the funder said it will not take it before its not_before)
is sent only when named with -early. A letter the funder refused (a
terminal answer such as 422) is sent by -all only with -include-refused:
correct the work and send it anew, or retire the letter. A letter whose
last attempt may have been applied ("ambiguous" in show) is sent only
with -trust-key, for a funder that honours Idempotency-Key: this command
cannot ask the funder, so for one that ignores the key, redeliver it
from the pipeline, with deadletter.Redeliver and the pipeline's
reconciler. A letter named that is late, not due or ambiguous is
refused, and the command fails; one named that was refused is sent.

Every redelivery is on the record of the audit trail whose live file is
PATH (the pipeline's, or a new one, created if missing; without -trail,
DIR/redelivered/trail.jsonl): its attempts and disposition, each line
naming the letter ("redelivers"), so that 'grantretry audit trace PATH
-submission ID' shows the call and its redelivery. Only one process at a
time may write a trail: run this while the pipeline that writes PATH is
stopped, or give it a trail of its own. -dry-run writes no trail, sends
nothing, and prints what it would send.

Letters carry no credentials: give them with -header or -header-env,
which are added to every request and never printed. Redirects are not
followed.

A letter is delivered when it is answered 1xx-3xx, or when its outcome
says succeeded (already applied, under -rules): it is moved to
DIR/redelivered with a record of the answer. Any other is left in place
and reported. A letter is marked in flight (DIR/ID.sending) before it is
sent, and a failed redelivery is written into it: its attempts, its
answer, and "ambiguous" when the funder may have applied it. A send that
ends circuit_open (the Transport's breaker for the funder's host is
open) leaves the letters of that host not tried in this run; the others
go on.

-rules reads the funder's own rules (grantretry.Rule, as JSON, as
'grantretry classify -rules' does). An ambiguous letter sent with
-trust-key and answered with one whose verdict is Applied (Simpler
Grants.gov's 403 not_in_progress to an application already submitted) is
delivered, since the funder has it, and its line says "already applied".
The same answer to a letter that is not ambiguous is a refusal.

After the letters' lines comes the summary, in the words
grantretry-fleet uses too (the lines that would count none are left out,
but "delivered"):

` + operator.SummaryHelp + `
SIGINT or SIGTERM stops the run: the letters in flight end and are
recorded on the trail and in their letters, none is begun after, and the
summary ends "stopped: interrupt (SIGINT); the letters not tried stay
waiting". A second signal ends the process at once.

` + operator.ExitStatusHelp

// runDeadLetter runs "grantretry deadletter": list, show, redeliver or
// retire.
func runDeadLetter(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{err: errors.New("missing subcommand: list, show, redeliver or retire")}
	}
	if isHelp(args[0]) {
		io.WriteString(stdout, deadLetterSynopsis)
		return flag.ErrHelp
	}
	switch sub := args[0]; sub {
	case "list":
		return dlUsage(sub, runDLList(args[1:], stdout))
	case "show":
		return dlUsage(sub, runDLShow(args[1:], stdout))
	case "redeliver":
		return dlUsage(sub, runDLRedeliver(args[1:], stdout, stderr))
	case "retire":
		return dlUsage(sub, runDLRetire(args[1:], stdout, stderr))
	}
	return usageError{err: fmt.Errorf("unknown subcommand %q: want list, show, redeliver or retire", args[0])}
}

// dlUsage points a usage error of the subcommand sub at its own help,
// which lists its flags, rather than at the command's.
func dlUsage(sub string, err error) error {
	var oerr operator.UsageError
	if errors.As(err, &oerr) {
		return usageError{err: oerr.Err, help: "deadletter " + sub}
	}
	var uerr usageError
	if !errors.As(err, &uerr) || uerr.help != "" {
		return err
	}
	return usageError{err: uerr.err, help: "deadletter " + sub}
}

// parseArgs parses args into fs like parseFlags, but also accepts
// positional arguments before, between and after the flags, and returns
// them in order.
func parseArgs(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			return nil, parseFlags(fs, []string{"-help"}, synopsis, stdout)
		}
		if err != nil {
			return nil, usageError{err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// libError is an error of the library, whose messages start with
// "grantretry: " as run's own prefix does, and may quote another such
// message after a colon (an *url.Error, a wrapped cause): it drops every
// prefix but run's.
type libError struct{ err error }

func (e libError) Error() string {
	msg := strings.ReplaceAll("\n"+e.err.Error(), "\ngrantretry: ", "\n")[1:]
	return strings.ReplaceAll(msg, ": grantretry: ", ": ")
}

func (e libError) Unwrap() error { return e.err }

// openLetters opens an existing dead letter directory for reading only,
// changing nothing in it, so list, show and a dry run work on a read-only
// copy such as an auditor's or a backup.
func openLetters(dir string) (*deadletter.Dir, error) {
	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		return nil, libError{err}
	}
	return d, nil
}

// openLettersToWrite opens an existing dead letter directory to mark
// letters redelivered; unlike deadletter.Open it does not create a
// mistyped one.
func openLettersToWrite(dir string) (*deadletter.Dir, error) {
	if _, err := openLetters(dir); err != nil {
		return nil, err
	}
	d, err := deadletter.Open(dir)
	if err != nil {
		return nil, libError{err}
	}
	return d, nil
}

func runDLList(args []string, stdout io.Writer) error {
	fs := newFlagSet("deadletter list")
	var o operator.ListOptions
	fs.BoolVar(&o.JSON, "json", false, "print the letters as a JSON array, without their bodies")
	fs.StringVar(&o.Submission, "submission", "", "list the letters of submission `ID` only")
	pos, err := parseArgs(fs, args, dlListSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{err: errors.New("list wants one directory")}
	}
	d, err := openLetters(pos[0])
	if err != nil {
		return err
	}
	return wrapLib(operator.List(context.Background(), stdout, operator.DirStore{Dir: d}, o))
}

func runDLShow(args []string, stdout io.Writer) error {
	fs := newFlagSet("deadletter show")
	rawBody := fs.Bool("body", false, "write the raw body to standard output, and nothing else")
	pos, err := parseArgs(fs, args, dlShowSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{err: errors.New("show wants a directory and one letter id")}
	}
	d, err := openLetters(pos[0])
	if err != nil {
		return err
	}
	return wrapLib(operator.Show(context.Background(), stdout, operator.DirStore{Dir: d}, pos[1], *rawBody))
}

func wrapLib(err error) error {
	if err == nil {
		return nil
	}
	return libError{err}
}

// defaultRedeliveryTrail is the live file, in the letter directory's
// RedeliveredDir, of the trail that records redeliveries when -trail names
// none: every redelivery is on the record of some trail.
const defaultRedeliveryTrail = "trail.jsonl"

func runDLRedeliver(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deadletter redeliver")
	var f operator.RedeliverFlags
	f.Register(fs, "in DIR")
	trailPath := fs.String("trail", "", "the live file of the audit trail that records the redeliveries (default DIR/redelivered/"+defaultRedeliveryTrail+")")
	pos, err := parseArgs(fs, args, dlRedeliverSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{err: errors.New("redeliver wants a directory, then letter ids or -all")}
	}
	if err := f.Check(pos[1:]); err != nil {
		return wrapLib(err)
	}
	open := openLettersToWrite
	if f.DryRun {
		open = openLetters
	}
	d, err := open(pos[0])
	if err != nil {
		return err
	}
	r := &operator.Run{
		Store: operator.DirStore{Dir: d}, Flags: &f, IDs: pos[1:],
		Stdout: stdout, Stderr: stderr, Prefix: "grantretry: deadletter: ", AskWith: "deadletter.Redeliver",
	}
	if f.DryRun {
		_, err := r.Redeliver(context.Background())
		return wrapLib(err)
	}
	// A signal stops the run after the letters in flight, recorded on the
	// trail and in the directory; a second one ends the process at once,
	// which leaves those letters marked in flight (ambiguous).
	ctx, stop := operator.SignalContext(context.Background())
	defer stop()
	if *trailPath == "" {
		*trailPath = filepath.Join(d.Path(), deadletter.RedeliveredDir, defaultRedeliveryTrail)
		fmt.Fprintf(stderr, "recording the redeliveries on the audit trail %s (-trail names another)\n", *trailPath)
	}
	tl, err := openTrail(*trailPath)
	if err != nil {
		return err
	}
	client, closeIdle := f.NewClient(tl)
	r.Client, r.Note = client, operator.DirNote(*trailPath)
	_, err = r.Redeliver(ctx)
	closeIdle()
	err = wrapLib(err)
	if cerr := tl.Close(); cerr != nil {
		err = errors.Join(err, libError{fmt.Errorf("the audit trail %s: %w", *trailPath, cerr)})
	}
	return err
}

// openTrail opens the audit trail whose live file is path, creating it if
// there is none, but never takes a file that is not a trail for one:
// opening would take its last line for a torn record and cut it.
func openTrail(path string) (*trail.Trail, error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		var te *trail.Error
		if _, err := trail.Verify(path); errors.As(err, &te) && te.NotTrail {
			return nil, fmt.Errorf("-trail %s is not an audit trail: its first line is not a trail record (seq, prev, hash); give the live file of a trail, or a new file", path)
		}
	}
	tl, err := trail.Open(path, trail.Options{})
	if err != nil {
		return nil, libError{err}
	}
	return tl, nil
}

const dlRetireSynopsis = `Usage: grantretry deadletter retire DIR ID... -reason TEXT [-by NAME]
                                  [-trail PATH]

Takes the waiting letters ID out of DIR for good: a letter the funder
refused for good, or work the applicant withdrew, which must not be sent
again. Nothing is deleted: each letter is kept, inside the record of who
retired it, when and why, in DIR/retired/ID.json, and list, redeliver and
the pipeline pass it over.

Each retirement is on the record of the audit trail whose live file is
PATH (the pipeline's, or a new one, created if missing; without -trail,
DIR/redelivered/trail.jsonl, as redeliver's): a grantretry.retired line
naming the letter, who and why, so that 'grantretry audit trace PATH
-submission ID' ends with it. Only one process at a time may write a
trail: run this while the pipeline that writes PATH is stopped, or give it
a trail of its own.

-reason is required. Each letter gets a line, "retired: letter ID
(submission S): REASON" or "not retired: letter ID: why" (no such waiting
letter, one a redelivery is sending, one retired already), which does not
stop the others; then "retired N of M letters". The command exits 0 when
every letter was retired, 1 when some were not, and 2, retiring none, when
it is called wrongly.
`

func runDLRetire(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("deadletter retire")
	reason := flags.String("reason", "", "why the letters must not be sent again, for the record (required)")
	by := flags.String("by", deadletter.DefaultRetiredBy(), "who retires them, as the record and the audit line say it")
	trailPath := flags.String("trail", "", "the live file of the audit trail that records the retirements (default DIR/redelivered/"+defaultRedeliveryTrail+")")
	pos, err := parseArgs(flags, args, dlRetireSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{err: errors.New("retire wants a directory, then letter ids")}
	}
	if err := operator.CheckRetire(pos[1:], *reason); err != nil {
		return err
	}
	d, err := openLettersToWrite(pos[0])
	if err != nil {
		return err
	}
	if *trailPath == "" {
		*trailPath = filepath.Join(d.Path(), deadletter.RedeliveredDir, defaultRedeliveryTrail)
		fmt.Fprintf(stderr, "recording the retirements on the audit trail %s (-trail names another)\n", *trailPath)
	}
	tl, err := openTrail(*trailPath)
	if err != nil {
		return err
	}
	opts := deadletter.RetireOptions{By: *by, Trail: tl}
	err = operator.RetireFrom(context.Background(), stdout, stderr, operator.DirStore{Dir: d}, pos[1:], *reason, opts)
	if cerr := tl.Close(); cerr != nil {
		err = errors.Join(err, libError{fmt.Errorf("the audit trail %s: %w", *trailPath, cerr)})
	}
	return err
}
