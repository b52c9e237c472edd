package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/letterstore"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/jackc/pgx/v5/pgxpool"
)

const dlListSynopsis = `Usage: grantretry-fleet deadletter list [-pg DSN] [-submission ID] [-json]

Lists the letters waiting in the database (not those redelivered or
retired), then a line that counts them: "N letters waiting in the
database: L late, R refused, A ambiguous, D not due (next due at T)",
leaving out the parts that are zero.

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
array, with their bodies, as the database holds them.
`

const dlShowSynopsis = `Usage: grantretry-fleet deadletter show [-pg DSN] ID [-json | -body]

Prints every field of letter ID, waiting, redelivered (with the record
of its redelivery) or retired (with who retired it, when and why). The
body is printed if it is text of at most 4096 bytes; otherwise its size
and SHA-256: use -body to write it out, or -json for the letter as
stored, with the record of its redelivery or its retirement.
`

const dlRedeliverSynopsis = `Usage: grantretry-fleet deadletter redeliver [-pg DSN]
         (ID... | -all | -submission ID) [-rate N/s] [-budget RETRIES]
         [-deadline D] [-concurrency N] [-worker NAME] [-rules FILE] [flags]

Sends letters again through a grantretry Transport that writes its
attempts and dispositions to the fleet's trail: same method, URL,
headers, body, Idempotency-Key and X-Correlation-ID. -budget and
-deadline are each letter's retry budget (grantretry.WithBudget);
-timeout bounds each letter's redelivery, by default one minute, or the
-deadline and a quarter more when -deadline is given. -rate paces the
run: at most N sends begin a second ("200/s", "30/m", "600/h", or N a
second), whichever of the -concurrency workers sends them.

-concurrency N is this run's workers: N letters are sent at once. Each
letter is claimed as -worker just before it is sent, under a lease of
its bound (-timeout) and a quarter more, and the claim is checked on the
database's clock immediately before the send, which is cut before the
lease ends; the lease is renewed until the letter's result is recorded,
and ends only if this process dies: other operators and the pipeline's
workers redelivering at the same time skip the letters this one holds,
and no letter is sent by two.

The letters sent are those named, or with -all those waiting in the
database that are due, not late, not refused and not ambiguous;
-submission ID chooses among a submission's letters as -all does. Each
letter -all leaves gets a line, and is no failure:

  late: letter ID (submission S) was due by T
  not due: letter ID (submission S) until T
  refused: letter ID (submission S) was last answered 422 ...
  ambiguous: letter ID (submission S): its last attempt may have ...
  another's: letter ID (submission S): another process or worker ...

A late letter (it missed its closing time, its due_by) is sent only with
-late, the explicit choice that the funder takes it late. A letter that
is not due (the funder said it will not take it before its not_before)
is sent only when named with -early. A letter the funder refused (a
terminal answer such as 422) is sent by -all only with -include-refused:
correct the work and send it anew, or retire the letter. A letter whose
last attempt may have been applied ("ambiguous" in show), or whose
earlier redelivery was still in flight when its lease ended or its
worker died, is sent only with -trust-key, for a funder that honours
Idempotency-Key: this command cannot ask the funder, so for one that
ignores the key, redeliver it from the pipeline, with
fleet.Letters.Redeliver and the pipeline's reconciler. A letter named
that is late, not due or ambiguous is refused, and the command fails;
one named that was refused is sent. A letter another worker holds under
its lease, or redelivered or retired since this command listed the
letters, is left to it.

Every redelivery is on the record of the fleet's trail, in the database:
its attempts and disposition, each line naming the letter
("redelivers"), so that 'grantretry-fleet audit trace -submission ID'
shows the call and its redelivery. -dry-run claims nothing, writes no
trail, sends nothing, and prints what it would send.

Letters carry no credentials: give them with -header or -header-env,
which are added to every request and never printed. Redirects are not
followed.

A letter is delivered when it is answered 1xx-3xx, or when its outcome
says succeeded (already applied, under -rules): it is marked redelivered
in the database, with a record of the answer. Any other is released to
be claimed again, and reported, with what the send did written into it:
its attempts, its answer, and "ambiguous" when the funder may have
applied it. A send that ends circuit_open (the Transport's breaker for
the funder's host is open) leaves the letters of that host not tried in
this run; the others go on.

-rules reads the funder's own rules (grantretry.Rule, as JSON, as
'grantretry classify -rules' does). An ambiguous letter sent with
-trust-key and answered with one whose verdict is Applied (Simpler
Grants.gov's 403 not_in_progress to an application already submitted) is
delivered, since the funder has it, and its line says "already applied".
The same answer to a letter that is not ambiguous is a refusal.

After the letters' lines comes the summary, in the words grantretry uses
too (the lines that would count none are left out, but "delivered"):

` + operator.SummaryHelp + `
SIGINT or SIGTERM stops the run: the letters in flight end and are
recorded on the fleet's trail and in their letters, which are released
(ambiguous when the funder may have them), none is begun after, and the
summary ends "stopped: interrupt (SIGINT); the letters not tried stay
waiting". A second signal ends the process at once: the leases of the
letters it held then end, and the next claim of each finds it ambiguous.

` + operator.ExitStatusHelp

