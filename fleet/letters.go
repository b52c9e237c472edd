package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Letters is a grantretry.DeadLetterSink that keeps the letters of every
// process of a fleet in one table, grantretry_letters, where any worker
// can claim and redeliver them (Claim, Redeliver). A letter is inserted
// with a synchronous commit; if the database does not take it within the
// limit (DefaultLetterLimit), it is kept in the fallback directory
// (WithFallback) and the error, a *FallbackError, says where, so
// Outcome.RecordErr shows it.
//
// A letter is in one place. An insert the caller stopped waiting for runs
// on (it is not cancelled), and if it commits, the letter's fallback file
// is removed: the database has it. An insert whose end is not known (its
// connection lost mid-commit) is inserted again to learn it; should that
// fail too, the letter may be in the database beside its file. Drain
// moves the fallback directory's letters into the database under their
// IDs, adding none that is there already, and letters are redelivered
// from the database only, so that such a letter is sent once.
//
// The inserts run on a pool of Letters' own (see NewLetters), never on
// the connections of the pool given, which a Coordinator's failure path
// needs when an outage writes a letter for every refused call. Close it
// when done. Letters is safe for concurrent use.
type Letters struct {
	pool *pgxpool.Pool // the pool given: claims, List, Get
	cfg  config

	// own holds the inserts' connections (see NewLetters); closed by
	// Close, which waits for the inserts in flight (wg).
	own *pgxpool.Pool
	wg  sync.WaitGroup
	// slots bounds the inserts in flight, closeMu and closing refuse new
	// ones once Close began, as in the Coordinator's detach.
	slots   chan struct{}
	closeMu sync.Mutex
	closing bool
}

var _ grantretry.DeadLetterSink = (*Letters)(nil)

// letterConns is how many connections Letters' own pool opens at most,
// and letterSlots how many inserts a Letters has in flight, running or
// waiting for one of them: past that, a letter goes to the fallback
// directory at once.
const (
	letterConns = 2
	letterSlots = 64
)

// letterRun bounds an insert that its caller stopped waiting for, on the
// server (statement_timeout, which cancels it without losing the
// connection) and, letterGrace later, on the client, in case the server
// does not answer at all. A longer WithLimit stretches it.
const (
	letterRun   = 5 * time.Second
	letterGrace = time.Second
)

// NewLetters returns the Letters kept in pool's database. Run Migrate
// first. The inserts run on a pool of its own, made from pool's
// configuration with at most two connections, none opened before a
// letter needs one: pool may be the Coordinator's, whose connections the
// inserts then never take. Claims, List and Get use pool.
func NewLetters(pool *pgxpool.Pool, opts ...Option) *Letters {
	s := &Letters{pool: pool, cfg: newConfig(opts), slots: make(chan struct{}, letterSlots)}
	if !s.cfg.limitSet {
		s.cfg.limit = DefaultLetterLimit
	}
	if pool == nil {
		return s // each insert then fails, and says why
	}
	cfg := pool.Config()
	cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns = letterConns, 0, 0
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(s.run().Milliseconds(), 10)
	// A letter is acknowledged (and its fallback file removed) once its
	// commit returns: that commit must be durable, whatever the pool
	// given asked for its own, advisory, writes.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	// pgxpool refuses only a MaxConns below 1, and pool's configuration
	// came from ParseConfig: no error is left to return.
	s.own, _ = pgxpool.NewWithConfig(context.Background(), cfg)
	return s
}

// run is how long the server lets an insert run.
func (s *Letters) run() time.Duration {
	if s.cfg.letterRun > 0 {
		return s.cfg.letterRun
	}
	return max(letterRun, s.cfg.limit)
}

// Close waits for the inserts in flight, at most their bound, and closes
// Letters' own pool, not the one given to NewLetters. PutDeadLetter then
// keeps each letter in the fallback directory.
func (s *Letters) Close() {
	s.closeMu.Lock()
	s.closing = true
	s.closeMu.Unlock()
	s.wg.Wait()
	if s.own != nil {
		s.own.Close()
	}
}

// FallbackError is PutDeadLetter's error when the database did not take a
// letter: Dir is the fallback directory that kept it instead ("" if none
// did), Err why the database did not take it, and, when the fallback
// directory failed too, why it did not.
type FallbackError struct {
	ID  string
	Dir string
	Err error

	tried string // the fallback directory that did not take it either
}

