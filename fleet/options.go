package fleet

import (
	"time"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

// Defaults of the options.
const (
	// DefaultLease is how long a claimed letter stays with its worker
	// before another may claim it. Letters.Redeliver cuts a send a tenth
	// of the lease before it ends, which leaves 54 s: longer than a
	// redelivering Transport's whole call (grantretry.DefaultDeadline).
	DefaultLease = time.Minute
	// DefaultDepositEvery is how often a Coordinator writes the successes
	// it counted to the shared retry budget.
	DefaultDepositEvery = time.Second
	// DefaultReread is how often a Coordinator re-reads the breakers'
	// rows, in case a notification was lost.
	DefaultReread = time.Second
	// DefaultLetterLimit is how long Letters waits for the database to
	// commit a letter before it keeps the letter in the fallback
	// directory. A letter is written once a call has given up, off the
	// success path, and its insert commits synchronously: at the limit of
	// a request's fleet questions (DefaultLimit) most inserts of an
	// outage, when every refused call writes a letter, would be cut and
	// fall back although the database is up.
	DefaultLetterLimit = time.Second
)

// An Option configures a Letters, a Trail or a Coordinator; each reads the
// options that concern it and ignores the others.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	limit        time.Duration
	limitSet     bool          // WithLimit gave limit: Letters keeps it
	letterRun    time.Duration // tests' bound of a letter's insert; 0: letterRun
	lease        time.Duration
	fallback     *deadletter.Dir
	localTrail   *trail.Trail
	writer       string
	depositEvery time.Duration
	reread       time.Duration
	now          func() time.Time
}

func newConfig(opts []Option) config {
	c := config{
		limit:        DefaultLimit,
		lease:        DefaultLease,
		depositEvery: DefaultDepositEvery,
		reread:       DefaultReread,
		now:          time.Now,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// WithLimit bounds each database call that a request waits on (default
// DefaultLimit; for Letters, DefaultLetterLimit). A call that would take
// longer is given up, and the request goes on with local state.
func WithLimit(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.limit, c.limitSet = d, true
		}
	})
}

// WithLease sets how long a claimed letter stays with its worker (default
// DefaultLease): a worker that dies holding it leaves it to be claimed
// again once the lease ends. Make it longer than a redelivery may last,
// the redelivering client's deadline plus a margin: Letters.Redeliver
// renews it as it sends and cuts the send a tenth of it before it ends.
func WithLease(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.lease = d
		}
	})
}

// WithFallback gives Letters a local directory for the letters the
// database does not take in time.
func WithFallback(dir *deadletter.Dir) Option {
	return optionFunc(func(c *config) { c.fallback = dir })
}

// WithLocalTrail gives Trail a local trail file for the dispositions the
// database does not take in time; VerifyTrail's callers check it beside
// the database (see docs/fleet.md).
func WithLocalTrail(t *trail.Trail) Option {
	return optionFunc(func(c *config) { c.localTrail = t })
}

// WithWriter names this process's hash chain in the trail (default: a
// random id). Two live processes must never share a name.
func WithWriter(id string) Option {
	return optionFunc(func(c *config) { c.writer = id })
}

// WithDepositEvery sets how often a Coordinator writes counted successes
// to the shared budget (default DefaultDepositEvery).
func WithDepositEvery(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.depositEvery = d
		}
	})
}

// WithReread sets how often a Coordinator re-reads the shared breakers
// (default DefaultReread).
func WithReread(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.reread = d
		}
	})
}