const dlRetireSynopsis = `Usage: grantretry-fleet deadletter retire [-pg DSN] ID... -reason TEXT
                                        [-by NAME]

Takes the waiting letters ID out of the database for good: a letter the
funder refused for good, or work the applicant withdrew, which must not
be sent again. Nothing is deleted: each letter's row is kept, state
retired, with who retired it, when and why, and list, redeliver and the
workers' claims pass it over.

Each retirement is on the record of the fleet's trail, which redeliver
writes to: a grantretry.retired line naming the letter, who and why, so
that 'grantretry-fleet audit trace -submission ID' ends with it.

-reason is required. Each letter gets a line, "retired: letter ID
(submission S): REASON" or "not retired: letter ID: why" (no such
waiting letter, one a worker holds under a lease, one retired already),
which does not stop the others; then "retired N of M letters". The
command exits 0 when every letter was retired, 1 when some were not, and
2, retiring none, when it is called wrongly.
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

// openLetters connects to the database and checks that it has the
// fleet's letters, for the subcommand sub: a database no fleet process
// migrated gets errNoLetters, once, not the server's error for each
// letter.
func openLetters(ctx context.Context, db *dbFlags, sub string) (*pgxpool.Pool, error) {
	pool, err := db.open(ctx)
	if err != nil {
		return nil, err
	}
	var have bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('grantretry_letters') IS NOT NULL`).Scan(&have); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", sub, err)
	}
	if !have {
		pool.Close()
		return nil, errNoLetters(sub)
	}
	return pool, nil
}

func dlList(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("deadletter list")
	o := operator.ListOptions{Bodies: true}
	fs.BoolVar(&o.JSON, "json", false, "print the letters as a JSON array, with their bodies")
	fs.StringVar(&o.Submission, "submission", "", "list the letters of submission `ID` only")
	rest, err := parse(fs, args, dlListSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("list: unexpected argument %q", rest[0])
	}
	ctx := context.Background()
	pool, err := openLetters(ctx, db, "list")
	if err != nil {
		return err
	}
	defer pool.Close()
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	return wrapLib(operator.List(ctx, stdout, letterstore.New(letters, ""), o))
}

func dlShow(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("deadletter show")
	asJSON := fs.Bool("json", false, "print the letter as stored, and the record of its redelivery or retirement, as one JSON object")
	rawBody := fs.Bool("body", false, "write the raw body to standard output, and nothing else")
	ids, err := parse(fs, args, dlShowSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usagef("show: give one letter id (got %d)", len(ids))
	}
	ctx := context.Background()
	pool, err := openLetters(ctx, db, "show")
	if err != nil {
		return err
	}
	defer pool.Close()
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	store := letterstore.New(letters, "")
	if !*asJSON || *rawBody {
		return wrapLib(operator.Show(ctx, stdout, store, ids[0], *rawBody))
	}
	found, err := store.Find(ctx, ids[0])
	if err != nil {
		return wrapLib(err)
	}
	return writeFoundJSON(stdout, found)
}

// retirementJSON is the record of a letter's retirement in show -json,
// whose letter is the object's own.
type retirementJSON struct {
	RetiredAt time.Time `json:"retired_at"`
	RetiredBy string    `json:"retired_by"`
	Reason    string    `json:"reason"`
}

// writeFoundJSON prints the letter found as stored, with the record of
// its redelivery or its retirement, as one JSON object.
func writeFoundJSON(w io.Writer, found operator.Found) error {
	var retired *retirementJSON
	if r := found.Retirement; r != nil {
		retired = &retirementJSON{RetiredAt: r.RetiredAt, RetiredBy: r.RetiredBy, Reason: r.Reason}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Letter     *grantretry.Letter     `json:"letter"`
		Redelivery *deadletter.Redelivery `json:"redelivery,omitempty"`
		Retirement *retirementJSON        `json:"retirement,omitempty"`
	}{found.Letter, found.Redelivery, retired})
}

