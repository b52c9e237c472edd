// Command grantsgov runs the Grants.gov demo (package demo): six
// applications to a funder that fails the way real ones do, three to a
// Grants.gov S2S endpoint that ignores Idempotency-Key, the funders'
// ledgers, the dead letter redelivered, and the audit trail verified. See
// the README's "Try it".
//
//	go run ./examples/grantsgov [-v] [-keep DIR]
//
// It tells each submission, what happened and why; the audit records go
// to a hash-chained trail, and the dead letters beside it, in a new
// temporary directory that is removed when the demo ends. -keep DIR keeps
// them in DIR instead (a new or empty directory) and prints the commands
// that look at them. -v also prints each zap audit line as it is written.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/grantretry/grantretry/examples/grantsgov/demo"
)

func main() {
	verbose := flag.Bool("v", false, "also print each zap audit line as it is written")
	keep := flag.String("keep", "", "keep the audit trail and the dead letters in `DIR`, a new or empty directory (default: a temporary one, removed at the end)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "grantsgov: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	var o demo.Options
	if *verbose {
		o.Lines = os.Stdout
	}
	if err := demo.RunWith(os.Stdout, *keep, o); err != nil {
		fmt.Fprintln(os.Stderr, "grantsgov:", err)
		os.Exit(1)
	}
}
