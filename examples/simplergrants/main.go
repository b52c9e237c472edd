// Command simplergrants runs a pipeline against a fake of the Simpler
// Grants.gov REST API (internal/fakesimpler) through simplergrants.Profile:
// seven applications, each started and then submitted, while the API drops a
// connection after carrying a request out, its gateway gives up at 29 s
// while the API goes on, another process spends the gateway's burst, the
// API goes into maintenance and the month's quota runs out. It tells what
// happened to each call, and shows from the fake's own ledger that no
// application was started or submitted twice and that no call was reported
// failed that the API received.
//
//	go run ./examples/simplergrants
//
// Everything runs in process against 127.0.0.1 and needs no network. Time
// is simulated: the API, its gateway and the Transport share one clock,
// which moves only when one of them waits, so the 29 s timeout, the
// backoffs and the month's end take no time at all.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "simplergrants: unexpected argument %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "simplergrants:", err)
		os.Exit(1)
	}
}
