package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
)

// lowVolumeParallel is how many low-volume runs go at once. Each is one
// worker that sleeps most of the time, so they share 2 cores easily.
const lowVolumeParallel = 10

// ProbeOutcome is how the call a probe failed ended.
type ProbeOutcome string

// The probe outcomes.
const (
	ProbeRetried ProbeOutcome = "retried"      // it got its retry: more than one attempt
	ProbeRefused ProbeOutcome = "refused"      // the retry throttle refused its retry (retry_throttled)
	ProbeBreaker ProbeOutcome = "circuit_open" // the breaker, half-open or open again, stopped it
	ProbeOther   ProbeOutcome = "other"        // it stopped for another reason
	ProbeNone    ProbeOutcome = "none"         // no call was probed: the run ended first
)

// LowVolumeRun is what one seed of the low-volume scenario measured for one
// policy: its run without a probe, and the outcome of each probe's run.
// Times are simulated, and those "after the blip" count from its last
// failure.
type LowVolumeRun struct {
	Seed uint64

	// BlipEnded says whether the blip's failures were all served, and
	// BlipEnd when the last one was.
	BlipEnded bool
	BlipEnd   time.Duration

	Calls     int // calls started in the run
	AfterBlip int // calls started after the blip
	// Met is the calls after the blip that met a transient failure: those
	// that made more than one attempt, or that ended dead_letter or
	// circuit_open after one. Refused is those the retry throttle refused
	// a retry (stop reason retry_throttled).
	Met, Refused int
	// LastRefusal is the start of the last call after the blip that was
	// refused a retry, if any was (Refusals).
	LastRefusal time.Duration
	Refusals    bool

	// Probes holds the outcome of each of the Scenario's probes.
	Probes []ProbeOutcome

	pace float64 // calls started against those the workload asks for
}

// BackBy is the first probe delay from which every probe's call got its
// retry; ok is false when the last probe's did not.
func (r LowVolumeRun) BackBy(probes []time.Duration) (d time.Duration, ok bool) {
	i := len(r.Probes)
	for i > 0 && r.Probes[i-1] == ProbeRetried {
		i--
	}
	if i == len(r.Probes) {
		return 0, false
	}
	return probes[i], true
}

// LowVolumeResult is one policy's runs of the low-volume scenario, one per
// seed.
type LowVolumeResult struct {
	Policy Policy
	Runs   []LowVolumeRun
	Wall   time.Duration // real time all its runs took
}

// distorted reports whether a seed's run fell behind its time scale.
func (r LowVolumeResult) distorted() bool {
	for _, run := range r.Runs {
		if run.pace < MinPace {
			return true
		}
	}
	return false
}

// Met and Refused add up the seeds' calls after the blip that met a
// transient failure, and those refused a retry.
func (r LowVolumeResult) Met() (met, refused int) {
	for _, run := range r.Runs {
		met += run.Met
		refused += run.Refused
	}
	return met, refused
}

// RefusedShare is the share of the calls after the blip that met a
// transient failure, over all seeds, that were refused a retry; NaN when
// none met one.
func (r LowVolumeResult) RefusedShare() float64 {
	met, refused := r.Met()
	if met == 0 {
		return math.NaN()
	}
	return float64(refused) / float64(met)
}

// Retried counts the seeds whose probe i got its retry, and those whose
// probe ended each way.
func (r LowVolumeResult) Retried(i int) (retried int, by map[ProbeOutcome]int) {
	by = make(map[ProbeOutcome]int)
	for _, run := range r.Runs {
		by[run.Probes[i]]++
	}
	return by[ProbeRetried], by
}

// lowVolumeRun measures one seed's run without a probe.
func lowVolumeRun(sc Scenario, raw run) LowVolumeRun {
	out := LowVolumeRun{Seed: sc.Seed}
	out.BlipEnd, out.BlipEnded = raw.f.blipEndedAt()
	for _, calls := range raw.calls {
		for _, c := range calls {
			out.Calls++
			if !out.BlipEnded || c.start < out.BlipEnd {
				continue
			}
			out.AfterBlip++
			if !metFailure(c.callEnd) {
				continue
			}
			out.Met++
			if c.stop == grantretry.StopThrottled {
				out.Refused++
				out.Refusals = true
				out.LastRefusal = max(out.LastRefusal, c.start-out.BlipEnd)
			}
		}
	}
	if want := float64(sc.Run) / float64(sc.Think()+sc.Latency) * float64(sc.Workers); want >= 1 {
		out.pace = float64(out.Calls) / want
	}
	return out
}

