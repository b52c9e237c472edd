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

	Wall time.Duration // real time the run took

	outage    time.Duration
	wantEarly float64 // calls expected before the outage at the offered load
}

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

func newResult(sc Scenario, p Policy, perWorker [][]callRecord, f *funder, recorded, dups int, wall time.Duration) Result {
	r := Result{
		Policy:         p,
		Capacity:       sc.Capacity,
		Dispositions:   make(map[grantretry.Disposition]int),
		OutageRequests: f.inOutage.Load(),
		Requests:       f.total(),
		PerSecond:      f.perSecond(sc.Run),
		Recorded:       recorded,
		Duplicates:     dups,
		Wall:           wall,
		outage:         sc.Outage,
		wantEarly:      sc.OutageStart.Seconds() * sc.Load * float64(sc.Capacity),
	}
	var took []time.Duration
	for _, calls := range perWorker {
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

// percentile is the nearest-rank percentile of sorted; 0 if it is empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Check is one target of issue 3, measured.
type Check struct {
	Text string
	Met  bool
}

// Target limits: the default policy's load amplification during a total
// outage, the peers' it is compared with, and the default policy's peak
// after recovery, relative to capacity.
const (
	MaxDefaultAmplification = 1.2
	MinPeerAmplification    = 3.0
	MaxDefaultPeakRatio     = 1.0
)

// Targets measures the run against the targets, for the policies present:
// the default policy's amplification and peak, and the naive and
// exponential policies' amplification.
func Targets(rs []Result) []Check {
	var out []Check
	for _, r := range rs {
		a := r.Amplification()
		switch r.Policy.ID {
		case "default":
			out = append(out,
				Check{fmt.Sprintf("%s: load amplification during the outage %s, at most %.1fx", r.Policy.Name, fmtRatio(a), MaxDefaultAmplification), a <= MaxDefaultAmplification},
				Check{fmt.Sprintf("%s: peak one-second rate after recovery %s capacity, at most %.1fx", r.Policy.Name, fmtRatio(r.PeakRatio()), MaxDefaultPeakRatio), r.PeakRatio() <= MaxDefaultPeakRatio},
			)
		case "naive", "exponential":
			out = append(out, Check{fmt.Sprintf("%s: load amplification during the outage %s, at least %.0fx", r.Policy.Name, fmtRatio(a), MinPeerAmplification), a >= MinPeerAmplification})
		}
	}
	return out
}
