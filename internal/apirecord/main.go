// Command apirecord keeps the record of the exported API of grantretry's
// library modules, as Go's own api/ files do: one line per exported
// declaration, such as
//
//	pkg github.com/grantretry/grantretry, func New(http.RoundTripper, ...Option) *Transport
//
// api/<module>.txt holds a module's API at the last release, and
// api/next/<module>.txt what the code adds to it since (lines as they
// are) and removes from it (lines marked "- "). Run from the repository
// root:
//
//	go run ./internal/apirecord           # check; CI runs this
//	go run ./internal/apirecord -write    # record the code's API in api/next/
//	go run ./internal/apirecord -release  # at a release: fold api/next/ into api/<module>.txt
//
// The check fails, listing every line, when the code's API is not the
// record's, and when CHANGELOG.md's "## Unreleased" section does not name,
// in backquotes, each declaration api/next/ holds: WithSlog for the root
// package, trail.Records for another package's, Dir.All for a method or a
// field. A member of a type added or removed whole is named by its type,
// and the lines of a package added or removed whole by the package's name.
//
// The modules are the root (every package but commands, internal packages
// and examples), fleet/ and worm/ (without worm/s3test, the helper of the
// repository's own tests). The test-only modules (bench/, oteltest/,
// stacks/, faults/) have no API to keep. The lines are read from the
// packages' export data, which go list -export builds.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// grantretry is the repository's record: its library modules.
var grantretry = repo{
	root: ".",
	modules: []module{
		{name: "grantretry", dir: "."},
		{name: "fleet", dir: "fleet"},
		{name: "worm", dir: "worm", skip: []string{"s3test"}},
	},
	barePkg: "github.com/grantretry/grantretry",
}

func main() {
	write := flag.Bool("write", false, "record the code's exported API in api/next/")
	release := flag.Bool("release", false, "at a release: fold api/next/ into api/<module>.txt")
	flag.Parse()
	if flag.NArg() > 0 || (*write && *release) {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/apirecord [-write | -release]")
		os.Exit(2)
	}
	if b, err := os.ReadFile("go.mod"); err != nil || !strings.HasPrefix(string(b), "module "+grantretry.barePkg+"\n") {
		fmt.Fprintln(os.Stderr, "apirecord: run it from the repository's root")
		os.Exit(2)
	}
	var (
		report string
		err    error
	)
	switch {
	case *write:
		report, err = grantretry.write()
	case *release:
		report, err = grantretry.release()
	default:
		report, err = grantretry.check()
		if err == nil && report != "" {
			fmt.Fprint(os.Stderr, report)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apirecord:", err)
		os.Exit(1)
	}
	fmt.Print(report)
}