// metFailure reports whether a grantretry call met a transient failure.
func metFailure(e callEnd) bool {
	switch {
	case e.attempts > 1:
		return true
	case e.attempts == 1:
		return e.disp == grantretry.DeadLetter || e.disp == grantretry.CircuitOpen
	}
	return false
}

// probeOutcome finds the call the funder probed among calls and says how
// it ended.
func probeOutcome(calls [][]callRecord, probed string) ProbeOutcome {
	if probed == "" {
		return ProbeNone
	}
	for _, cs := range calls {
		for _, c := range cs {
			if c.corr != probed {
				continue
			}
			switch {
			case c.attempts > 1:
				return ProbeRetried
			case c.stop == grantretry.StopThrottled:
				return ProbeRefused
			case c.disp == grantretry.CircuitOpen:
				return ProbeBreaker
			}
			return ProbeOther
		}
	}
	return ProbeNone
}

// RunLowVolume runs the low-volume scenario for each policy, one policy
// after another: for each of its seeds, one run without a probe and one
// per probe, several at once, each against a fresh funder and a fresh
// Transport. The policies must be grantretry's: their outcomes are what it
// measures. progress, if not nil, gets one line as each policy starts.
func RunLowVolume(ctx context.Context, sc Scenario, ps []Policy, progress io.Writer) ([]LowVolumeResult, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if sc.Kind != KindLowVolume {
		return nil, fmt.Errorf("scenario %q is not %s", sc.Kind, KindLowVolume)
	}
	if len(ps) == 0 {
		return nil, errors.New("no policy to run")
	}
	for _, p := range ps {
		if !p.SendsKey {
			return nil, fmt.Errorf("policy %s: the low-volume scenario reads grantretry's outcomes, and %s has none", p.ID, p.ID)
		}
	}
	out := make([]LowVolumeResult, 0, len(ps))
	for _, p := range ps {
		if progress != nil {
			fmt.Fprintf(progress, "sim: running %s: %d seeds, %d runs each, %d at once (up to %v of simulated time, %v of real time, per run)\n",
				p.Name, sc.Seeds, 1+len(sc.Probes), lowVolumeParallel, sc.Run, sc.realTime(sc.Run).Round(time.Millisecond))
		}
		r, err := runLowVolumePolicy(ctx, sc, p)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func runLowVolumePolicy(ctx context.Context, sc Scenario, p Policy) (LowVolumeResult, error) {
	began := time.Now()
	runs := make([]LowVolumeRun, sc.Seeds)
	for i := range runs {
		runs[i].Probes = make([]ProbeOutcome, len(sc.Probes))
	}
	type job struct{ seed, probe int } // probe -1: the run without one
	jobs := make(chan job)
	var mu sync.Mutex // guards runs and firstErr
	var firstErr error
	var wg sync.WaitGroup
	for range lowVolumeParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				s := sc
				s.Seed = sc.Seed + uint64(j.seed)
				var probe time.Duration
				if j.probe >= 0 {
					probe = sc.Probes[j.probe]
				}
				raw, err := runOnce(ctx, s, p, policyIndex(p.ID), probe)
				mu.Lock()
				switch {
				case err != nil:
					firstErr = cmpOr(firstErr, err)
				case j.probe < 0:
					probes := runs[j.seed].Probes
					runs[j.seed] = lowVolumeRun(s, raw)
					runs[j.seed].Probes = probes
				default:
					runs[j.seed].Probes[j.probe] = probeOutcome(raw.calls, raw.f.probed())
				}
				mu.Unlock()
			}
		}()
	}
	// The longest runs first, so the last ones to start are short.
	for seed := range sc.Seeds {
		jobs <- job{seed, -1}
	}
	for probe := len(sc.Probes) - 1; probe >= 0; probe-- {
		for seed := range sc.Seeds {
			jobs <- job{seed, probe}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return LowVolumeResult{}, firstErr
	}
	return LowVolumeResult{Policy: p, Runs: runs, Wall: time.Since(began)}, nil
}

