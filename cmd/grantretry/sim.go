package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/grantretry/grantretry/internal/sim"
)

const simSynopsis = `Usage: grantretry sim [flags]

Runs retry policies one after another against a simulated funder on a
loopback server (127.0.0.1): a capacity per second (excess answered 429),
a full outage (every request answered 503), then recovery. Workers submit
applications with think time between calls; failed ones are requeued. The
grantretry policies run the real Transport, with their durations divided by
-scale. Durations are in simulated time.

It prints, per policy, the load amplification during the outage, the peak
one-second rate after recovery, the share of calls that succeeded, p50 and
p99 completion times, duplicate effects at the funder and the dispositions;
and writes the same as Markdown (-md) and a chart of requests per second
(-svg). See docs/choosing-budgets.md.
`

// simFlags are the sim command's flags, bound to a Scenario.
type simFlags struct {
	sc       sim.Scenario
	throttle throttleFlag
	breaker  breakerFlag
	policies string
	md, svg  string
}

func newSimFlags(fs *flag.FlagSet) *simFlags {
	f := &simFlags{sc: sim.Default()}
	sc := &f.sc
	fs.IntVar(&sc.Workers, "workers", sc.Workers, "concurrent workers, each one call at a time")
	fs.IntVar(&sc.Capacity, "capacity", sc.Capacity, "funder's capacity, requests per simulated second; excess gets 429")
	fs.Float64Var(&sc.Load, "load", sc.Load, "offered base load as a share of capacity, in (0, 1]; sets the think time")
	fs.DurationVar(&sc.Latency, "latency", sc.Latency, "how long the funder works on an accepted request")
	fs.DurationVar(&sc.OutageStart, "outage-start", sc.OutageStart, "when the full outage begins")
	fs.DurationVar(&sc.Outage, "outage", sc.Outage, "how long the full outage lasts")
	fs.DurationVar(&sc.Run, "run", sc.Run, "length of the run; no call starts after it")
	fs.Float64Var(&sc.Scale, "scale", sc.Scale, "time scale: simulated seconds per real second, 1 to 1000")
	fs.Uint64Var(&sc.Seed, "seed", sc.Seed, "seed of the think times and of the grantretry policies' jitter")
	fs.DurationVar(&sc.Base, "base", sc.Base, "grantretry policies: backoff base (WithBackoff)")
	fs.DurationVar(&sc.Cap, "cap", sc.Cap, "grantretry policies: backoff cap (WithBackoff)")
	fs.IntVar(&sc.Retries, "retries", sc.Retries, "grantretry policies: retries per call (WithBudget)")
	fs.DurationVar(&sc.Deadline, "deadline", sc.Deadline, "grantretry policies: deadline per call (WithBudget)")
	f.throttle = throttleFlag{sc: sc}
	fs.Var(&f.throttle, "throttle", `retry throttle of the "throttle" and "default" policies: maxTokens,tokenRatio or off (WithRetryThrottle)`)
	f.breaker = breakerFlag{sc: sc}
	fs.Var(&f.breaker, "breaker", `breaker of the "default" policy: threshold,cooldown or off (WithBreaker)`)
	fs.StringVar(&f.policies, "policies", strings.Join(sim.PolicyIDs(), ","), "policies to run, comma-separated, in order")
	fs.StringVar(&f.md, "md", "grantretry-sim.md", `write the tables as Markdown to this file; "" for none`)
	fs.StringVar(&f.svg, "svg", "grantretry-sim.svg", `write the chart as SVG to this file; "" for none`)
	return f
}

func runSim(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim")
	f := newSimFlags(fs)
	if err := parseFlags(fs, args, simSynopsis, stdout); err != nil {
		return err
	}
	ps, err := sim.Lookup(strings.Split(f.policies, ","))
	if err != nil {
		return usageError{err: fmt.Errorf("-policies: %w", err)}
	}
	if err := f.sc.Validate(); err != nil {
		return usageError{err: err}
	}
	for _, p := range []string{f.md, f.svg} {
		if err := checkWritable(p); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	began := time.Now()
	results, err := sim.Run(ctx, f.sc, ps, stderr)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted")
		}
		return err
	}
	rep := sim.Report{Scenario: f.sc, Results: results, Command: commandLine("go run ./cmd/grantretry sim", args)}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if err := writeFile(f.md, rep.WriteMarkdown); err != nil {
		return err
	}
	if err := writeFile(f.svg, rep.WriteSVG); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nran %d policies in %v", len(results), time.Since(began).Round(100*time.Millisecond))
	for _, p := range []string{f.md, f.svg} {
		if p != "" {
			fmt.Fprintf(stdout, "; wrote %s", p)
		}
	}
	fmt.Fprintln(stdout)
	return nil
}

// checkWritable fails early, before a run, if path's directory does not
// exist.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("cannot write %s: no directory %s", path, dir)
	}
	return nil
}

// writeFile writes what write produces to path, unless path is "".
func writeFile(path string, write func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// commandLine quotes args the way a shell would read them back.
func commandLine(prefix string, args []string) string {
	parts := []string{prefix}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\|&;<>()*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// throttleFlag is -throttle: "maxTokens,tokenRatio" or "off".
type throttleFlag struct{ sc *sim.Scenario }

func (f *throttleFlag) String() string {
	if f.sc == nil {
		return ""
	}
	if !f.sc.Throttle {
		return "off"
	}
	return fmt.Sprintf("%v,%v", f.sc.MaxTokens, f.sc.TokenRatio)
}

func (f *throttleFlag) Set(v string) error {
	if v == "off" {
		f.sc.Throttle = false
		return nil
	}
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return errors.New(`want maxTokens,tokenRatio (such as 10,0.1) or off`)
	}
	maxTokens, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
	ratio, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("want maxTokens,tokenRatio (such as 10,0.1) or off: %w", err)
	}
	f.sc.Throttle, f.sc.MaxTokens, f.sc.TokenRatio = true, maxTokens, ratio
	return nil
}

// breakerFlag is -breaker: "threshold,cooldown" or "off".
type breakerFlag struct{ sc *sim.Scenario }

func (f *breakerFlag) String() string {
	if f.sc == nil {
		return ""
	}
	if !f.sc.Breaker {
		return "off"
	}
	return fmt.Sprintf("%d,%v", f.sc.Threshold, f.sc.Cooldown)
}

func (f *breakerFlag) Set(v string) error {
	if v == "off" {
		f.sc.Breaker = false
		return nil
	}
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return errors.New(`want threshold,cooldown (such as 5,60s) or off`)
	}
	threshold, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	cooldown, err2 := time.ParseDuration(strings.TrimSpace(b))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("want threshold,cooldown (such as 5,60s) or off: %w", err)
	}
	f.sc.Breaker, f.sc.Threshold, f.sc.Cooldown = true, uint32(threshold), cooldown
	return nil
}
