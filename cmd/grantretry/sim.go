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
one-second rate after recovery, the recovery lag, the goodput, the share of
calls that succeeded, the p99 completion time, duplicate effects at the
funder and the dispositions, and the targets each met or not. It writes no
file unless asked: -md FILE writes every column with its definition as
Markdown, and -svg FILE a chart of requests per second.

A run the machine could not keep up with (timers firing late, shown by a
warning) is distorted: its targets get no verdict. Lower -scale.

-scenario low-volume runs instead a pipeline of one call every 30 to 60 s:
a blip of 6 failures, then 5% of requests failing at random, over 20
seeds. It prints the share of calls that met a transient failure and were
refused a retry, and, from probe runs, how long after the blip retries
stayed off; -md and -svg write the same. Its defaults differ (one worker,
a 4-hour run, time scale 1000, no outage); the flags still override them.

-scenario flaky runs instead four workers against a funder with no outage
that answers the first -fail-first (2) attempts of every call 503, then
201: a funder that is up but fails most attempts. It prints each policy's
dispositions, the calls the retry throttle refused a retry, and the
requests the funder received; -md writes the same (it draws no chart).

See docs/choosing-budgets.md.
`

// simFlags are the sim command's flags, bound to a Scenario.
type simFlags struct {
	sc       sim.Scenario
	kind     string
	throttle throttleFlag
	breaker  breakerFlag
	probes   probesFlag
	policies string
	md, svg  string
}

// lowVolumePolicies are the policies -scenario low-volume runs unless
// -policies names others: those with a retry throttle.
const lowVolumePolicies = "throttle,default"

// newSimFlags binds the sim command's flags to the preset of the scenario
// kind: sim.Default() or sim.LowVolumeDefault().
func newSimFlags(fs *flag.FlagSet, kind sim.Kind) *simFlags {
	f := &simFlags{sc: sim.Default(), kind: string(kind)}
	policies := strings.Join(sim.PolicyIDs(), ",")
	switch kind {
	case sim.KindLowVolume:
		f.sc, policies = sim.LowVolumeDefault(), lowVolumePolicies
	case sim.KindFlaky:
		f.sc, policies = sim.FlakyDefault(), sim.FlakyPolicies
	}
	sc := &f.sc
	fs.StringVar(&f.kind, "scenario", f.kind, `what to simulate: "outage" (a full outage under load), "low-volume" (a blip, then few calls) or "flaky" (a funder failing most attempts)`)
	fs.IntVar(&sc.Workers, "workers", sc.Workers, "concurrent workers, each one call at a time")
	fs.IntVar(&sc.Capacity, "capacity", sc.Capacity, "funder's capacity, requests per simulated second; excess gets 429")
	fs.Float64Var(&sc.Load, "load", sc.Load, "offered base load as a share of capacity, in (0, 1]; sets the think time")
	fs.DurationVar(&sc.Latency, "latency", sc.Latency, "how long the funder works on an accepted request")
	fs.DurationVar(&sc.OutageStart, "outage-start", sc.OutageStart, "when the full outage begins")
	fs.DurationVar(&sc.Outage, "outage", sc.Outage, "how long the full outage lasts")
	fs.DurationVar(&sc.Run, "run", sc.Run, "length of the run; no call starts after it")
	fs.Float64Var(&sc.Scale, "scale", sc.Scale, "time scale: simulated seconds per real second, 1 to 1000")
	fs.Uint64Var(&sc.Seed, "seed", sc.Seed, "seed of the think times and of the grantretry policies' jitter; low-volume: the first seed")
	fs.IntVar(&sc.Seeds, "seeds", sc.Seeds, "low-volume: how many seeds to run, from -seed on")
	fs.DurationVar(&sc.BlipAt, "blip-at", sc.BlipAt, "low-volume: when the blip of failures starts")
	fs.IntVar(&sc.BlipFailures, "blip", sc.BlipFailures, "low-volume: how many requests the blip fails, from -blip-at on")
	fs.IntVar(&sc.FailFirst, "fail-first", sc.FailFirst, "flaky: how many attempts of each call the funder answers 503 before it answers 201")
	fs.Float64Var(&sc.FailShare, "fail-share", sc.FailShare, "share of the other requests answered 503 at random, each independently")
	f.probes = probesFlag{sc: sc}
	fs.Var(&f.probes, "probes", `low-volume: delays after the blip at which a probe run fails one call, comma-separated, or none`)
	fs.DurationVar(&sc.Base, "base", sc.Base, "grantretry policies: backoff base (WithBackoff)")
	fs.DurationVar(&sc.Cap, "cap", sc.Cap, "grantretry policies: backoff cap (WithBackoff)")
	fs.IntVar(&sc.Retries, "retries", sc.Retries, "grantretry policies: retries per call (WithBudget)")
	fs.DurationVar(&sc.Deadline, "deadline", sc.Deadline, "grantretry policies: deadline per call (WithBudget)")
	f.throttle = throttleFlag{sc: sc}
	fs.Var(&f.throttle, "throttle", `retry throttle of the "throttle" and "default" policies: maxTokens,tokenRatio or off (WithRetryThrottle)`)
	fs.DurationVar(&sc.Refill, "throttle-refill", sc.Refill, "the throttle's refill period (WithThrottleRefill); a very long one, such as 100000h, leaves gRFC A6's refill on successes alone")
	f.breaker = breakerFlag{sc: sc}
	fs.Var(&f.breaker, "breaker", `breaker of the "default" policy: threshold,cooldown or off (WithBreaker)`)
	fs.DurationVar(&sc.Probe, "probe", sc.Probe, `the "default" policy's first wait before a probe (WithBreakerProbe)`)
	fs.StringVar(&f.policies, "policies", policies, "policies to run, comma-separated, in order (low-volume: "+lowVolumePolicies+"; flaky: "+sim.FlakyPolicies+")")
	fs.StringVar(&f.md, "md", "", "write the tables, every column, and the definitions as Markdown to this file")
	fs.StringVar(&f.svg, "svg", "", "write the chart as SVG to this file")
	return f
}

