package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/grantretry/grantretry"
)

// Dispositions returns every disposition, in the order reports show them.
func Dispositions() []grantretry.Disposition {
	return []grantretry.Disposition{
		grantretry.Succeeded,
		grantretry.DeadLetter,
		grantretry.CircuitOpen,
		grantretry.FailedTerminal,
		grantretry.Canceled,
	}
}

// Result is what one policy did in one run. Times are simulated. Run builds
// it once the run is over, and nothing changes it afterwards.
type Result struct {
	Policy   Policy
	Capacity int // the funder's, requests per second

	Calls        int // logical calls started
	Dispositions map[grantretry.Disposition]int

	EarlyCalls     int   // calls started before the outage
	OutageCalls    int   // calls started during the outage
	OutageRequests int64 // requests the funder received during the outage
	Requests       int64 // requests the funder received, calls in flight at the end included

	// PerSecond holds the requests the funder received in each simulated
	// second of the run: its own quota windows.
	PerSecond []int64
	// PeakAfterRecovery is the most requests the funder received in one
	// of its one-second windows from the end of the outage to the end of
	// the run, and PeakSecond the window's start, in seconds.
	PeakAfterRecovery int64
	PeakSecond        int

	P50, P99 time.Duration // from a call's start to its disposition, all calls

	Recorded   int // applications the funder recorded
	Duplicates int // recordings of a submission it had already recorded

	// SucceededPerSecond holds the requests the funder answered 200 or 201
	// in each simulated second of the run, by the second they arrived in;
	// RecordedPerSecond the applications it recorded for the first time.
	SucceededPerSecond []int64
	RecordedPerSecond  []int64
	// RecoveryLag is the time from the end of the outage to the start of
	// the first one-second window, at or after it, in which the funder
	// answered 200 or 201 to at least RecoveredShare of the offered load;
	// Recovered is false if no window of the run did.
	RecoveryLag time.Duration
	Recovered   bool
	// Goodput is the applications recorded for the first time per
	// simulated minute of the run, and GoodputAfterRecovery the same in
	// the minute of windows from the end of the outage on (or what is left
	// of the run, if less: NaN if nothing is).
	Goodput, GoodputAfterRecovery float64

	Wall time.Duration // real time the run took

	outage    time.Duration
	wantEarly float64 // calls expected before the outage at the offered load
}

// RecoveredShare is the share of the offered load that the funder must
// answer 200 or 201 in one second for recovery lag to end.
const RecoveredShare = 0.9

// Amplification is the outage's load amplification: requests the funder
// received during the outage per logical call started in it. NaN when no
// call started in it.
func (r Result) Amplification() float64 {
	if r.OutageCalls == 0 {
		return math.NaN()
	}
	return float64(r.OutageRequests) / float64(r.OutageCalls)
}

// OutageRate is the requests the funder received per second of outage.
func (r Result) OutageRate() float64 {
	return float64(r.OutageRequests) / r.outage.Seconds()
}

// Pace is the calls started before the outage, when every policy sees the
// same healthy funder, as a share of those the offered load should start.
// Well below 1, the machine did not keep up with the time scale: timers
// fired late, and every other figure is distorted. NaN when the outage
// starts at once.
func (r Result) Pace() float64 {
	if r.wantEarly < 1 {
		return math.NaN()
	}
	return float64(r.EarlyCalls) / r.wantEarly
}

// MinPace is the Pace below which a report warns that the run is distorted.
const MinPace = 0.8

// PeakRatio is PeakAfterRecovery relative to the funder's capacity.
func (r Result) PeakRatio() float64 {
	return float64(r.PeakAfterRecovery) / float64(r.Capacity)
}

// SuccessShare is the share of calls that succeeded; NaN when none ran.
func (r Result) SuccessShare() float64 {
	if r.Calls == 0 {
		return math.NaN()
	}
	return float64(r.Dispositions[grantretry.Succeeded]) / float64(r.Calls)
}

func newResult(sc Scenario, p Policy, raw run) Result {
	f := raw.f
	r := Result{
		Policy:             p,
		Capacity:           sc.Capacity,
		Dispositions:       make(map[grantretry.Disposition]int),
		OutageRequests:     f.inOutage.Load(),
		Requests:           f.total(),
		PerSecond:          perSecond(f.arrivals, sc.Run),
		SucceededPerSecond: perSecond(f.succeeded, sc.Run),
		RecordedPerSecond:  perSecond(f.fresh, sc.Run),
		Recorded:           raw.recorded,
		Duplicates:         raw.dups,
		Wall:               raw.wall,
		outage:             sc.Outage,
		wantEarly:          sc.OutageStart.Seconds() * sc.Load * float64(sc.Capacity),
	}
	r.RecoveryLag, r.Recovered = recoveryLag(r.SucceededPerSecond, sc.OutageEnd(), RecoveredShare*sc.Load*float64(sc.Capacity))
	r.Goodput = perMinute(r.RecordedPerSecond, 0, sc.Run)
	r.GoodputAfterRecovery = perMinute(r.RecordedPerSecond, sc.OutageEnd(), sc.OutageEnd()+time.Minute)
	var took []time.Duration
	for _, calls := range raw.calls {
		for _, c := range calls {
			r.Calls++
			r.Dispositions[c.disp]++
			switch {
			case c.start < sc.OutageStart:
				r.EarlyCalls++
			case c.start < sc.OutageEnd():
				r.OutageCalls++
			}
			took = append(took, c.took)
		}
	}
	slices.Sort(took)
	r.P50, r.P99 = percentile(took, 0.50), percentile(took, 0.99)
	r.PeakSecond, r.PeakAfterRecovery = peakAfter(r.PerSecond, sc.OutageEnd())
	return r
}

