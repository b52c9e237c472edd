package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const dlListSynopsis = `Usage: grantretry-fleet deadletter list [-pg DSN] [-json]

Lists the letters waiting in the database (not redelivered): the late
letters first, then the letters due now, each oldest first, then the others
by when they are due. DUE is "now", or the time before which the funder said
it will not take the letter (its not_before): redeliver -all leaves it until
then. LATE is "late" for a letter that missed its closing time (its due_by,
from WithClosingTime): redeliver sends it only with -late.
`

func runDeadLetter(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing subcommand: list, show, redeliver, retire or drain")
	}
	switch sub := args[0]; {
	case isHelp(sub):
		io.WriteString(stdout, dlListSynopsis+"\n"+dlShowSynopsis+"\n"+dlRedeliverSynopsis+"\n"+dlRetireSynopsis+"\n"+dlDrainSynopsis)
		return flag.ErrHelp
	case sub == "list":
		return subUsage("deadletter list", dlList(args[1:], stdout))
	case sub == "show":
		return subUsage("deadletter show", dlShow(args[1:], stdout))
	case sub == "redeliver":
		return subUsage("deadletter redeliver", dlRedeliver(args[1:], stdout, stderr))
	case sub == "retire":
		return subUsage("deadletter retire", dlRetire(args[1:], stdout, stderr))
	case sub == "drain":
		return subUsage("deadletter drain", dlDrain(args[1:], stdout))
	default:
		return usagef("unknown subcommand %q: list, show, redeliver, retire or drain", sub)
	}
}

