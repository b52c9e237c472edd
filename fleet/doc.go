// Package fleet shares what a grantretry Transport knows across the
// processes of a fleet, in PostgreSQL: dead letters that any worker can
// redeliver (Letters), one audit trail with a hash chain per process
// (Trail), and the circuit breaker, retry budget and quota hold of each
// funder host (Coordinator): once a call to a host ends owed, the whole
// fleet waits for the funder's time. It is a module of its own so that
// the core never requires a database driver; see docs/fleet.md.
//
// Nothing here sits on a call's success path. What a failed call asks of
// the database is bounded by a short limit (DefaultLimit; a dead letter's
// commit by DefaultLetterLimit), and when the database is away the
// Transport runs on its local state.
package fleet

import "time"

// DefaultLimit bounds every database call a request makes but a dead
// letter's commit (DefaultLetterLimit): a Transport never waits longer on
// the fleet's database for its breaker, its budget or its trail.
const DefaultLimit = 5 * time.Millisecond