// libError is an error of the library, whose lines start with
// "grantretry: " (or "grantretry: fleet: ") where run's own prefix already
// says where it comes from, and may quote another such message after a
// colon (a client's *url.Error, a wrapped cause): it drops every prefix
// but run's.
type libError struct{ err error }

func (e libError) Error() string { return operator.DropLibraryPrefix(e.err.Error()) }

func (e libError) Unwrap() error { return e.err }

func wrapLib(err error) error {
	if err == nil {
		return nil
	}
	return libError{err}
}

// leaseFor is the lease under which a letter is claimed for a send
// bounded by timeout: longer than the send by a quarter, so that the
// send, which Letters.Redeliver cuts a tenth of the lease before it ends,
// is bounded by timeout first. The lease need not cover what follows the
// send (the trail's commit of its record, on trailLimit, and the letter's
// release): Letters.Redeliver renews it until the letter is Done or
// released, so it ends only for a process that died.
func leaseFor(timeout time.Duration) time.Duration { return timeout + timeout/4 }

// trailLimit bounds each commit of the redelivery's records to the
// fleet's trail: an operator's command can wait for a durable record
// longer than a pipeline's call.
const trailLimit = 10 * time.Second

// defaultWorker is the name a redeliver's claims are leased under when
// -worker names none: this host and process.
func defaultWorker() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("grantretry-fleet-%s-%d", host, os.Getpid())
}

// redeliverNote ends the record of each letter a redeliver run as worker
// delivers: who sent it, and where its redelivery is on the record.
func redeliverNote(worker string) string {
	return "grantretry-fleet deadletter redeliver, by worker " + worker + ", on the fleet's trail"
}

func dlRedeliver(args []string, stdout, stderr io.Writer) error {
	fs, db := newFlagSet("deadletter redeliver")
	var f operator.RedeliverFlags
	f.Register(fs, "in the database")
	worker := fs.String("worker", "", "the `NAME` the claims are leased under (default grantretry-fleet-<host>-<pid>)")
	ids, err := parse(fs, args, dlRedeliverSynopsis, stdout)
	if err != nil {
		return err
	}
	if err := f.Check(ids); err != nil {
		var uerr operator.UsageError
		if errors.As(err, &uerr) {
			return usageError{err: fmt.Errorf("redeliver: %w", uerr.Err)}
		}
		return fmt.Errorf("redeliver: %w", libError{err})
	}
	if *worker == "" {
		*worker = defaultWorker()
	}
	ctx := context.Background()
	pool, err := openLetters(ctx, db, "redeliver")
	if err != nil {
		return err
	}
	defer pool.Close()
	letters := fleet.NewLetters(pool, fleet.WithLease(leaseFor(f.LetterTimeout())))
	defer letters.Close()
	r := &operator.Run{
		Store: letterstore.New(letters, *worker), Flags: &f, IDs: ids,
		Stdout: stdout, Stderr: stderr, Prefix: "grantretry-fleet: deadletter: ", AskWith: "fleet.Letters.Redeliver",
	}
	if f.DryRun {
		_, err := r.Redeliver(ctx)
		return wrapLib(err)
	}
	// A signal stops the run after the letters in flight, recorded on the
	// trail and released (ambiguous if they may have reached the funder);
	// a second one ends the process at once, and the leases of its claims
	// then mark those letters so.
	sctx, stop := operator.SignalContext(ctx)
	defer stop()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(trailLimit))
	if err != nil {
		return fmt.Errorf("redeliver: the fleet's trail: %w", libError{err})
	}
	client, closeIdle := f.NewClient(tr)
	r.Client, r.Note = client, redeliverNote(*worker)
	_, err = r.Redeliver(sctx)
	closeIdle()
	err = wrapLib(err)
	if cerr := tr.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("redeliver: the fleet's trail: %w", libError{cerr}))
	}
	return err
}

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
	pool, err := openLetters(ctx, db, "retire")
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
	err = operator.RetireFrom(ctx, stdout, stderr, letterstore.New(letters, ""), ids, *reason, opts)
	if cerr := tr.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("retire: the fleet's trail: %w", libError{cerr}))
	}
	return err
}
