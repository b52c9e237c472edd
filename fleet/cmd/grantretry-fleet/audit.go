package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5/pgconn"
)

const auditVerifySynopsis = `Usage: grantretry-fleet audit verify [-pg DSN] [LOCAL_TRAIL...]

Checks every writer's hash chain in the database's trail (grantretry_trail):
each record's hash, seq and prev, from seq 1. Prints "ok" with one line per
writer (keep each LAST HASH outside the database: a cut tail shows only
against it), or names the writer and seq of the first broken record and
exits 1. Each LOCAL_TRAIL is the live file of a local trail a process fell
back to while the database was away (fleet.WithLocalTrail); each is
verified as a trail of its own, and its dispositions are counted beside
the database's.
`

const auditTraceSynopsis = `Usage: grantretry-fleet audit trace [-pg DSN]
           (-correlation ID | -submission ID | -key KEY)

Verifies the database's trail, then prints every record of the calls that
match the one selector given, in time order across all writers (by each
record's own time, as its process's clock read it; records of the same time
in chain order), so a redelivery made by another process follows the call
that left its letter. The records of a redelivery (deadletter redeliver, or
fleet.Letters.Redeliver through a Transport on the trail) name the letter
they send again: "redelivers dead letter ID". A disposition shows the
funder's time of a call that ended owed_later (not_before), and the closing
time of a call made under one (due_by) and whether it was late. Exits 1 if
none matches or a chain is broken.
`

func runAudit(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("missing subcommand: verify or trace")
	}
	switch sub := args[0]; {
	case isHelp(sub):
		io.WriteString(stdout, auditVerifySynopsis+"\n"+auditTraceSynopsis)
		return flag.ErrHelp
	case sub == "verify":
		return subUsage("audit verify", auditVerify(args[1:], stdout))
	case sub == "trace":
		return subUsage("audit trace", auditTrace(args[1:], stdout))
	default:
		return usagef("unknown subcommand %q: verify or trace", sub)
	}
}