func dlList(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("deadletter list")
	asJSON := fs.Bool("json", false, "print the letters as a JSON array")
	rest, err := parse(fs, args, dlListSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("list: unexpected argument %q", rest[0])
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	letters, err := fleet.NewLetters(pool).List(ctx)
	if noTable(err) {
		return errNoLetters("list")
	}
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if letters == nil {
			letters = []*grantretry.Letter{}
		}
		return enc.Encode(letters)
	}
	now := time.Now()
	operator.SortByDue(letters, now)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if len(letters) > 0 {
		fmt.Fprintln(tw, "ID\tSUBMISSION\tDUE\tLATE\tCREATED\tDISPOSITION\tSTOP REASON\tMETHOD\tURL\tATTEMPTS\tLAST")
	}
	for _, l := range letters {
		last := dashIfEmpty(l.LastError)
		if l.LastStatus != 0 {
			last = fmt.Sprint(l.LastStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", l.ID, operator.EscapeControl(dashIfEmpty(l.SubmissionID)),
			operator.DueAt(l, now), operator.LateMark(l, now), l.Created.UTC().Format(time.RFC3339), l.Disposition, l.StopReason, operator.EscapeControl(l.Method),
			operator.EscapeControl(l.URL), l.Attempts, operator.EscapeControl(last))
	}
	fmt.Fprintf(tw, "%s waiting in the database\n", countNoun(len(letters), "letter"))
	return tw.Flush()
}

const dlShowSynopsis = `Usage: grantretry-fleet deadletter show [-pg DSN] ID [flags]

Prints every field of letter ID, waiting or redelivered (with the record of
its redelivery). The body is printed if it is text of at most 4096 bytes;
otherwise its size and SHA-256: use -body to write it out, or -json for the
letter as stored.
`

const dlRedeliverSynopsis = `Usage: grantretry-fleet deadletter redeliver [-pg DSN] (ID... | -all) [flags]

Sends letters again, one after another, through a grantretry Transport with
the default policy that writes its attempts and dispositions to the fleet's
trail: same method, URL, headers, body, Idempotency-Key and X-Correlation-ID.
A funder that honours the key and already applied a letter answers with its
first result instead of applying it twice; one that ignores the key applies
it again.

Each letter is claimed just before it is sent, under a lease of -timeout
and a quarter more, and the claim is checked on the database's clock
immediately before the send, which is cut before the lease ends: another
operator or worker redelivering at the same time skips the letters this
one holds, and no letter is sent by two. With -all, the letters waiting
when the command starts are tried; those another worker holds or
redelivered meanwhile are left to it.

Letters carry no credentials: give them with -header or -header-env, which
are added to every request and never printed. Redirects are not followed.

A letter is delivered when it is answered 1xx-3xx, or when its outcome says
succeeded (already applied, under -rules): it is marked redelivered, with a
record of the answer. Any other is released to be claimed again and
reported, and the command fails.

-rules reads the funder's own rules (grantretry.Rule, as JSON, as
'grantretry classify -rules' does). An ambiguous letter, which this command
sends only with -trust-key (the pipeline's fleet.Letters.Redeliver sends
one after its reconciler says the funder does not have it: see below),
answered with one whose verdict is Applied (Simpler Grants.gov's 403
not_in_progress to an application already submitted) is delivered, since
the funder has it: it is marked redelivered, and its line says "already
applied". The same answer to a letter that is not ambiguous is a refusal.

SIGINT or SIGTERM stops the run after the letter in flight, whose attempt
is recorded on the fleet's trail and which is released (ambiguous when
the funder may have it); the letters not tried are listed, and the
command fails.

A letter whose last attempt was ambiguous (it may have been applied, and no
answer said it was not: "ambiguous" in deadletter show), or whose earlier
redelivery was still in flight when its lease ended or its worker died, is
not sent: for a funder that ignores Idempotency-Key, sending it could apply
it twice, and this command cannot ask the funder. Nor does it send again,
without -trust-key, an attempt of its own that may have been applied.
Redeliver such letters from the pipeline, with fleet.Letters.Redeliver and
the pipeline's reconciler, which asks the funder first; or, for a funder
that honours the key, pass -trust-key.

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

func dlShow(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("deadletter show")
	asJSON := fs.Bool("json", false, "print the letter as stored, and the record of its redelivery, as one JSON object")
	rawBody := fs.Bool("body", false, "write the raw body to standard output, and nothing else")
	ids, err := parse(fs, args, dlShowSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usagef("show: give one letter id (got %d)", len(ids))
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, rec, err := fleet.NewLetters(pool).Get(ctx, ids[0])
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("show: no letter %s in the database", ids[0])
	}
	if noTable(err) {
		return errNoLetters("show")
	}
	if err != nil {
		return fmt.Errorf("show: %w", libError{err})
	}
	switch {
	case *rawBody:
		if l.BodyOmitted != "" {
			return fmt.Errorf("show: letter %s: its body was not kept (%s)", l.ID, l.BodyOmitted)
		}
		_, err := stdout.Write(l.Body)
		return err
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Letter     *grantretry.Letter     `json:"letter"`
			Redelivery *deadletter.Redelivery `json:"redelivery,omitempty"`
		}{l, rec})
	}
	return operator.WriteLetter(stdout, l, rec)
}

// libError is an error of the library, whose lines start with
// "grantretry: " (or "grantretry: fleet: ") where run's own prefix already
// says where it comes from, and may quote another such message after a
// colon (a client's *url.Error, a wrapped cause): it drops every prefix
// but run's.
type libError struct{ err error }

func (e libError) Error() string {
	s := "\n" + e.err.Error()
	for _, prefix := range []string{"grantretry: fleet: ", "grantretry: "} {
		s = strings.ReplaceAll(s, "\n"+prefix, "\n")
		s = strings.ReplaceAll(s, ": "+prefix, ": ")
	}
	return s[1:]
}

func (e libError) Unwrap() error { return e.err }

// reportEach prints each line of err as a line of its own, prefixed.
func reportEach(w io.Writer, err error) {
	for _, line := range strings.Split(libError{err}.Error(), "\n") {
		fmt.Fprintf(w, "grantretry-fleet: deadletter: %s\n", line)
	}
}

// redeliverFlags are the redeliver subcommand's flags.
type redeliverFlags struct {
	all      bool
	early    bool
	late     bool
	trustKey bool
	dryRun   bool
	worker   string
	timeout  time.Duration
	rules    string
	creds    operator.Credentials
}

func newRedeliverFlags(fs *flag.FlagSet) *redeliverFlags {
	f := &redeliverFlags{}
	fs.BoolVar(&f.all, "all", false, "redeliver every letter waiting in the database")
	fs.BoolVar(&f.early, "early", false, "send the letters named even if they are not due: the funder said it will not take them before their not_before, and you know better")
	fs.BoolVar(&f.late, "late", false, "send late letters too (they missed their closing time, due_by): the funder agreed to take them late")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print what would be sent, and send nothing")
	fs.BoolVar(&f.trustKey, "trust-key", false, "send letters whose last attempt was ambiguous too: the funder honours Idempotency-Key")
	fs.StringVar(&f.worker, "worker", "", "the name the claims are leased under (default grantretry-fleet-<host>-<pid>)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "bound on each letter's redelivery, retries included; its lease is this and a quarter more")
	fs.StringVar(&f.rules, "rules", "", "a JSON file of the funder's own rules (grantretry.Rule), which classify its answers")
	fs.Var(operator.HeaderFlag{C: &f.creds}, "header", `"Name: value": a header added to every request, such as the credentials (repeatable)`)
	fs.Var(operator.HeaderEnvFlag{C: &f.creds}, "header-env", `"Name=VAR": a header whose value is read from environment variable VAR, so it stays out of shell history (repeatable)`)
	return f
}

// leaseFor is the lease under which a letter is claimed for a send
// bounded by timeout: longer than the send by a quarter, so that the
// send, which Letters.Redeliver cuts a tenth of the lease before it ends,
// is bounded by timeout first, and the lease still holds when it ends.
func leaseFor(timeout time.Duration) time.Duration { return timeout + timeout/4 }

// trailLimit bounds each commit of the redelivery's records to the
// fleet's trail: an operator's command can wait for a durable record
// longer than a pipeline's call.
const trailLimit = 10 * time.Second

func dlRedeliver(args []string, stdout, stderr io.Writer) error {
	fs, db := newFlagSet("deadletter redeliver")
	f := newRedeliverFlags(fs)
	ids, err := parse(fs, args, dlRedeliverSynopsis, stdout)
	if err != nil {
		return err
	}
	switch {
	case f.creds.Err != nil:
		return usageError{err: f.creds.Err}
	case f.all == (len(ids) > 0):
		return usagef("redeliver: give -all or letter ids, not both or neither")
	case f.all && f.early:
		return usagef("redeliver: -early sends the letters named, one by one: it does not go with -all")
	case f.timeout <= 0:
		return usagef("redeliver: -timeout %v: want a positive duration", f.timeout)
	}
	var rules []grantretry.Rule
	if f.rules != "" {
		if rules, err = operator.ReadRules(f.rules); err != nil {
			return fmt.Errorf("redeliver: -rules: %w", libError{err})
		}
	}
	if f.worker == "" {
		host, _ := os.Hostname()
		f.worker = fmt.Sprintf("grantretry-fleet-%s-%d", host, os.Getpid())
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	r := &redeliverer{f: f, rules: rules, letters: fleet.NewLetters(pool, fleet.WithLease(leaseFor(f.timeout))), stdout: stdout, stderr: stderr}
	if f.all {
		waiting, err := r.letters.List(ctx)
		if noTable(err) {
			return errNoLetters("redeliver")
		}
		if err != nil {
			return fmt.Errorf("redeliver: %w", libError{err})
		}
		ids = ids[:0]
		now := time.Now()
		for _, l := range waiting {
			switch {
			case !f.late && deadletter.Late(l, now):
				fmt.Fprintln(stdout, operator.Late(l))
			case !deadletter.Due(l, now):
				fmt.Fprintln(stdout, operator.NotDue(l))
			default:
				ids = append(ids, l.ID)
			}
		}
	} else {
		ids = dedupe(ids)
	}
	if f.dryRun {
		return r.plan(ctx, ids)
	}
	closeClient, err := r.openClient(ctx, pool)
	if err != nil {
		return err
	}
	defer closeClient()
	// A signal stops the run after the letter in flight, recorded on the
	// trail and released (ambiguous if it may have reached the funder); a
	// second one ends the process at once, and its claim's lease then marks
	// it so.
	sctx, stop := operator.SignalContext(ctx)
	defer stop()
	return r.run(sctx, ids)
}

// dedupe drops the ids named twice: each letter is sent once.
func dedupe(ids []string) []string {
	seen := map[string]bool{}
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// redeliverer claims letters one at a time, just before it sends each,
// and reports on each.
type redeliverer struct {
	f       *redeliverFlags
	rules   []grantretry.Rule // -rules, which classify the funder's answers
	letters *fleet.Letters
	client  *http.Client
	stdout  io.Writer
	stderr  io.Writer
}

// openClient makes the client that sends through a grantretry Transport
// with the default policy, writing to the fleet's trail, adds the
// operator's headers to a clone of each request, and follows no redirect,
// which would carry those headers to another host.
func (r *redeliverer) openClient(ctx context.Context, pool *pgxpool.Pool) (func(), error) {
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(trailLimit))
	if err != nil {
		return nil, fmt.Errorf("redeliver: the fleet's trail: %w", libError{err})
	}
	opts := []grantretry.Option{grantretry.WithAuditTrail(tr)}
	if !r.f.trustKey {
		// An attempt that may have been applied is not sent again: this
		// command cannot ask the funder.
		opts = append(opts, grantretry.WithReconciler(operator.CannotAsk))
	}
	if len(r.rules) > 0 {
		opts = append(opts, grantretry.WithClassifier(grantretry.ClassifyRules(r.rules...)))
	}
	tp := grantretry.New(nil, opts...)
	r.client = &http.Client{
		Transport:     operator.WithHeaders{Next: tp, Header: r.f.creds.Header},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return tp.CloseIdleConnections, nil
}

// run redelivers the letters ids, each claimed just before it is sent.
func (r *redeliverer) run(ctx context.Context, ids []string) error {
	failed, elsewhere := 0, 0
	for i, id := range ids {
		if ctx.Err() != nil {
			for _, left := range ids[i:] {
				fmt.Fprintf(r.stdout, "not tried: letter %s\n", left)
			}
			return fmt.Errorf("stopped (%v): %d of %s not redelivered, %d of them not tried",
				context.Cause(ctx), failed+len(ids)-i, countNoun(len(ids), "letter"), len(ids)-i)
		}
		claims, err := r.letters.ClaimIDs(ctx, r.f.worker, []string{id})
		switch {
		case noTable(err):
			return errNoLetters("redeliver") // and so for every letter
		case err != nil:
			reportEach(r.stderr, err)
			failed++
			continue
		case len(claims) == 0 && r.f.all:
			elsewhere++ // another worker holds it, or redelivered it since the list
			continue
		case len(claims) == 0:
			reportEach(r.stderr, r.whyNotClaimed(ctx, id))
			failed++
			continue
		}
		if err := r.one(ctx, claims[0]); err != nil {
			reportEach(r.stderr, err)
			failed++
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopped (%v): %d of %s not redelivered", context.Cause(ctx), failed, countNoun(len(ids), "letter"))
	}
	if elsewhere > 0 {
		fmt.Fprintf(r.stdout, "%s left to other workers: leased to them, or redelivered since this command listed them\n", countNoun(elsewhere, "letter"))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %s not redelivered", failed, countNoun(len(ids), "letter"))
	}
	if len(ids) == 0 {
		fmt.Fprintln(r.stdout, "no letters to redeliver")
	}
	return nil
}

// whyNotClaimed says why the letter id named on the command line could
// not be claimed.
func (r *redeliverer) whyNotClaimed(ctx context.Context, id string) error {
	_, rec, err := r.letters.Get(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("letter %s not sent: there is no such letter in the database", id)
	case err != nil:
		return fmt.Errorf("letter %s not sent: %w", id, err)
	case rec != nil:
		return fmt.Errorf("letter %s not sent: it was redelivered already, %s", id, operator.LetterState(rec)[len("redelivered "):])
	}
	return fmt.Errorf("letter %s not sent: another worker holds its lease", id)
}

// released is where a letter not redelivered is left.
const released = "it is released to be claimed again"

// one redelivers the claimed letter and, if it was answered 1xx-3xx, marks
// it redelivered; Letters.Redeliver confirms the claim just before the
// send.
func (r *redeliverer) one(ctx context.Context, c *fleet.Claim) error {
	l := c.Letter
	if l.Ambiguous && l.IdempotencyKey != "" && !r.f.trustKey {
		why := ""
		if c.InFlight {
			why = "an earlier redelivery of it was in flight when its lease ended or its worker died, so the funder may have it"
		}
		err := operator.NotSentAmbiguous(l, why, "fleet.Letters.Redeliver", released)
		return errors.Join(err, r.letters.Release(context.WithoutCancel(ctx), c))
	}
	rctx, cancel := context.WithTimeout(ctx, r.f.timeout)
	defer cancel()
	var reconcile grantretry.ReconcileFunc
	if r.f.trustKey {
		reconcile = deadletter.TrustKey
	}
	if r.f.early {
		rctx = deadletter.SendEarly(rctx)
	}
	if r.f.late {
		rctx = deadletter.SendLate(rctx)
	}
	rec, err := r.letters.Redeliver(rctx, c, r.client, reconcile)
	if errors.Is(err, deadletter.ErrLate) {
		msg := operator.NotSentLate(l, "-late", released)
		if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 1 {
			return errors.Join(append([]error{msg}, j.Unwrap()[1:]...)...)
		}
		return msg
	}
	if errors.Is(err, deadletter.ErrNotYet) {
		msg := operator.NotSentNotDue(l, "-early", released)
		if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 1 {
			return errors.Join(append([]error{msg}, j.Unwrap()[1:]...)...)
		}
		return msg
	}
	if err != nil && rec.Status >= 400 {
		// Answered, and refused or failed: said as the directory's tool
		// says it, with whatever else went wrong releasing the letter.
		rec.Note = ""
		msg := errors.New(operator.NotRedelivered(l, rec, released))
		if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 1 {
			return errors.Join(append([]error{msg}, j.Unwrap()[1:]...)...)
		}
		return msg
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(r.stdout, operator.Redelivered(l, rec))
	return nil
}

// planLeft is where a dry run leaves a letter it would not send.
const planLeft = "it stays waiting in the database"

// plan prints what redelivering the letters ids would send, claiming,
// sending and recording nothing. A late letter (unless -late) or one not
// yet due (unless -early) is refused, as the send would refuse it.

func (r *redeliverer) plan(ctx context.Context, ids []string) error {
	failed := 0
	for _, id := range ids {
		l, rec, err := r.letters.Get(ctx, id)
		switch {
		case noTable(err):
			return errNoLetters("redeliver") // and so for every letter
		case errors.Is(err, pgx.ErrNoRows):
			err = fmt.Errorf("letter %s: there is no such letter in the database", id)
		case err == nil && rec != nil:
			err = fmt.Errorf("letter %s: it was redelivered already, %s", id, operator.LetterState(rec)[len("redelivered "):])
		case err == nil && !r.f.late && deadletter.Late(l, time.Now()):
			err = operator.NotSentLate(l, "-late", planLeft) // as Letters.Redeliver would refuse it
		case err == nil && !r.f.early && !deadletter.Due(l, time.Now()):
			err = operator.NotSentNotDue(l, "-early", planLeft)
		case err == nil:
			err = operator.WritePlan(r.stdout, l, &r.f.creds)
		}
		if err != nil {
			reportEach(r.stderr, err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %s could not be planned", failed, countNoun(len(ids), "letter"))
	}
	if len(ids) == 0 {
		fmt.Fprintln(r.stdout, "no letters to redeliver")
	}
	return nil
}

const dlRetireSynopsis = `Usage: grantretry-fleet deadletter retire [-pg DSN] ID... -reason TEXT
                                        [-by NAME]

Takes the waiting letters ID out of the database for good: a letter the
funder refused for good, or work the applicant withdrew, which must not be
sent again. Nothing is deleted: each letter's row is kept, state retired,
with who retired it, when and why, and list, redeliver and the workers'
claims pass it over.

Each retirement is on the record of the fleet's trail, which redeliver
writes to: a grantretry.retired line naming the letter, who and why, so
that 'grantretry-fleet audit trace -submission ID' ends with it.

-reason is required. Each letter gets a line, "retired: letter ID
(submission S): REASON" or "not retired: letter ID: why" (no such waiting
letter, one a worker holds under a lease, one retired already), which does
not stop the others; then "retired N of M letters". The command exits 0
when every letter was retired, 1 when some were not, and 2, retiring none,
when it is called wrongly.
`

func dlRetire(args []string, stdout, stderr io.Writer) error {
	fs, db := newFlagSet("deadletter retire")
	reason := fs.String("reason", "", "why the letters must not be sent again, for the record (required)")
	by := fs.String("by", deadletter.DefaultRetiredBy(), "who retires them, as the record and the audit line say it")
	ids, err := parse(fs, args, dlRetireSynopsis, stdout)
	if err != nil {
		return err
	}
	if err := operator.CheckRetire(ids, *reason); err != nil {
		return usageError{err: err}
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(trailLimit))
	if err != nil {
		return fmt.Errorf("retire: the fleet's trail: %w", libError{err})
	}
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	opts := deadletter.RetireOptions{By: *by, Trail: tr}
	err = operator.Retire(stdout, stderr, ids, *reason, func(id, reason string) (*deadletter.Retirement, error) {
		r, err := letters.RetireWith(ctx, id, reason, opts)
		switch {
		case noTable(err):
			return nil, errNoLetters("retire")
		case errors.Is(err, pgx.ErrNoRows):
			return nil, errors.New("there is no such letter in the database")
		}
		return r, err
	})
	if cerr := tr.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("retire: the fleet's trail: %w", libError{cerr}))
	}
	return err
}
