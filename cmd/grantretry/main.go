// Command grantretry holds the tools that come with the grantretry library,
// one subcommand each, each described in its page of docs/:
//
//	grantretry sim [flags]
//	    run the storm simulator (see docs/choosing-budgets.md)
//	grantretry audit verify|trace FILE... [flags]
//	    verify an audit trail, or trace one call through it (see docs/audit-trail.md)
//	grantretry deadletter list|show|redeliver|retire DIR [ID...] [flags]
//	    list, show, redeliver and retire dead letters (see docs/dead-letters.md, the runbook)
//	grantretry classify [flags] FILE
//	    print what grantretry does with a captured answer (see docs/teaching.md)
//	grantretry version
//	    print the version it was built from (also -version, --version)
//
// "grantretry help" lists the subcommands and "grantretry <command> -help"
// gives a subcommand's flags. Errors are written to standard error as
// "grantretry: <command>: ...". The exit status is 0 on success, 1 when
// the command failed and 2 when it was called wrongly.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/grantretry/grantretry/internal/operator"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand. run gets the arguments after the command's
// name; it returns a usageError when it was called wrongly, and
// flag.ErrHelp once it has printed its help.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands, in the order "help" lists them.
var commands = []command{
	{name: "sim", summary: "run the storm simulator: retry policies against a funder that goes down", run: runSim},
	{name: "audit", summary: "verify an audit trail's hash chain, or trace one call through it", run: runAudit},
	{name: "deadletter", summary: "list, show, redeliver and retire dead letters kept in a directory", run: runDeadLetter},
	{name: "classify", summary: "print what grantretry does with a captured answer of a funder", run: runClassify},
	{name: "version", summary: "print the version of grantretry this program was built from", run: runVersion},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and turns its error into an exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	if isHelp(name) {
		if len(args) > 1 {
			return run([]string{args[1], "-help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	}
	if operator.IsVersionFlag(name) {
		name = "version"
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "grantretry: unknown command %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	err := cmd.run(args[1:], stdout, stderr)
	var uerr usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &uerr):
		help := name
		if uerr.help != "" {
			help = uerr.help
		}
		fmt.Fprintf(stderr, "grantretry: %s: %v\nRun 'grantretry %s -help' for its flags.\n", name, uerr.err, help)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "grantretry: %s: %v\n", name, err)
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

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("Usage: grantretry <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'grantretry <command> -help' for a command's flags.\n")
	io.WriteString(w, b.String())
}

const versionSynopsis = `Usage: grantretry version

Prints the version of the module this program was built from: the tag
for one installed with "go install ...@v1.2.3", "(devel)" for one built
from a checkout; and the Go toolchain that built it. It takes no flags.
`

// runVersion prints the program's version, as "-version" and "--version"
// do.
func runVersion(args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			io.WriteString(stdout, versionSynopsis)
			return flag.ErrHelp
		}
		return usageError{err: fmt.Errorf("unexpected argument %q", args[0])}
	}
	return operator.WriteVersion(stdout, "grantretry")
}

// usageError is a command called wrongly: a bad flag or argument. help
// names the command whose -help lists the flags, when it is a subcommand
// ("audit trace"); "" means the command that was run.
type usageError struct {
	err  error
	help string
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// newFlagSet returns a flag set that reports errors to its caller instead
// of printing them, so run writes every message in one form.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("grantretry "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs. On -help it writes synopsis and the
// flags to stdout and returns flag.ErrHelp; it accepts no positional
// argument.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) error {
	if err := parseFlagsAndArgs(fs, args, synopsis, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// parseFlagsAndArgs is parseFlags for a command that takes positional
// arguments: fs.Args() holds them, for the caller to check.
func parseFlagsAndArgs(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(stdout, synopsis+"\nFlags:\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return flag.ErrHelp
	}
	if err != nil {
		return usageError{err: err}
	}
	return nil
}

// countNoun is "1 record", "2 records".
func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// dashIfEmpty stands "-" for an empty table cell.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
