package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/grantretry/grantretry/trail"
)

const deadLetterSynopsis = `Usage: grantretry deadletter <subcommand> DIR [ID...] [flags]

Reads and redelivers the dead letters a grantretry Transport wrote into DIR
with WithDeadLetter and a deadletter.Dir: calls that ended dead_letter or
circuit_open, which are work still owed. See docs/dead-letters.md.

Subcommands:
  list DIR                      the letters waiting in DIR, late ones first,
                                then due ones
  show DIR ID                   every field of one letter
  redeliver DIR (ID... | -all) [-trail PATH]
                                send letters again, with their own keys,
                                on the record of an audit trail; -all
                                sends the letters that are due and not
                                late
  retire DIR ID... -reason TEXT [-trail PATH]
                                take letters out for good, with the reason
                                on the record and on an audit trail

Run 'grantretry deadletter <subcommand> -help' for its flags.
`

const dlListSynopsis = `Usage: grantretry deadletter list DIR [flags]

Lists the letters waiting in DIR (not those redelivered), and their count.
DUE is "now", or the time before which the funder said it will not take
the letter (its not_before: a quota, a Retry-After past the deadline). LATE
is "late" for a letter that missed its closing time (its due_by, from
WithClosingTime): the funder must agree to take it late. The late letters
come first, then the letters due now, each oldest first, then the others by
when they are due. A file that is not a valid letter is reported, not
skipped, and makes the command fail after listing the others.
`

const dlShowSynopsis = `Usage: grantretry deadletter show DIR ID [flags]

Prints every field of letter ID, waiting or redelivered (with the record of
its redelivery). The body is printed if it is text of at most 4096 bytes;
otherwise its size and SHA-256: use -body to write it out.
`

const dlRedeliverSynopsis = `Usage: grantretry deadletter redeliver DIR (ID... | -all) [-trail PATH]
                                     [-rules FILE] [flags]

Sends letters again, one after another, through a grantretry Transport with
the default policy: same method, URL, headers, body, Idempotency-Key and
X-Correlation-ID.

Every redelivery is on the record of the audit trail whose live file is
PATH (the pipeline's, or a new one, created if missing; without -trail,
DIR/redelivered/trail.jsonl): its attempts and disposition, each line naming
the letter ("redelivers"), so that 'grantretry audit trace PATH -submission
ID' shows the call and its redelivery. Only one process at a time may write
a trail: run this while the pipeline that writes PATH is stopped, or give it
a trail of its own. -dry-run writes no trail.

A funder that honours the key and already applied a letter answers with its
first result instead of applying it twice; one that ignores the key applies
it again.

Letters carry no credentials: give them with -header or -header-env, which
are added to every request and never printed. Redirects are not followed.

A letter is delivered when it is answered 1xx-3xx, or when its outcome says
succeeded (already applied, under -rules): it is moved to DIR/redelivered
with a record of the answer. Any other is left in place and reported, and
the command fails. A letter is marked in flight (DIR/ID.sending) before it
is sent, and a failed redelivery is written into it: its attempts, its
answer, and "ambiguous" when the funder may have applied it.

-rules reads the funder's own rules (grantretry.Rule, as JSON, as
'grantretry classify -rules' does). An ambiguous letter, which this command
sends only with -trust-key (the pipeline's deadletter.Redeliver sends one
after its reconciler says the funder does not have it: see below), answered
with one whose verdict is Applied (Simpler Grants.gov's 403 not_in_progress
to an application already submitted) is delivered, since the funder has it:
it is moved to DIR/redelivered, and its line says "already applied". The
same answer to a letter that is not ambiguous is a refusal.

SIGINT or SIGTERM stops the run after the letter in flight, whose attempt
is recorded on the trail and in the letter; the letters not tried are
listed, and the command fails.

A letter whose last attempt was ambiguous (it may have been applied, and no
answer said it was not: "ambiguous" in deadletter show) is not sent: for a
funder that ignores Idempotency-Key, sending it could apply it twice, and
this command cannot ask the funder. Nor does it send again, without
-trust-key, an attempt of its own that may have been applied. Redeliver
such letters from the pipeline, with deadletter.Redeliver and the
pipeline's reconciler, which asks the funder first; or, for a funder that
honours the key, pass -trust-key.

A letter that is not due (the funder said it will not take it before its
not_before: a quota, a Retry-After past the deadline) is not sent: -all
leaves it, printing "not due: letter ID (submission S) until T", and does
not count it a failure; a letter named by ID is refused, and the command
fails, unless -early says to send the named letters now anyway.

A letter that is late (it missed its closing time, its due_by) is not sent
without -late, the explicit choice that the funder takes it late: -all
leaves it, printing "late: letter ID (submission S) was due by T", and does
not count it a failure; a letter named by ID is refused, and the command
fails. -late sends late letters, named or with -all.
`

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
	asJSON := fs.Bool("json", false, "print the letters as a JSON array, without their bodies")
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
	letters, listErr := d.List()
	operator.SortByDue(letters, time.Now())
	if *asJSON {
		err = writeLettersJSON(stdout, letters)
	} else {
		err = writeLetterTable(stdout, letters, pos[0])
	}
	if listErr != nil {
		return libError{listErr}
	}
	return err
}