func auditVerify(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("audit verify")
	locals, err := parse(fs, args, auditVerifySynopsis, stdout)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	sum, err := fleet.VerifyTrail(ctx, pool)
	if noTable(err) {
		return errNoTrail("verify")
	}
	if err != nil {
		return fmt.Errorf("verify: %w (%s before it verify)", err, countNoun(sum.Records, "record"))
	}
	fmt.Fprintf(stdout, "ok: %s from %s in the database\n", countNoun(sum.Records, "record"), countNoun(len(sum.Writers), "writer"))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if len(sum.Writers) > 0 {
		fmt.Fprintln(tw, "WRITER\tRECORDS\tLAST SEQ\tLAST HASH")
	}
	for _, w := range sum.Writers {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", escaped(w.Writer), w.Records, w.LastSeq, w.LastHash)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "records: %s\n", countList(sum.Messages))
	fmt.Fprintf(stdout, "dispositions: %s\n", countList(sum.Dispositions))
	for _, path := range locals {
		lsum, err := trail.Verify(path)
		var te *trail.Error
		if errors.As(err, &te) && te.NotTrail {
			return fmt.Errorf("verify: local trail %s is not an audit trail: its first line is not a trail record (seq, prev, hash)", path)
		}
		if err != nil {
			return fmt.Errorf("verify: local trail %s: %w", path, err)
		}
		fmt.Fprintf(stdout, "ok: local trail %s: %s, seq %d..%d, last hash %s; dispositions: %s\n",
			path, countNoun(lsum.Records, "record"), lsum.FirstSeq, lsum.LastSeq, lsum.LastHash, countList(lsum.Dispositions))
	}
	return nil
}

func auditTrace(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("audit trace")
	var corr, sub, key string
	fs.StringVar(&corr, "correlation", "", "the call's correlation id (X-Correlation-ID)")
	fs.StringVar(&sub, "submission", "", "a submission id: every call made for it")
	fs.StringVar(&key, "key", "", "an Idempotency-Key: every call that carried it")
	rest, err := parse(fs, args, auditTraceSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("trace: unexpected argument %q", rest[0])
	}
	field, value, n := "", "", 0
	for _, s := range []struct{ field, value string }{
		{grantretry.FieldCorrelationID, corr}, {grantretry.FieldSubmissionID, sub}, {grantretry.FieldIdempotencyKey, key},
	} {
		if s.value != "" {
			field, value, n = s.field, s.value, n+1
		}
	}
	if n != 1 {
		return usagef("trace: give exactly one of -correlation, -submission, -key (got %d)", n)
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	var matched []fleet.TrailRecord
	sum, err := fleet.ReadTrail(ctx, pool, func(r fleet.TrailRecord) error {
		if v, _ := r.Fields[field].(string); v == value {
			matched = append(matched, r)
		}
		return nil
	})
	// ReadTrail goes writer by writer: a call's records and its
	// redelivery's, made by another process, are put back in time order.
	// Records of one time stay in chain order, writer by writer.
	slices.SortStableFunc(matched, func(a, b fleet.TrailRecord) int { return a.Time.Compare(b.Time) })
	writeTrace(stdout, matched)
	switch {
	case noTable(err):
		return errNoTrail("trace")
	case err != nil:
		return fmt.Errorf("trace: %w", err)
	case len(matched) == 0:
		return fmt.Errorf("trace: no record with %s %q in %s", field, value, countNoun(sum.Records, "record"))
	}
	fmt.Fprintf(stdout, "chains verified: %s from %s; %s matched\n",
		countNoun(sum.Records, "record"), countNoun(len(sum.Writers), "writer"), countNoun(len(matched), "record"))
	return nil
}

// writeTrace prints one row per record.
func writeTrace(w io.Writer, recs []fleet.TrailRecord) {
	if len(recs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWRITER\tSEQ\tMSG\tCORRELATION\tDETAIL")
	for _, r := range recs {
		corr, _ := r.Fields[grantretry.FieldCorrelationID].(string)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.Time.UTC().Format("2006-01-02T15:04:05.000Z"), escaped(r.Writer), r.Seq,
			escaped(r.Msg), dashIfEmpty(escaped(corr)), detail(r.Fields))
	}
	tw.Flush()
}

// detail is the fields an operator reads first: the letter a redelivery
// sends again, the attempt's status and verdict, the disposition and its
// reason, the funder's time of a call that ended owed_later (not_before,
// "not_said" when the funder gave none), the closing time of a call made
// under one and whether it was late, and who retired a letter and why.
// Each value is escaped: an error or a reason can carry a funder's text,
// and a letter's id a caller's.
func detail(f map[string]any) string {
	var parts []string
	if id := fmt.Sprint(f[grantretry.FieldRedelivers]); f[grantretry.FieldRedelivers] != nil && id != "" {
		parts = append(parts, "redelivers dead letter "+escaped(id))
	}
	for _, k := range []string{grantretry.FieldAttempt, grantretry.FieldStatus, grantretry.FieldReason, grantretry.FieldError,
		grantretry.FieldDisposition, grantretry.FieldStopReason, grantretry.FieldAttempts, grantretry.FieldNotBefore,
		grantretry.FieldDueBy, grantretry.FieldLate, grantretry.FieldDeadLetterID,
		grantretry.FieldRetiredBy, grantretry.FieldRetiredReason} {
		v, ok := f[k]
		switch {
		case ok && fmt.Sprint(v) != "":
			parts = append(parts, k+"="+escaped(fmt.Sprint(v)))
		case ok && k == grantretry.FieldNotBefore:
			parts = append(parts, k+"=not_said")
		}
	}
	return dashIfEmpty(strings.Join(parts, " "))
}

// escaped returns s as it is if it is one word of printable text, else
// quoted as a Go string, so that no control character (a terminal
// escape, a tab that would shift the columns, a bidirectional override)
// reaches the operator's terminal, and a value with spaces reads as one.
func escaped(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == '"' || r == '\\'
	}) {
		return strconv.Quote(s)
	}
	return s
}

// noTable reports whether err is the server saying a table of the
// fleet's schema does not exist: a database no fleet process migrated.
func noTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01" // undefined_table
}

// errNoTrail is the error of the subcommand sub on a database without the
// fleet's trail table.
func errNoTrail(sub string) error { return errNoSchema(sub, "trail", "grantretry_trail") }

// errNoLetters is the error of the subcommand sub on a database without
// the fleet's letter table.
func errNoLetters(sub string) error { return errNoSchema(sub, "letters", "grantretry_letters") }

func errNoSchema(sub, what, table string) error {
	return fmt.Errorf("%s: the database has no fleet %s (no table %s): "+
		"-pg (or $%s) names a database where the fleet's schema was never created. "+
		"Check that it is the fleet's database; a fleet's processes create the schema with fleet.Migrate before they start", sub, what, table, envDSN)
}

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
