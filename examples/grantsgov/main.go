// Command grantsgov runs the Grants.gov demo (package demo): six
// applications to a funder that fails the way real ones do, three to a
// Grants.gov S2S endpoint that ignores Idempotency-Key, the funders'
// ledgers, the dead letter redelivered, and the audit trail verified. See
// the README's "Try it".
package main

import (
	"fmt"
	"os"

	"github.com/grantretry/grantretry/examples/grantsgov/demo"
)

func main() {
	dir, err := demo.Dir()
	if err == nil {
		err = demo.Run(os.Stdout, dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grantsgov:", err)
		os.Exit(1)
	}
}