func writeLettersJSON(w io.Writer, letters []*grantretry.Letter) error {
	out := make([]grantretry.Letter, 0, len(letters))
	for _, l := range letters {
		c := *l
		c.Body = nil
		out = append(out, c)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeLetterTable(w io.Writer, letters []*grantretry.Letter, dir string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(letters) > 0 {
		fmt.Fprintln(tw, "ID\tSUBMISSION\tDUE\tLATE\tCREATED\tDISPOSITION\tSTOP REASON\tMETHOD\tURL\tATTEMPTS\tLAST\tBODY")
	}
	now := time.Now()
	for _, l := range letters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", l.ID, operator.EscapeControl(cmp.Or(l.SubmissionID, "-")), operator.DueAt(l, now), operator.LateMark(l, now), showTime(l.Created), l.Disposition,
			l.StopReason, operator.EscapeControl(l.Method), operator.EscapeControl(l.URL), l.Attempts, operator.EscapeControl(lastOutcome(l)), bodySize(l))
	}
	fmt.Fprintf(tw, "%s in %s\n", countNoun(len(letters), "letter"), dir)
	return tw.Flush()
}

func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// lastOutcome is the last attempt's status, or its error cut to 40
// characters.
func lastOutcome(l *grantretry.Letter) string {
	switch {
	case l.LastStatus != 0:
		return strconv.Itoa(l.LastStatus)
	case l.LastError == "":
		return "-"
	case len(l.LastError) > 40:
		return l.LastError[:37] + "..."
	}
	return l.LastError
}

func bodySize(l *grantretry.Letter) string {
	if l.BodyOmitted != "" {
		return "omitted"
	}
	return strconv.FormatInt(l.BodyBytes, 10)
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
	l, rec, err := findLetter(d, pos[1])
	if err != nil {
		return err
	}
	if *rawBody {
		if l.BodyOmitted != "" {
			return fmt.Errorf("letter %s: its body was not kept (%s)", l.ID, l.BodyOmitted)
		}
		_, err := stdout.Write(l.Body)
		return err
	}
	return operator.WriteLetter(stdout, l, rec)
}

// findLetter looks for a waiting letter, then a redelivered one, which
// comes with its record.
func findLetter(d *deadletter.Dir, id string) (*grantretry.Letter, *deadletter.Redelivery, error) {
	l, err := d.Get(id)
	if !errors.Is(err, fs.ErrNotExist) {
		return l, nil, wrapLib(err)
	}
	l, rec, err := d.Redelivered(id)
	if errors.Is(err, fs.ErrNotExist) && l == nil {
		return nil, nil, fmt.Errorf("letter %s: not in %s, nor redelivered: %w", id, d.Path(), fs.ErrNotExist)
	}
	return l, rec, wrapLib(err)
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

// redeliverFlags are the redeliver subcommand's flags.
type redeliverFlags struct {
	all      bool
	early    bool
	late     bool
	trustKey bool
	dryRun   bool
	timeout  time.Duration
	trail    string
	rules    string
	creds    operator.Credentials
}

func newRedeliverFlags(fs *flag.FlagSet) *redeliverFlags {
	f := &redeliverFlags{}
	fs.BoolVar(&f.all, "all", false, "redeliver every letter waiting in DIR")
	fs.BoolVar(&f.early, "early", false, "send the letters named even if they are not due: the funder said it will not take them before their not_before, and you know better")
	fs.BoolVar(&f.late, "late", false, "send late letters too (they missed their closing time, due_by): the funder agreed to take them late")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print what would be sent, and send nothing")
	fs.BoolVar(&f.trustKey, "trust-key", false, "send letters whose last attempt was ambiguous too: the funder honours Idempotency-Key")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "bound on each letter's redelivery, retries included")
	fs.StringVar(&f.trail, "trail", "", "the live file of the audit trail that records the redeliveries (default DIR/redelivered/"+defaultRedeliveryTrail+")")
	fs.StringVar(&f.rules, "rules", "", "a JSON file of the funder's own rules (grantretry.Rule), which classify its answers")
	fs.Var(operator.HeaderFlag{C: &f.creds}, "header", `"Name: value": a header added to every request, such as the credentials (repeatable)`)
	fs.Var(operator.HeaderEnvFlag{C: &f.creds}, "header-env", `"Name=VAR": a header whose value is read from environment variable VAR, so it stays out of shell history (repeatable)`)
	return f
}