func (e *FallbackError) Error() string {
	switch {
	case e.Dir != "":
		return fmt.Sprintf("grantretry: fleet: letter %s kept in the local directory at %s because the database insert failed: %v", e.ID, e.KeptAt(), e.Err)
	case e.tried != "":
		return fmt.Sprintf("grantretry: fleet: letter %s not kept: the database insert failed, and so did the write to the local directory %s: %v", e.ID, e.tried, e.Err)
	}
	return fmt.Sprintf("grantretry: fleet: letter %s not kept: the database insert failed, and there is no fallback directory: %v", e.ID, e.Err)
}

func (e *FallbackError) Unwrap() error { return e.Err }

// KeptAt returns the file the letter was kept in, in the fallback
// directory, or "" if it was not kept. The Transport reads it to report
// the letter as kept there, not as lost (see grantretry.DeadLetterSink).
func (e *FallbackError) KeptAt() string {
	if e.Dir == "" {
		return ""
	}
	// deadletter.Dir stores a letter as <ID>.json.
	return filepath.Join(e.Dir, e.ID+".json")
}

// PutDeadLetter inserts l, and returns once the insert is committed. It
// waits at most the limit for the database; past it, or on any error, it
// writes l to the fallback directory and returns a *FallbackError. An
// insert cut at the limit runs on: if it commits after the fallback file
// is written, the file is removed (the letter is in the database, under
// the same ID), and if it commits before, PutDeadLetter returns nil. With
// no fallback directory, or one that failed, it waits for the insert to
// end (at most its bound on the server plus a second) before it says the
// letter was not kept, so that it never says so of a letter the database
// then takes.
func (s *Letters) PutDeadLetter(ctx context.Context, l *grantretry.Letter) error {
	if l == nil {
		return fmt.Errorf("%w: nil letter", grantretry.ErrInvalidRequest)
	}
	data, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("grantretry: fleet: letter %s: %w", l.ID, err)
	}
	ins := s.insert(l, data)
	limit := time.NewTimer(s.cfg.limit)
	defer limit.Stop()
	select {
	case <-ins.done:
		if ins.err == nil {
			return nil
		}
	case <-limit.C:
	case <-ctx.Done():
	}
	fe := &FallbackError{ID: l.ID, Err: ins.cutErr(s.cfg.limit)}
	if s.cfg.fallback == nil {
		return awaitInsert(ins, fe)
	}
	if ferr := s.cfg.fallback.PutDeadLetter(ctx, l); ferr != nil {
		fe.Err, fe.tried = fmt.Errorf("%w; the local directory: %w", fe.Err, ferr), s.cfg.fallback.Path()
		return awaitInsert(ins, fe)
	}
	fe.Dir = s.cfg.fallback.Path()
	if ins.keptAt(fe.KeptAt()) {
		// The insert committed meanwhile: the letter is in the database
		// (a file that stays is Drain's, which finds the row there).
		_ = removeLetterFile(fe.KeptAt())
		return nil
	}
	return fe
}

// awaitInsert waits for the insert of a letter that no fallback directory
// kept: saying it was kept nowhere while the insert runs on, and may yet
// commit, would have a pipeline resubmit work the fleet will redeliver.
// The insert is bounded (the server's statement_timeout, then
// letterGrace), so the wait is too. It returns nil if the insert landed,
// else fe.
func awaitInsert(ins *inserting, fe *FallbackError) error {
	<-ins.done
	ins.mu.Lock()
	landed := ins.landed
	ins.mu.Unlock()
	if landed {
		return nil
	}
	return fe
}

// insertSQL is the one statement that puts a letter in the database,
// from PutDeadLetter and Drain: a letter whose row is there already (a
// cut insert that committed, a letter drained before) is left as it is,
// whatever its state. $4 is the letter's not_before (see notBefore), $5
// its due_by (see dueBy) and $6 its late.
const insertSQL = `INSERT INTO grantretry_letters (id, created, letter, not_before, due_by, late) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`

// notBefore is l's NotBefore as the not_before column holds it: NULL when
// the letter is due now.
func notBefore(l *grantretry.Letter) *time.Time {
	if l.NotBefore.IsZero() {
		return nil
	}
	return &l.NotBefore
}

// dueBy is l's DueBy as the due_by column holds it: NULL when the letter
// has no closing time.
func dueBy(l *grantretry.Letter) *time.Time {
	if l.DueBy.IsZero() {
		return nil
	}
	return &l.DueBy
}

// inserting is one letter's insert, which may outlive its caller's wait.
type inserting struct {
	done chan struct{} // closed when the insert has ended
	err  error         // its error, once done is closed

	mu     sync.Mutex // guards the two below
	landed bool       // the insert committed
	file   string     // the fallback file its caller wrote, if any
}