// cmpOr returns a if it is not nil, else b.
func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// The low-volume limits: the share of calls that meet a transient
// failure after the blip and are refused a retry, and how long after the
// blip retries may stay off.
const (
	MaxRefusedShare = 0.02
	MaxRetriesOff   = 2 * time.Minute
)

// LowVolumeTargets measures the runs against the low-volume
// targets, for each policy: the share of calls refused a retry, over all
// seeds, and the probe delay from which retries were back, in every seed.
func LowVolumeTargets(sc Scenario, rs []LowVolumeResult) []Check {
	var out []Check
	for _, r := range rs {
		met, refused := r.Met()
		share := r.RefusedShare()
		out = append(out, Check{
			Text: fmt.Sprintf("%s: %s of the %d calls that met a transient failure after the blip were refused a retry (%d), at most %.0f%%",
				r.Policy.Name, fmtShare(share), met, refused, 100*MaxRefusedShare),
			Met:       !math.IsNaN(share) && share <= MaxRefusedShare,
			Distorted: r.distorted(),
		})
		if len(sc.Probes) == 0 {
			continue
		}
		back := backBySummary(r, sc.Probes)
		out = append(out, Check{
			Text: fmt.Sprintf("%s: retries back by %s after the blip (probes; median, over %d seeds), at most %v in every seed",
				r.Policy.Name, back.text(), len(r.Runs), MaxRetriesOff),
			Met:       back.allWithin(MaxRetriesOff),
			Distorted: r.distorted(),
		})
	}
	return out
}

// spread is a median and range over seeds of a time that may be beyond
// what was measured: censored values count as longer than any other.
type spread struct {
	values   []time.Duration // sorted; the censored ones are left out
	censored int
	beyond   time.Duration // what the censored ones are known to exceed
}

func newSpread(values []time.Duration, censored int, beyond time.Duration) spread {
	slices.Sort(values)
	return spread{values: values, censored: censored, beyond: beyond}
}

// at returns the value of rank i (from 0) as text.
func (s spread) at(i int) string {
	if i >= len(s.values) {
		return "> " + fmtDur(s.beyond)
	}
	return fmtDur(s.values[i])
}

// text is "median (range min-max)".
func (s spread) text() string {
	n := len(s.values) + s.censored
	if n == 0 {
		return "n/a"
	}
	median := s.at((n - 1) / 2)
	if n%2 == 0 && n/2 < len(s.values) {
		median = fmtDur((s.values[n/2-1] + s.values[n/2]) / 2)
	}
	return fmt.Sprintf("%s (range %s to %s)", median, s.at(0), s.at(n-1))
}

// allWithin reports whether every value was measured and is at most d.
func (s spread) allWithin(d time.Duration) bool {
	return s.censored == 0 && len(s.values) > 0 && s.values[len(s.values)-1] <= d
}

func backBySummary(r LowVolumeResult, probes []time.Duration) spread {
	var vals []time.Duration
	censored := 0
	for _, run := range r.Runs {
		if d, ok := run.BackBy(probes); ok {
			vals = append(vals, d)
		} else {
			censored++
		}
	}
	return newSpread(vals, censored, probes[len(probes)-1])
}

// lastRefusalSummary is the seeds' last refusals after the blip, 0 for a
// seed with none, and how many seeds had one.
func lastRefusalSummary(r LowVolumeResult) (spread, int) {
	var vals []time.Duration
	n := 0
	for _, run := range r.Runs {
		vals = append(vals, run.LastRefusal)
		if run.Refusals {
			n++
		}
	}
	return newSpread(vals, 0, 0), n
}

// refusedShareSummary is the median and range of the seeds' refused
// shares, as text; seeds where no call met a failure are left out.
func refusedShareSummary(r LowVolumeResult) string {
	var shares []float64
	for _, run := range r.Runs {
		if run.Met > 0 {
			shares = append(shares, float64(run.Refused)/float64(run.Met))
		}
	}
	if len(shares) == 0 {
		return "n/a"
	}
	slices.Sort(shares)
	n := len(shares)
	median := shares[(n-1)/2]
	if n%2 == 0 {
		median = (shares[n/2-1] + shares[n/2]) / 2
	}
	return fmt.Sprintf("%s (range %s to %s)", fmtShare(median), fmtShare(shares[0]), fmtShare(shares[n-1]))
}