func runDLRedeliver(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("deadletter redeliver")
	f := newRedeliverFlags(fs)
	pos, err := parseArgs(fs, args, dlRedeliverSynopsis, stdout)
	if err != nil {
		return err
	}
	switch {
	case f.creds.Err != nil:
		return usageError{err: f.creds.Err}
	case len(pos) == 0:
		return usageError{err: errors.New("redeliver wants a directory, then letter ids or -all")}
	case f.all == (len(pos) > 1):
		return usageError{err: errors.New("give letter ids or -all, not both nor neither")}
	case f.all && f.early:
		return usageError{err: errors.New("-early sends the letters named, one by one: it does not go with -all")}
	case f.timeout <= 0:
		return usageError{err: fmt.Errorf("-timeout %v: want a positive duration", f.timeout)}
	}
	var rules []grantretry.Rule
	if f.rules != "" {
		if rules, err = operator.ReadRules(f.rules); err != nil {
			return fmt.Errorf("-rules: %w", libError{err})
		}
	}
	open := openLettersToWrite
	if f.dryRun {
		open = openLetters
	}
	d, err := open(pos[0])
	if err != nil {
		return err
	}
	letters, failed := loadLetters(d, pos[1:], f.all, stderr)
	r := redeliverer{d: d, f: f, stdout: stdout, stderr: stderr}
	if f.dryRun {
		return r.run(context.Background(), nil, letters, failed)
	}
	// A signal stops the run after the letter in flight, recorded on the
	// trail and in the directory; a second one ends the process at once,
	// which leaves that letter marked in flight (ambiguous).
	ctx, stop := operator.SignalContext(context.Background())
	defer stop()
	if f.trail == "" {
		f.trail = filepath.Join(d.Path(), deadletter.RedeliveredDir, defaultRedeliveryTrail)
		fmt.Fprintf(stderr, "recording the redeliveries on the audit trail %s (-trail names another)\n", f.trail)
	}
	tl, err := openTrail(f.trail)
	if err != nil {
		return err
	}
	client, closeIdle := newRedeliveryClient(f.creds.Header, tl, f.trustKey, rules)
	err = r.run(ctx, client, letters, failed)
	closeIdle()
	if cerr := tl.Close(); cerr != nil {
		err = errors.Join(err, libError{fmt.Errorf("the audit trail %s: %w", f.trail, cerr)})
	}
	return err
}

// loadLetters returns the letters named, or all of them, and how many could
// not be read; each of those is reported on stderr.
func loadLetters(d *deadletter.Dir, ids []string, all bool, stderr io.Writer) ([]*grantretry.Letter, int) {
	if all {
		letters, err := d.List()
		if err != nil {
			reportEach(stderr, libError{err})
		}
		return letters, countErrors(err)
	}
	var letters []*grantretry.Letter
	failed := 0
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue // named twice: sent once
		}
		seen[id] = true
		l, err := d.Get(id)
		if errors.Is(err, fs.ErrNotExist) {
			err = cmp.Or(alreadyRedelivered(d, id), err)
		}
		if err != nil {
			reportEach(stderr, libError{err})
			failed++
			continue
		}
		letters = append(letters, l)
	}
	return letters, failed
}

func countErrors(err error) int {
	if err == nil {
		return 0
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

func reportEach(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "grantretry: deadletter: %s\n", line)
	}
}