// parseSimFlags parses args twice when they ask for another scenario than
// the outage: once to learn which, and again onto that scenario's preset,
// so the flags given override the preset and the others keep its values.
func parseSimFlags(args []string, stdout io.Writer) (*simFlags, error) {
	fs := newFlagSet("sim")
	f := newSimFlags(fs, sim.KindOutage)
	if err := parseFlags(fs, args, simSynopsis, stdout); err != nil {
		return nil, err
	}
	switch sim.Kind(f.kind) {
	case sim.KindOutage:
		return f, nil
	case sim.KindLowVolume, sim.KindFlaky:
		fs = newFlagSet("sim")
		f = newSimFlags(fs, sim.Kind(f.kind))
		return f, parseFlags(fs, args, simSynopsis, stdout)
	}
	return nil, usageError{err: fmt.Errorf("-scenario %q: want %s, %s or %s", f.kind, sim.KindOutage, sim.KindLowVolume, sim.KindFlaky)}
}

// simReport is what both scenarios' reports can do.
type simReport interface {
	WriteText(io.Writer) error
	WriteMarkdown(io.Writer) error
	WriteSVG(io.Writer) error
}

func runSim(args []string, stdout, stderr io.Writer) error {
	f, err := parseSimFlags(args, stdout)
	if err != nil {
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
	command := commandLine("go run ./cmd/grantretry sim", args)
	var rep simReport
	var n int
	if f.sc.Kind == sim.KindFlaky && f.svg != "" {
		return usageError{err: errors.New("-svg: the flaky scenario draws no chart")}
	}
	switch f.sc.Kind {
	case sim.KindFlaky:
		for _, p := range ps {
			if !p.SendsKey {
				return usageError{err: fmt.Errorf("-policies: %s is not a grantretry policy, and the flaky funder tells a call's attempts apart by grantretry's X-Correlation-ID", p.ID)}
			}
		}
		results, err := sim.RunFlaky(ctx, f.sc, ps, stderr)
		if err != nil {
			return simError(err)
		}
		rep, n = sim.FlakyReport{Scenario: f.sc, Results: results, Command: command}, len(results)
	case sim.KindLowVolume:
		for _, p := range ps {
			if !p.SendsKey {
				return usageError{err: fmt.Errorf("-policies: %s is not a grantretry policy, and the low-volume scenario reads grantretry's outcomes", p.ID)}
			}
		}
		results, err := sim.RunLowVolume(ctx, f.sc, ps, stderr)
		if err != nil {
			return simError(err)
		}
		rep, n = sim.LowVolumeReport{Scenario: f.sc, Results: results, Command: command}, len(results)
	default:
		results, err := sim.Run(ctx, f.sc, ps, stderr)
		if err != nil {
			return simError(err)
		}
		rep, n = sim.Report{Scenario: f.sc, Results: results, Command: command}, len(results)
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if err := writeFile(f.md, rep.WriteMarkdown); err != nil {
		return err
	}
	if err := writeFile(f.svg, rep.WriteSVG); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nran %d policies in %v", n, time.Since(began).Round(100*time.Millisecond))
	for _, p := range []string{f.md, f.svg} {
		if p != "" {
			fmt.Fprintf(stdout, "; wrote %s", p)
		}
	}
	fmt.Fprintln(stdout)
	return nil
}

// simError says "interrupted" for a run the user interrupted.
func simError(err error) error {
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	return err
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

// probesFlag is -probes: durations, comma-separated, or "none".
type probesFlag struct{ sc *sim.Scenario }

func (f *probesFlag) String() string {
	if f.sc == nil {
		return ""
	}
	if len(f.sc.Probes) == 0 {
		return "none"
	}
	out := make([]string, len(f.sc.Probes))
	for i, d := range f.sc.Probes {
		out[i] = d.String()
	}
	return strings.Join(out, ",")
}

func (f *probesFlag) Set(v string) error {
	if v == "none" {
		f.sc.Probes = nil
		return nil
	}
	var ds []time.Duration
	for _, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("want delays such as 30s,2m,1h, or none: %w", err)
		}
		ds = append(ds, d)
	}
	f.sc.Probes = ds
	return nil
}
