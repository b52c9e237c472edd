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
	"github.com/grantretry/grantretry/fleet"
	"github.com/jackc/pgx/v5"
)

const dlListSynopsis = `Usage: grantretry-fleet deadletter list [-pg DSN] [-json]

Lists the letters waiting in the database (not redelivered), oldest first.
`

const dlShowSynopsis = `Usage: grantretry-fleet deadletter show [-pg DSN] ID

Prints one letter as JSON, and whether and how it was redelivered.
`

const dlRedeliverSynopsis = `Usage: grantretry-fleet deadletter redeliver [-pg DSN] (-all | ID...) [-header 'Name: value']... [-trust-key]

Claims the letters under a lease (another worker skips them meanwhile),
sends each again through a grantretry Transport with the default policy,
and marks it redelivered if it was answered 1xx-3xx; any other is released
to be claimed again. An ambiguous letter (its last attempt may have been
applied) is not sent unless -trust-key says the funder honours its
Idempotency-Key. Exits 1 if any letter was not redelivered.
`

func runDeadLetter(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing subcommand: list, show or redeliver")
	}
	switch sub := args[0]; {
	case isHelp(sub):
		io.WriteString(stdout, dlListSynopsis+"\n"+dlShowSynopsis+"\n"+dlRedeliverSynopsis)
		return flag.ErrHelp
	case sub == "list":
		return dlList(args[1:], stdout)
	case sub == "show":
		return dlShow(args[1:], stdout)
	case sub == "redeliver":
		return dlRedeliver(args[1:], stdout, stderr)
	case sub == "drain":
		return dlDrain(args[1:], stdout)
	default:
		return usagef("unknown subcommand %q: list, show or redeliver", sub)
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
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if len(letters) > 0 {
		fmt.Fprintln(tw, "ID\tCREATED\tDISPOSITION\tSTOP REASON\tMETHOD\tURL\tATTEMPTS\tLAST")
	}
	for _, l := range letters {
		last := dashIfEmpty(l.LastError)
		if l.LastStatus != 0 {
			last = fmt.Sprint(l.LastStatus)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", l.ID, l.Created.UTC().Format(time.RFC3339),
			l.Disposition, l.StopReason, l.Method, l.URL, l.Attempts, last)
	}
	fmt.Fprintf(tw, "%s waiting in the database\n", countNoun(len(letters), "letter"))
	return tw.Flush()
}

func dlShow(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("deadletter show")
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
	if err != nil {
		return fmt.Errorf("show: %w", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(l); err != nil {
		return err
	}
	if rec == nil {
		fmt.Fprintln(stdout, "state: waiting")
		return nil
	}
	fmt.Fprintf(stdout, "state: redelivered %s: status %d, %s after %s%s\n", rec.Time.UTC().Format(time.RFC3339),
		rec.Status, dashIfEmpty(string(rec.Disposition)), countNoun(rec.Attempts, "attempt"), noteSuffix(rec.Note))
	return nil
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

// headerFlag collects -header 'Name: value', the credentials a letter
// never keeps.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
		return errors.New("want 'Name: value'")
	}
	f.h.Add(name, value)
	return nil
}

func dlRedeliver(args []string, stdout, stderr io.Writer) error {
	fs, db := newFlagSet("deadletter redeliver")
	all := fs.Bool("all", false, "redeliver every waiting letter")
	trustKey := fs.Bool("trust-key", false, "send ambiguous letters too: the funder honours Idempotency-Key")
	worker := fs.String("worker", "", "the name the claims are leased under (default grantretry-fleet-<host>-<pid>)")
	timeout := fs.Duration("timeout", time.Minute, "how long one letter's redelivery may take")
	hdr := &headerFlag{h: http.Header{}}
	fs.Var(hdr, "header", "a header to send with every letter, 'Name: value' (repeatable): the credentials a letter never keeps")
	ids, err := parse(fs, args, dlRedeliverSynopsis, stdout)
	if err != nil {
		return err
	}
	if *all == (len(ids) > 0) {
		return usagef("redeliver: give -all or letter ids, not both or neither")
	}
	if *worker == "" {
		host, _ := os.Hostname()
		*worker = fmt.Sprintf("grantretry-fleet-%s-%d", host, os.Getpid())
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	letters := fleet.NewLetters(pool)
	var claims []*fleet.Claim
	if *all {
		claims, err = letters.Claim(ctx, *worker, 1<<20)
	} else {
		claims, err = letters.ClaimIDs(ctx, *worker, ids)
	}
	if err != nil {
		return fmt.Errorf("redeliver: %w", err)
	}
	total := len(claims)
	if !*all {
		total = len(ids)
	}
	failed := total - len(claims) // named but not waiting, or leased to another worker
	if failed > 0 {
		fmt.Fprintf(stderr, "grantretry-fleet: deadletter: %s not claimed: not in the database, already redelivered, or leased to another worker\n", countNoun(failed, "letter"))
	}
	tp := grantretry.New(nil)
	defer tp.CloseIdleConnections()
	client := &http.Client{Transport: withHeaders{next: tp, header: hdr.h},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range claims {
		if err := redeliverOne(ctx, letters, c, client, *trustKey, *timeout, stdout); err != nil {
			fmt.Fprintf(stderr, "grantretry-fleet: deadletter: %v\n", err)
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %s not redelivered", failed, countNoun(total, "letter"))
	}
	if total == 0 {
		fmt.Fprintln(stdout, "no letters to redeliver")
	}
	return nil
}

func redeliverOne(ctx context.Context, letters *fleet.Letters, c *fleet.Claim, client *http.Client, trustKey bool, timeout time.Duration, stdout io.Writer) error {
	l := c.Letter
	if l.Ambiguous && l.IdempotencyKey != "" && !trustKey {
		err := fmt.Errorf("letter %s not sent: its last attempt may have been applied; ask the funder first (fleet.Letters.Redeliver with a reconciler), or pass -trust-key if it honours Idempotency-Key", l.ID)
		return errors.Join(err, letters.Release(ctx, c))
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := letters.Redeliver(rctx, c, client, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "redelivered %s: answered %d (%s after %s)\n", l.ID, r.Status, r.Disposition, countNoun(r.Attempts, "attempt"))
	return nil
}

// withHeaders sets its headers on a clone of each request.
type withHeaders struct {
	next   http.RoundTripper
	header http.Header
}

func (w withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.header {
		r.Header[k] = v
	}
	return w.next.RoundTrip(r)
}
