package fleetsim

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
)

// tracer records what each process asked its fleet and when it first saw
// each state, for Breakdown: where the storm's attempts went.
type tracer struct {
	start time.Time
	mu    sync.Mutex
	ops   []op
	// hosts is each process's fleet host, as its Transport got it (not
	// traced), for the warm-up to see when every process knows its state.
	hosts map[int]grantretry.FleetHost
}

// op is one fleet question, or a state a process saw change.
type op struct {
	at, took time.Duration
	proc     int
	kind     string // "Failed", "TryProbe", "ProbeDone", "state"
	err      bool
	state    grantretry.FleetState // after the op
	// A Failed's answer: yes, a retry (with no error); errored, an error,
	// which leaves the retry to the Transport's local throttle.
	yes, errored bool
}

func (tr *tracer) add(o op) {
	tr.mu.Lock()
	tr.ops = append(tr.ops, o)
	tr.mu.Unlock()
}

type tracedFleet struct {
	grantretry.Fleet
	tr   *tracer
	proc int
}

func (f tracedFleet) Host(key string, p grantretry.FleetPolicy) grantretry.FleetHost {
	h := f.Fleet.Host(key, p)
	f.tr.mu.Lock()
	if f.tr.hosts == nil {
		f.tr.hosts = map[int]grantretry.FleetHost{}
	}
	f.tr.hosts[f.proc] = h
	f.tr.mu.Unlock()
	th := &tracedHost{FleetHost: h, tr: f.tr, proc: f.proc}
	th.recall, _ = h.(grantretry.FleetRecall)
	th.changes, _ = h.(grantretry.FleetChangeLog)
	return th
}

// tracedHost traces a FleetHost's questions. It is a FleetRecall and a
// FleetChangeLog whatever it wraps, and passes them on: embedding the
// FleetHost passes on only its methods, and the Transport, finding
// neither interface, would never carry the fleet's probe time nor write
// the fleet's breaker lines.
type tracedHost struct {
	grantretry.FleetHost
	recall  grantretry.FleetRecall    // nil if FleetHost is none
	changes grantretry.FleetChangeLog // nil if FleetHost is none
	tr      *tracer
	proc    int
	seen    atomic.Int32
}

// LastHeard is the wrapped host's; one that recalls nothing answers as a
// FleetRecall that never heard the fleet.
func (h *tracedHost) LastHeard() (grantretry.FleetState, time.Duration) {
	if h.recall == nil {
		return grantretry.FleetUnknown, -1
	}
	return h.recall.LastHeard()
}

// TakeChanges is the wrapped host's; nil for one that logs none.
func (h *tracedHost) TakeChanges() []grantretry.FleetChange {
	if h.changes == nil {
		return nil
	}
	return h.changes.TakeChanges()
}

func (h *tracedHost) State() grantretry.FleetState {
	s := h.FleetHost.State()
	if old := h.seen.Swap(int32(s)); old != int32(s) {
		h.tr.add(op{at: time.Since(h.tr.start), proc: h.proc, kind: "state", state: s})
	}
	return s
}

// do runs a fleet question and traces it. A question that took the
// fleet's limit or more counts as cut (err) even without an error: a
// Coordinator answers a cut report from what it knew when the budget was
// known spent.
func (h *tracedHost) do(kind string, f func() error) {
	h.doYes(kind, func() (bool, error) { return false, f() })
}

// doYes is do for a question answered yes or no.
func (h *tracedHost) doYes(kind string, f func() (bool, error)) {
	t0 := time.Now()
	yes, err := f()
	took := time.Since(t0)
	h.tr.add(op{at: t0.Sub(h.tr.start), took: took, proc: h.proc, kind: kind,
		err: err != nil || took >= grantretry.DefaultFleetLimit, state: h.FleetHost.State(),
		yes: yes && err == nil, errored: err != nil})
}

func (h *tracedHost) Failed(ctx context.Context, f grantretry.FleetFailure) (retry bool, err error) {
	h.doYes("Failed", func() (bool, error) { retry, err = h.FleetHost.Failed(ctx, f); return retry, err })
	return retry, err
}

func (h *tracedHost) TryProbe(ctx context.Context) (ok bool, err error) {
	h.do("TryProbe", func() error { ok, err = h.FleetHost.TryProbe(ctx); return err })
	return ok, err
}

func (h *tracedHost) ProbeDone(ctx context.Context, ok bool) (err error) {
	h.do("ProbeDone", func() error { err = h.FleetHost.ProbeDone(ctx, ok); return err })
	return err
}

// Breakdown is where a fleet storm's first attempts in the outage went:
// how the failure reports fared, when the fleet's breaker opened, and
// when the last process heard it.
type Breakdown struct {
	Reports, ReportsLost int           // failure reports in the outage before all stopped; those that erred (cut at the limit)
	ReportP50, ReportP99 time.Duration // how long a report took
	ReportMax            time.Duration
	Opened               time.Duration // from the outage's start to the first process seeing FleetOpen; -1 if none
	LastHeard            time.Duration // to the last process's first FleetOpen; -1 if some never
	HitsBeforeOpened     int           // attempts the funder got before Opened
	HitsBeforeLastHeard  int           // and before LastHeard
	Unknown              int           // processes that saw FleetUnknown in the outage
	// Asked and Failed count each fleet question in the whole outage, by
	// kind, and those that erred.
	Asked, Failed map[string]int
	// The failure reports of the whole outage that let a retry go: answered
	// yes within the limit, answered yes past it, or erred (the Transport's
	// local throttle then decided).
	YesInTime, YesCut, Errored int
}

func breakdown(cfg Config, hits []hit, ops []op, all time.Duration) Breakdown {
	b := Breakdown{Opened: -1, LastHeard: -1, Asked: map[string]int{}, Failed: map[string]int{}}
	down, up := cfg.Before, cfg.Before+cfg.Outage
	heard := map[int]time.Duration{}
	unknown := map[int]bool{}
	var took []time.Duration
	for _, o := range ops {
		if o.at < down || o.at >= up {
			continue
		}
		if o.kind != "state" {
			b.Asked[o.kind]++
			if o.err {
				b.Failed[o.kind]++
			}
		}
		if o.kind == "Failed" {
			switch {
			case o.errored:
				b.Errored++
			case o.yes && o.err:
				b.YesCut++
			case o.yes:
				b.YesInTime++
			}
		}
		if o.kind == "Failed" && (all < 0 || o.at <= all) {
			b.Reports++
			took = append(took, o.took)
			if o.err {
				b.ReportsLost++
			}
		}
		at := o.at + o.took
		if o.state == grantretry.FleetUnknown && o.kind == "state" {
			unknown[o.proc] = true
		}
		if o.state == grantretry.FleetOpen {
			if t, ok := heard[o.proc]; !ok || at < t {
				heard[o.proc] = at
			}
		}
	}
	b.Unknown = len(unknown)
	slices.Sort(took)
	if len(took) > 0 {
		b.ReportP50, b.ReportP99, b.ReportMax = took[len(took)/2], took[len(took)*99/100], took[len(took)-1]
	}
	var first, last time.Duration = -1, -1
	for _, t := range heard {
		if first < 0 || t < first {
			first = t
		}
		last = max(last, t)
	}
	if first >= 0 {
		b.Opened = first - down
		for _, h := range hits {
			if h.at >= down && h.at < first {
				b.HitsBeforeOpened++
			}
		}
	}
	if len(heard) == cfg.Processes {
		b.LastHeard = last - down
		for _, h := range hits {
			if h.at >= down && h.at < last {
				b.HitsBeforeLastHeard++
			}
		}
	}
	return b
}
