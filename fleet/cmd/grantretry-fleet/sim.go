package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/grantretry/grantretry/fleet/internal/fleetsim"
)

const simSynopsis = `Usage: grantretry-fleet sim [-pg DSN] [-p 16] [-workers 1] [-outage 8s] [-seed 1] [-breaker=false] [-chart FILE.svg]

The fleet storm: a loopback funder up for -before, answering 503 for
-outage, then up for -after, called by P Transports of -workers workers
each: first each on its local state ("local"), then sharing the breaker
and budget through the database ("fleet"), then one Transport with as many
workers ("single"). The P Transports share nothing but the database: each
has its own Coordinator, pool and listener. Prints the table and one
met/NOT met line per target of fleet mode (docs/fleet.md). -seed spreads
the workers' starts and pauses (0: all in step, so the funder gets bursts of every
worker at once). -breaker=false turns every Transport's breaker off, so
that only the retry budget (each process's own, the fleet's, or the
single process's) bounds the retries. -chart also writes the three runs side by side as SVG:
the attempts the funder received over time, answered and failed, with
the command that writes it again in a comment at its top. Use a
database of its own: the fleet run opens about 3 connections per
process.
`

func runSim(args []string, stdout, stderr io.Writer) error {
	fs, db := newFlagSet("sim")
	p := fs.Int("p", 16, "processes (independent Transports)")
	workers := fs.Int("workers", 1, "workers per process")
	breaker := fs.Bool("breaker", true, "give every Transport its breaker (false: the retry budget alone bounds the retries, which the retries target measures)")
	pace := fs.Duration("pace", 20*time.Millisecond, "a worker's pause between calls")
	before := fs.Duration("before", 2*time.Second, "the funder is up first for")
	outage := fs.Duration("outage", 8*time.Second, "then down for")
	after := fs.Duration("after", 3*time.Second, "then up again for")
	seed := fs.Uint64("seed", 1, "spreads the workers' starts and pauses (0: every worker in step, bursts of all workers at once)")
	chart := fs.String("chart", "", "also write the chart of the runs to this SVG file")
	rest, err := parse(fs, args, simSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("sim: unexpected argument %q", rest[0])
	}
	if *p < 1 || *workers < 1 || *outage <= 0 {
		return usagef("sim: want -p >= 1, -workers >= 1 and -outage > 0")
	}
	if err := checkWritable(*chart); err != nil {
		return err
	}
	dsn := db.dsn
	if dsn == "" {
		dsn = os.Getenv(envDSN)
	}
	if dsn == "" {
		return usagef("sim: no database: give -pg DSN or set %s", envDSN)
	}
	base := fleetsim.Config{Processes: *p, Workers: *workers, Pace: *pace, Before: *before, Outage: *outage, After: *after, DSN: dsn, Seed: *seed, NoBreaker: !*breaker}
	local, fleetCfg, single := base, base, base
	fleetCfg.Fleet = true
	single.Processes, single.Workers = 1, *p**workers
	ctx := context.Background()
	var rs []fleetsim.Result
	for _, cfg := range []fleetsim.Config{local, fleetCfg, single} {
		r, err := fleetsim.Run(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	policy := "breaker threshold 5, probe every 2s"
	if !*breaker {
		policy = "no breaker: the retry budget alone"
	}
	fmt.Fprintf(stdout, "funder: up %v, down %v (503), up %v; %s; seed %d\n\n", *before, *outage, *after, policy, *seed)
	fleetsim.WriteTable(stdout, rs)
	fmt.Fprintln(stdout)
	fleetsim.WriteBreakdown(stdout, rs[1])
	fmt.Fprintln(stdout)
	fleetsim.WriteChecks(stdout, fleetsim.Targets(rs[1], rs[2]))
	if *chart == "" {
		return nil
	}
	if err := writeChart(*chart, rs, simCommand(fs)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", *chart)
	return nil
}

// checkWritable fails before a run of a minute, not after, when path's
// directory does not exist.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return usagef("sim: -chart %s: no directory %s", path, dir)
	}
	return nil
}

func writeChart(path string, rs []fleetsim.Result, command string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fleetsim.WriteSVG(f, rs, command); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// simCommand is the command line that runs sim again with the flags
// given, run from the fleet module's directory. The database is always
// "$GRANTRETRY_PG_DSN", so that a DSN's password never lands in a chart.
func simCommand(fs *flag.FlagSet) string {
	parts := []string{"cd fleet && go run ./cmd/grantretry-fleet sim -pg \"$" + envDSN + "\""}
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "pg" {
			parts = append(parts, "-"+f.Name, shellQuote(f.Value.String()))
		}
	})
	return strings.Join(parts, " ")
}

// shellQuote quotes s the way a shell would read it back.
func shellQuote(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n'\"$`\\|&;<>()*?[]#~{}!") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