// redeliverer sends letters one after another and reports on each.
type redeliverer struct {
	d      *deadletter.Dir
	f      *redeliverFlags
	stdout io.Writer
	stderr io.Writer
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

// alreadyRedelivered says when letter id, which is not waiting in d, was
// redelivered and what the funder answered; nil if it was not.
func alreadyRedelivered(d *deadletter.Dir, id string) error {
	_, rec, err := d.Redelivered(id)
	if err != nil || rec == nil {
		return nil
	}
	return fmt.Errorf("letter %s was not sent: it was already %s; its record is in %s", id, operator.LetterState(rec),
		filepath.Join(d.Path(), deadletter.RedeliveredDir))
}

// run redelivers letters through client (nil for a dry run); unreadable
// is how many named letters could not be read. Once ctx ends (SIGINT or
// SIGTERM), the letter in flight is finished and recorded, and no other
// is begun: run says which were left.
func (r redeliverer) run(ctx context.Context, client *http.Client, letters []*grantretry.Letter, unreadable int) error {
	failed := unreadable
	letters, late, later := r.due(letters, time.Now())
	for i, l := range letters {
		if ctx.Err() != nil {
			return r.interrupted(ctx, letters[i:], failed, len(letters)+unreadable)
		}
		var err error
		switch {
		case !r.f.late && deadletter.Late(l, time.Now()):
			err = operator.NotSentLate(l, "-late", "it stays in "+r.d.Path())
		case !r.f.early && !deadletter.Due(l, time.Now()):
			err = operator.NotSentNotDue(l, "-early", "it stays in "+r.d.Path())
		case r.f.dryRun:
			err = operator.WritePlan(r.stdout, l, &r.f.creds)
		default:
			err = r.one(ctx, client, l)
		}
		if err != nil {
			reportEach(r.stderr, libError{err})
			failed++
		}
	}
	if ctx.Err() != nil {
		return r.interrupted(ctx, nil, failed, len(letters)+unreadable)
	}
	total := len(letters) + unreadable
	if failed > 0 {
		return fmt.Errorf("%d of %s not redelivered", failed, countNoun(total, "letter"))
	}
	switch {
	case total == 0 && late > 0:
		fmt.Fprintf(r.stdout, "no letters to send; %s late, %d not due yet\n", countNoun(late, "letter"), later)
	case total == 0 && later > 0:
		fmt.Fprintf(r.stdout, "no letters due; %s not due yet\n", countNoun(later, "letter"))
	case total == 0:
		fmt.Fprintln(r.stdout, "no letters to redeliver")
	}
	return nil
}

// due returns, of a run over every letter (-all), the letters due at now
// and not late (late ones too with -late), and prints why each of the
// others is left: late, or when it is due; they are left, not failed.
// Letters named one by one are all returned: run refuses those late,
// unless -late, and those not due, unless -early.
func (r redeliverer) due(letters []*grantretry.Letter, now time.Time) (due []*grantretry.Letter, late, later int) {
	if !r.f.all {
		return letters, 0, 0
	}
	var lateOnes, notDue []*grantretry.Letter
	for _, l := range letters {
		switch {
		case !r.f.late && deadletter.Late(l, now):
			lateOnes = append(lateOnes, l)
		case !deadletter.Due(l, now):
			notDue = append(notDue, l)
		default:
			due = append(due, l)
		}
	}
	for _, l := range lateOnes {
		fmt.Fprintln(r.stdout, operator.Late(l))
	}
	operator.SortByDue(notDue, now)
	for _, l := range notDue {
		fmt.Fprintln(r.stdout, operator.NotDue(l))
	}
	return due, len(lateOnes), len(notDue)
}

// interrupted reports a run stopped by a signal: the letters left untried,
// which stay as they were.
func (r redeliverer) interrupted(ctx context.Context, left []*grantretry.Letter, failed, total int) error {
	for _, l := range left {
		fmt.Fprintf(r.stdout, "not tried: %s\n", operator.LetterName(l))
	}
	return fmt.Errorf("stopped (%v): %d of %s not redelivered, %d of them not tried; the letters not redelivered stay in %s",
		context.Cause(ctx), failed+len(left), countNoun(total, "letter"), len(left), r.d.Path())
}

// one redelivers l and, if it was delivered (deadletter.Delivered: answered
// 1xx-3xx, reconciled, or already applied), marks it redelivered.
// The directory records the send (deadletter.Dir.Redeliver): in flight
// before it goes, and, if it fails, its attempts in the letter, which is
// ambiguous from then on if the funder may have applied it.
func (r redeliverer) one(ctx context.Context, client *http.Client, l *grantretry.Letter) error {
	where := "it stays in " + r.d.Path()
	var reconcile grantretry.ReconcileFunc
	if r.f.trustKey {
		reconcile = deadletter.TrustKey
	}
	ctx, cancel := context.WithTimeout(ctx, r.f.timeout)
	defer cancel()
	if r.f.early {
		ctx = deadletter.SendEarly(ctx)
	}
	if r.f.late {
		ctx = deadletter.SendLate(ctx)
	}
	resp, err := r.d.Redeliver(ctx, client, l.ID, reconcile)
	if errors.Is(err, deadletter.ErrAmbiguous) {
		return operator.NotSentAmbiguous(l, "", "deadletter.Redeliver", where)
	}
	if errors.Is(err, deadletter.ErrNotYet) {
		return operator.NotSentNotDue(l, "-early", where)
	}
	if errors.Is(err, deadletter.ErrLate) {
		return operator.NotSentLate(l, "-late", where)
	}
	if err != nil {
		if now, gerr := r.d.Get(l.ID); gerr == nil && now.Ambiguous && !l.Ambiguous {
			where += ", now ambiguous: the funder may have it"
		}
		return fmt.Errorf("%w; %s", err, where) // it names the letter
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	rec := operator.RedeliveryRecord(resp, "grantretry deadletter redeliver, on the audit trail "+r.f.trail)
	if !deadletter.Delivered(resp) {
		if now, gerr := r.d.Get(l.ID); gerr == nil && now.Ambiguous && !l.Ambiguous {
			where += ", now ambiguous: the funder may have it"
		}
		rec.Note = ""
		return errors.New(operator.NotRedelivered(l, rec, where))
	}
	rec.Time = time.Now().UTC()
	if err := r.d.MarkRedelivered(l.ID, rec); err != nil {
		return fmt.Errorf("%s was %s, but could not be marked redelivered, and is marked in flight (ambiguous): %w", operator.LetterName(l), operator.Answer(rec), err)
	}
	fmt.Fprintln(r.stdout, operator.Redelivered(l, rec))
	return nil
}

// newRedeliveryClient returns a client that sends through a grantretry
// Transport with the default policy and the audit trail tl, adds the
// operator's headers to a clone of each request, and follows no redirect,
// which would carry those headers to another host. Unless trustKey, an
// attempt that may have been applied is not sent again: the Transport's
// reconciler, operator.CannotAsk, cannot tell. rules, if any, classify
// the funder's answers first (grantretry.ClassifyRules).
func newRedeliveryClient(creds http.Header, tl *trail.Trail, trustKey bool, rules []grantretry.Rule) (*http.Client, func()) {
	opts := []grantretry.Option{grantretry.WithAuditTrail(tl)}
	if !trustKey {
		opts = append(opts, grantretry.WithReconciler(operator.CannotAsk))
	}
	if len(rules) > 0 {
		opts = append(opts, grantretry.WithClassifier(grantretry.ClassifyRules(rules...)))
	}
	tr := grantretry.New(nil, opts...)
	return &http.Client{
		Transport:     operator.WithHeaders{Next: tr, Header: creds},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, tr.CloseIdleConnections
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
		return usageError{err: err}
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
	err = operator.Retire(stdout, stderr, pos[1:], *reason, func(id, reason string) (*deadletter.Retirement, error) {
		r, err := d.RetireWith(id, reason, opts)
		if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, deadletter.ErrRetired) {
			if aerr := alreadyRedelivered(d, id); aerr != nil {
				return nil, fmt.Errorf("it was redelivered already; its record is in %s", filepath.Join(d.Path(), deadletter.RedeliveredDir))
			}
			return nil, fmt.Errorf("there is no such letter waiting in %s", d.Path())
		}
		return r, err
	})
	if cerr := tl.Close(); cerr != nil {
		err = errors.Join(err, libError{fmt.Errorf("the audit trail %s: %w", *trailPath, cerr)})
	}
	return err
}