// insert starts l's insert on Letters' own pool, bounded by run and not
// by the caller's wait: pgx closes a connection whose statement is
// cancelled, and in an outage, when every refused call writes a letter,
// each cut insert cost a reconnect. An insert that commits after its
// caller wrote the fallback file removes that file.
func (s *Letters) insert(l *grantretry.Letter, data []byte) *inserting {
	ins := &inserting{done: make(chan struct{})}
	s.closeMu.Lock()
	if s.closing || s.own == nil {
		s.closeMu.Unlock()
		ins.err = errLettersClosed
		close(ins.done)
		return ins
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.closeMu.Unlock()
		ins.err = errLettersBusy
		close(ins.done)
		return ins
	}
	s.wg.Add(1)
	s.closeMu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), s.run()+letterGrace)
		_, err := s.own.Exec(ctx, insertSQL, l.ID, l.Created, data, notBefore(l), dueBy(l), l.Late)
		cancel()
		landed := err == nil || (mayHaveCommitted(err) && s.stored(l, data))
		ins.mu.Lock()
		ins.landed = landed
		file := ins.file
		ins.mu.Unlock()
		ins.err = err
		close(ins.done)
		if landed && file != "" {
			_ = removeLetterFile(file) // else Drain finds the row there
		}
	}()
	return ins
}

// mayHaveCommitted says an insert that ended with err may have committed
// all the same: the server reported no error of its own (which rolls the
// statement back) and the statement was sent. A connection lost while
// its commit waited (for the WAL's flush, for a synchronous standby)
// leaves a transaction that commits once the server sees it gone.
func mayHaveCommitted(err error) bool {
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err)
}

// stored makes sure the database has the letter, after an insert whose
// fate is unknown: it inserts it again, on another connection. The
// second insert waits for the first's transaction to end (both write one
// key of the primary index), then adds nothing if it committed, or the
// letter if it did not; either way, once it returns, the row is there.
func (s *Letters) stored(l *grantretry.Letter, data []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), letterGrace)
	defer cancel()
	_, err := s.own.Exec(ctx, insertSQL, l.ID, l.Created, data, notBefore(l), dueBy(l), l.Late)
	return err == nil
}

// keptAt notes that the caller kept the letter in file, and reports
// whether the insert has committed already: the caller then removes it.
// After this, an insert that commits removes the file itself.
func (ins *inserting) keptAt(file string) (landed bool) {
	ins.mu.Lock()
	defer ins.mu.Unlock()
	if !ins.landed {
		ins.file = file
	}
	return ins.landed
}

// cutErr is why the database did not take the letter in time.
func (ins *inserting) cutErr(limit time.Duration) error {
	select {
	case <-ins.done:
		return ins.err
	default:
		return fmt.Errorf("%w (%v)", errLetterCut, limit)
	}
}

// The reasons an insert did not take a letter, besides the database's.
var (
	errLetterCut     = errors.New("grantretry: fleet: the database did not commit the letter within the limit")
	errLettersBusy   = errors.New("grantretry: fleet: too many letter inserts in flight")
	errLettersClosed = errors.New("grantretry: fleet: Letters closed, or made without a pool")
)

// removeLetterFile removes a fallback file whose letter the database has.
// A removal lost in a crash, or failed, leaves the file to Drain, which
// finds the row there; a file gone already (drained meanwhile) is no
// error.
func removeLetterFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List returns the letters waiting (not redelivered, not retired), oldest
// first.
func (s *Letters) List(ctx context.Context) ([]*grantretry.Letter, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT letter FROM grantretry_letters WHERE state = 'waiting' ORDER BY created, id`)
	if err != nil {
		return nil, fmt.Errorf("grantretry: fleet: list: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*grantretry.Letter, error) {
		var data []byte
		l := new(grantretry.Letter)
		if err := r.Scan(&data); err != nil {
			return nil, err
		}
		return l, json.Unmarshal(data, l)
	})
}

// Get returns the letter id, whatever its state, and, if it was
// redelivered, the record of it (nil while it waits, and for a retired
// letter, whose record [Letters.Retirement] returns). The error matches
// pgx.ErrNoRows if there is none.
func (s *Letters) Get(ctx context.Context, id string) (*grantretry.Letter, *deadletter.Redelivery, error) {
	var data, result []byte
	err := s.pool.QueryRow(ctx,
		`SELECT letter, result FROM grantretry_letters WHERE id = $1`, id).Scan(&data, &result)
	if err != nil {
		return nil, nil, fmt.Errorf("grantretry: fleet: letter %s: %w", id, err)
	}
	l := new(grantretry.Letter)
	if err := json.Unmarshal(data, l); err != nil {
		return nil, nil, err
	}
	if result == nil {
		return l, nil, nil
	}
	r := new(deadletter.Redelivery)
	return l, r, json.Unmarshal(result, r)
}
