// Command grantretry-fleet is grantretry's command-line tool on a fleet's
// PostgreSQL database (package fleet): the same audit and deadletter
// subcommands as cmd/grantretry, which reads files and must not require a
// database driver.
//
//	grantretry-fleet audit verify [-pg DSN] [LOCAL_TRAIL...]
//	grantretry-fleet audit trace [-pg DSN] (-correlation ID | -submission ID | -key KEY)
//	grantretry-fleet deadletter list [-pg DSN] [-submission ID] [-json]
//	grantretry-fleet deadletter show [-pg DSN] ID [-json | -body]
//	grantretry-fleet deadletter redeliver [-pg DSN] (ID... | -all | -submission ID) [-rate N/s] [-budget RETRIES] [-deadline D] [-concurrency N] [-worker NAME] [-include-refused] [-early] [-late] [-trust-key] [-header 'Name: value']... [-header-env Name=VAR]... [-rules FILE] [-dry-run] [-timeout D]
//	grantretry-fleet deadletter retire [-pg DSN] ID... -reason TEXT [-by NAME]
//	grantretry-fleet deadletter drain [-pg DSN] DIR...
//	grantretry-fleet schema (migrate | drop [-yes]) [-pg DSN]
//	grantretry-fleet sim [flags]
//	grantretry-fleet version
//
// The DSN comes from -pg or GRANTRETRY_PG_DSN. Errors go to standard
// error as "grantretry-fleet: <command>: ...". The exit status is 0 on
// success, 1 when the command failed and 2 when it was called wrongly;
// deadletter list, show, redeliver and retire run the operator's core
// (internal/operator), as cmd/grantretry's do, and say their results, the
// summary and the exit status of redeliver in the same words.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/grantretry/grantretry/internal/operator"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envDSN names the variable that gives the database when -pg does not.
const envDSN = "GRANTRETRY_PG_DSN"

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usageText = `Usage: grantretry-fleet <command> <subcommand> [flags] [args]

Commands:
  audit verify      verify every writer's hash chain in the database's trail,
                    and any local trail files given (the fallback of a
                    process that could not reach the database)
  audit trace       print every record of the calls that match a selector
  deadletter list   list the letters waiting in the database, late ones
                    first, then due ones, and what each last got
  deadletter show   show one letter and, if redelivered or retired, the
                    record of it
  deadletter redeliver
                    send letters again at a pace, each claimed under a
                    lease just before it is sent; -all sends the letters
                    that are due, not late, not refused and not ambiguous
  deadletter retire take letters out for good, with the reason on the record
                    and on the fleet's trail
  deadletter drain  move the letters of fallback directories into the database
  schema migrate    create the fleet's tables and functions (fleet.Migrate)
  schema drop       remove them, and everything they hold (fleet.Drop)
  sim               the fleet storm: P Transports sharing a database vs
                    P with local state (see docs/fleet.md)
  version           print the version it was built from (also -version)

The database is -pg DSN, or GRANTRETRY_PG_DSN. Run
'grantretry-fleet <command> <subcommand> -help' for the flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a command called wrongly. help names the command whose
// -help lists the flags, when it is a subcommand ("deadletter list"); ""
// means the command that was run.
type usageError struct {
	err  error
	help string
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{err: fmt.Errorf(format, args...)} }

// subUsage points a usage error of the subcommand cmd ("deadletter
// list") at its own help, which lists its flags, rather than at the
// command's.
func subUsage(cmd string, err error) error {
	var uerr usageError
	if !errors.As(err, &uerr) || uerr.help != "" {
		return err
	}
	return usageError{err: uerr.err, help: cmd}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		io.WriteString(stderr, usageText)
		return exitUsage
	}
	if isHelp(args[0]) {
		io.WriteString(stdout, usageText)
		return exitOK
	}
	name := args[0]
	if operator.IsVersionFlag(name) {
		name = "version"
	}
	var err error
	switch name {
	case "version":
		err = runVersion(args[1:], stdout)
	case "audit":
		err = runAudit(args[1:], stdout)
	case "deadletter":
		err = runDeadLetter(args[1:], stdout, stderr)
	case "schema":
		err = runSchema(args[1:], stdout)
	case "sim":
		err = runSim(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "grantretry-fleet: unknown command %q\n\n%s", name, usageText)
		return exitUsage
	}
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uerr):
		help := name
		if uerr.help != "" {
			help = uerr.help
		}
		fmt.Fprintf(stderr, "grantretry-fleet: %s: %v\nRun 'grantretry-fleet %s -help' for its flags.\n", name, uerr.err, help)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "grantretry-fleet: %s: %v\n", name, err)
		return exitFailure
	}
}

func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// runVersion prints the version of the fleet module and of the library it
// was built with. It takes no flags.
func runVersion(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			io.WriteString(stdout, "Usage: grantretry-fleet version\n\nPrints the version of the fleet module this program was built from, that\nof the grantretry library it was built with, and the Go toolchain.\n")
			return flag.ErrHelp
		}
		return usagef("unexpected argument %q", args[0])
	}
	return operator.WriteVersion(stdout, "grantretry-fleet")
}

// dbFlags is the -pg flag every database subcommand has.
type dbFlags struct{ dsn string }

func newFlagSet(name string) (*flag.FlagSet, *dbFlags) {
	fs := flag.NewFlagSet("grantretry-fleet "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	d := &dbFlags{}
	fs.StringVar(&d.dsn, "pg", "", "the fleet's database (default $"+envDSN+")")
	return fs, d
}

// parse parses flags wherever they are among the arguments and returns
// the arguments. On -help it prints synopsis and the flags.
func parse(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) ([]string, error) {
	var rest []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stdout, synopsis+"\nFlags:\n")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, usageError{err: err}
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
}

// open connects to the DSN of -pg or the environment.
func (d *dbFlags) open(ctx context.Context) (*pgxpool.Pool, error) {
	dsn := d.dsn
	if dsn == "" {
		dsn = os.Getenv(envDSN)
	}
	if dsn == "" {
		return nil, usagef("no database: give -pg DSN or set %s", envDSN)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, usagef("-pg: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	return pool, nil
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func dashIfEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
