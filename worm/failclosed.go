package worm

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
)

// ErrUnanchored is the failure of a FailClosed sink whose trail has
// waited too long for its anchor. It matches grantretry.ErrAuditTrail.
var ErrUnanchored = fmt.Errorf("%w: write-once tier: records not anchored in time", grantretry.ErrAuditTrail)

// FailClosed returns an audit sink that is sink, as long as the records
// the shipper has not anchored have waited less than bound; once the
// oldest has waited longer, its Err reports ErrUnanchored, for good as
// grantretry.AuditSink requires, and a Transport given it sends nothing
// more. Records written after that still go to sink, and the shipper
// goes on anchoring them. Without it a store outage never stops a call:
// the trail waits in the queue. Err reads the shipper's counters only, so
// it never waits for an upload. The sink is safe for concurrent use.
func FailClosed(sink grantretry.AuditSink, s *Shipper, bound time.Duration) grantretry.AuditSink {
	return &failClosed{sink: sink, s: s, bound: bound}
}

type failClosed struct {
	sink  grantretry.AuditSink
	s     *Shipper
	bound time.Duration
	fault atomic.Pointer[error]
}

func (f *failClosed) Write(p []byte) (int, error) { return f.sink.Write(p) }

// Sync is sink's: a record written is durable whatever the anchor's
// state, and the call that wrote it has been made.
func (f *failClosed) Sync() error { return f.sink.Sync() }

func (f *failClosed) Err() error {
	if err := f.sink.Err(); err != nil {
		return err
	}
	if p := f.fault.Load(); p != nil {
		return *p
	}
	b := f.s.Backlog()
	if b.Age <= f.bound {
		return nil
	}
	err := fmt.Errorf("%w: %s, the oldest read %s ago (the bound is %s)", ErrUnanchored, plural(uint64(b.Records), "record"), b.Age.Round(time.Millisecond), f.bound)
	if b.Unpositioned > 0 {
		err = fmt.Errorf("%w: %s not read for %s, the store not answering where they stand (the bound is %s)", ErrUnanchored, plural(uint64(b.Unpositioned), "stream"), b.Age.Round(time.Millisecond), f.bound)
	}
	if b.Stopped != nil {
		err = fmt.Errorf("%w: shipping stopped %s ago (the bound is %s): %v", ErrUnanchored, b.Age.Round(time.Millisecond), f.bound, b.Stopped)
	} else if b.Err != nil {
		err = fmt.Errorf("%w; the store: %v", err, b.Err)
	}
	f.fault.CompareAndSwap(nil, &err)
	return *f.fault.Load()
}