// peakAfter returns the busiest whole one-second window that starts at or
// after from, and its count.
func peakAfter(perSecond []int64, from time.Duration) (second int, peak int64) {
	first := int((from + time.Second - 1) / time.Second)
	second = -1
	for s := first; s < len(perSecond); s++ {
		if second < 0 || perSecond[s] > peak {
			second, peak = s, perSecond[s]
		}
	}
	return second, peak
}

// firstWindow is the first whole one-second window that starts at or after
// t.
func firstWindow(t time.Duration) int {
	return int((t + time.Second - 1) / time.Second)
}

// recoveryLag returns the time from from to the start of the first whole
// one-second window, at or after it, whose count reaches want; ok is
// false if none does.
func recoveryLag(perSecond []int64, from time.Duration, want float64) (lag time.Duration, ok bool) {
	for s := firstWindow(from); s < len(perSecond); s++ {
		if float64(perSecond[s]) >= want {
			return time.Duration(s)*time.Second - from, true
		}
	}
	return 0, false
}

// perMinute is the count per minute over the whole one-second windows that
// start in [from, to), within the run's: NaN if there are none.
func perMinute(perSecond []int64, from, to time.Duration) float64 {
	first, end := firstWindow(from), min(firstWindow(to), len(perSecond))
	if end <= first {
		return math.NaN()
	}
	var n int64
	for _, c := range perSecond[first:end] {
		n += c
	}
	return float64(n) * 60 / float64(end-first)
}

// percentile is the nearest-rank percentile of sorted; 0 if it is empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Check is one target, measured.
type Check struct {
	Text string
	Met  bool
	// Distorted says the run of the policy the target is about did not
	// keep up with its time scale (Pace below MinPace): its figures are
	// distorted, and Met is no verdict on the policy.
	Distorted bool
}

// Verdict is what a report prints for c: "met", "NOT MET", or
// "distorted: no verdict" for a distorted run.
func (c Check) Verdict() string {
	switch {
	case c.Distorted:
		return "distorted: no verdict"
	case c.Met:
		return "met"
	}
	return "NOT MET"
}

// distorted reports whether r's run fell behind its time scale.
func (r Result) distorted() bool { return r.Pace() < MinPace }

// Target limits: the default policy's load amplification during a total
// outage, the peers' it is compared with, and the default policy's peak
// after recovery, relative to capacity.
const (
	MaxDefaultAmplification = 1.2
	MinPeerAmplification    = 3.0
	MaxDefaultPeakRatio     = 1.0
)

// Targets measures the run against the storm targets, for the
// policies present: the default policy's amplification and peak, and the
// naive and exponential policies' amplification.
func Targets(rs []Result) []Check {
	var out []Check
	for _, r := range rs {
		a := r.Amplification()
		switch r.Policy.ID {
		case "default":
			out = append(out,
				Check{Text: fmt.Sprintf("%s: load amplification during the outage %s, at most %.1fx", r.Policy.Name, fmtRatio(a), MaxDefaultAmplification),
					Met: a <= MaxDefaultAmplification, Distorted: r.distorted()},
				Check{Text: fmt.Sprintf("%s: peak one-second rate after recovery %s capacity, at most %.1fx", r.Policy.Name, fmtRatio(r.PeakRatio()), MaxDefaultPeakRatio),
					Met: r.PeakRatio() <= MaxDefaultPeakRatio, Distorted: r.distorted()},
			)
		case "naive", "exponential":
			out = append(out, Check{Text: fmt.Sprintf("%s: load amplification during the outage %s, at least %.0fx", r.Policy.Name, fmtRatio(a), MinPeerAmplification),
				Met: a >= MinPeerAmplification, Distorted: r.distorted()})
		}
	}
	return out
}

// Recovery lag limits: in the default scenario, and with other
// outage lengths (30 s, 2 min and 10 min were named).
const (
	MaxDefaultRecoveryLag = 10 * time.Second
	MaxOtherRecoveryLag   = 15 * time.Second
)

// MaxRecoveryLag is the limit on the default policy's recovery lag
// in sc: MaxDefaultRecoveryLag for the default scenario's outage,
// MaxOtherRecoveryLag for any other.
func MaxRecoveryLag(sc Scenario) time.Duration {
	if sc.Outage == Default().Outage {
		return MaxDefaultRecoveryLag
	}
	return MaxOtherRecoveryLag
}

// RecoveryTargets measures the run against the recovery target, if the
// default policy ran: its recovery lag, at most MaxRecoveryLag(sc). The
// amplification it is held to with it is a storm target (Targets).
func RecoveryTargets(sc Scenario, rs []Result) []Check {
	var out []Check
	for _, r := range rs {
		if r.Policy.ID != "default" {
			continue
		}
		limit := MaxRecoveryLag(sc)
		out = append(out, Check{Text: fmt.Sprintf("%s: recovery lag %s, at most %v", r.Policy.Name, fmtLag(r), limit),
			Met: r.Recovered && r.RecoveryLag <= limit, Distorted: r.distorted()})
	}
	return out
}
