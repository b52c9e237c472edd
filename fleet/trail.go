package fleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Trail is a grantretry.AuditSink that writes this process's audit
// records to the table grantretry_trail, as a hash chain of its own (its
// writer id, then seq, prev and hash, in the format of the trail file's
// chain: a writer's records, one a line, verify as a trail file). Write
// buffers a record; Sync chains the records buffered so far and commits
// them in one transaction, so a disposition is committed before RoundTrip
// returns. Concurrent Syncs are served by one commit (group commit).
//
// When a commit fails or takes longer than the limit, Trail fails over:
// with a local trail file (WithLocalTrail) the records go there, durably,
// and Sync succeeds; the database is tried again a second later, and the
// chain there goes on without a gap. Without one, Trail fails closed: Err
// reports the failure for good and the Transport sends nothing more.
// Either way a disposition the caller saw is durable somewhere that
// VerifyTrail and trail.Verify check. Trail is safe for concurrent use.
type Trail struct {
	pool   *pgxpool.Pool
	cfg    config
	writer string
	opened []byte // the chain's opening record, which names writer

	// mu guards pending and err.
	mu      sync.Mutex
	pending [][]byte // records written since the last Sync took them
	err     error    // sticky
	closed  bool     // Close was called

	// syncMu serialises commits; it guards everything below.
	syncMu    sync.Mutex
	seq       uint64   // of the last record committed
	last      [32]byte // hash of the last record committed
	h         hash.Hash
	buf       []byte
	downUntil time.Time // the database is not tried before then
	resync    bool      // a commit's fate is unknown: re-read the head first
	fellBack  int       // records written to the local trail
}

var _ grantretry.AuditSink = (*Trail)(nil)

// MsgTrailOpened is the first record of every writer's chain.
const MsgTrailOpened = "grantretry.fleet_trail_opened"

// retryAfterFailure is how long Trail writes to its local trail after the
// database failed it, before it tries the database again.
const retryAfterFailure = time.Second

// NewTrail returns the Trail of this process in pool's database. Its
// writer id is WithWriter's, or a new random one; with a WithWriter id
// whose chain already has records, the chain goes on from its last record
// (the database must answer). Run Migrate first.
func NewTrail(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Trail, error) {
	t := &Trail{pool: pool, cfg: newConfig(opts), h: sha256.New()}
	t.writer = t.cfg.writer
	if t.writer == "" {
		host, _ := os.Hostname()
		t.writer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomID())
	} else if err := t.readHead(ctx); err != nil {
		return nil, err
	}
	opened := fmt.Sprintf(`{"ts":%q,"level":"info","msg":%q,"writer":%q,"pid":%d,"continues":%d}`+"\n",
		t.cfg.now().UTC().Format(time.RFC3339Nano), MsgTrailOpened, t.writer, os.Getpid(), t.seq)
	t.opened = []byte(opened)
	t.pending = append(t.pending, t.opened)
	return t, nil
}

// Writer returns the id of this process's chain.
func (t *Trail) Writer() string { return t.writer }

// Write buffers p, one or more JSON records each ending in "\n", to be
// committed by the next Sync.
func (t *Trail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	for line := p; len(line) > 0; {
		i := bytes.IndexByte(line, '\n')
		if i < 2 || line[0] != '{' || line[i-1] != '}' {
			return 0, fmt.Errorf("%w: fleet: a record must be a JSON object on one line", grantretry.ErrAuditTrail)
		}
		t.pending = append(t.pending, append([]byte(nil), line[:i+1]...))
		line = line[i+1:]
	}
	return len(p), nil
}

// Err returns the failure that broke the Trail, nil while it is healthy.
func (t *Trail) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Sync commits every record written before it, in one transaction
// bounded by the limit, or fails over to the local trail (see Trail).
func (t *Trail) Sync() error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	t.mu.Lock()
	recs, err := t.pending, t.err
	t.pending = nil
	t.mu.Unlock()
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil // another Sync committed them
	}
	now := t.cfg.now()
	if now.Before(t.downUntil) {
		return t.failOver(recs, errors.New("the database failed a moment ago"))
	}
	err = t.commit(recs)
	if err == nil {
		return nil
	}
	t.downUntil = now.Add(retryAfterFailure)
	return t.failOver(recs, err)
}

// commit chains recs after the last committed record and inserts them.
// syncMu must be held.
func (t *Trail) commit(recs [][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.limit)
	defer cancel()
	if t.resync {
		if err := t.readHead(ctx); err != nil {
			return err
		}
		t.resync = false
	}
	if t.seq == 0 && !bytes.Equal(recs[0], t.opened) {
		// The opening record fell back to the local trail: the chain
		// in the database still starts with it, since only it names
		// the writer inside the hashed bytes (VerifyTrail).
		recs = append([][]byte{t.opened}, recs...)
	}
	seq, last := t.seq, t.last
	n := len(recs)
	seqs, lines, prevs, hashes := make([]int64, n), make([]string, n), make([]string, n), make([]string, n)
	for i, rec := range recs {
		prevs[i] = hex.EncodeToString(last[:])
		seq++
		var line []byte
		line, last = t.chain(rec, seq, last)
		seqs[i], lines[i], hashes[i] = int64(seq), string(line), hex.EncodeToString(last[:])
	}
	// One statement, one round trip, committed on its own.
	var err error
	if n <= maxValuesRows {
		args := make([]any, 1, 1+4*n)
		args[0] = t.writer
		for i := range n {
			args = append(args, seqs[i], lines[i], prevs[i], hashes[i])
		}
		_, err = t.pool.Exec(ctx, insertValues(n), args...)
	} else {
		_, err = t.pool.Exec(ctx, `INSERT INTO grantretry_trail (writer, seq, record, prev, hash)
		SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[])`,
			t.writer, seqs, lines, prevs, hashes)
	}
	if err != nil {
		// The commit may have happened with its answer lost.
		t.resync = true
		return err
	}
	t.seq, t.last = seq, last
	return nil
}

// maxValuesRows is the most records a Sync inserts with a multi-row
// VALUES; more go through unnest. VALUES costs the server less than
// unnest's arrays (BenchmarkTrailDispositionCommit16: p50 about 13% lower
// saturated), and its text depends on the number of rows, so each count
// up to this one is a prepared statement of its own in a connection's
// cache, and the count is bounded.
const maxValuesRows = 8

// insertValues returns the statement that inserts n records of one
// writer ($1) with VALUES: seq, record, prev and hash of each row follow.
func insertValues(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO grantretry_trail (writer, seq, record, prev, hash) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		p := 2 + 4*i
		fmt.Fprintf(&b, "($1, $%d::bigint, $%d::text, $%d::text, $%d::text)", p, p+1, p+2, p+3)
	}
	return b.String()
}

// chain returns rec with the chain fields of record seq after prev, as
// the trail file writes them, without the newline, and its hash.
func (t *Trail) chain(rec []byte, seq uint64, prev [32]byte) ([]byte, [32]byte) {
	b, sum := trail.AppendLink(t.buf[:0], t.h, rec[:len(rec)-1], seq, prev)
	t.buf = b
	return append([]byte(nil), b...), sum
}

// readHead sets seq and last from the writer's last committed record.
func (t *Trail) readHead(ctx context.Context) error {
	var seq int64
	var h string
	err := t.pool.QueryRow(ctx,
		`SELECT seq, hash FROM grantretry_trail WHERE writer = $1 ORDER BY seq DESC LIMIT 1`,
		t.writer).Scan(&seq, &h)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		t.seq, t.last = 0, [32]byte{}
		return nil
	case err != nil:
		return fmt.Errorf("%w: fleet: reading writer %s's last record: %w", grantretry.ErrAuditTrail, t.writer, err)
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return fmt.Errorf("%w: fleet: writer %s's last record has a bad hash", grantretry.ErrAuditTrail, t.writer)
	}
	t.seq = uint64(seq)
	copy(t.last[:], b)
	return nil
}

// failOver writes recs to the local trail and syncs it, or, without one,
// breaks the Trail for good. syncMu must be held.
func (t *Trail) failOver(recs [][]byte, cause error) error {
	local := t.cfg.localTrail
	if local == nil {
		return t.fail(cause)
	}
	for _, rec := range recs {
		if _, err := local.Write(rec); err != nil {
			return t.fail(errors.Join(cause, err))
		}
	}
	if err := local.Sync(); err != nil {
		return t.fail(errors.Join(cause, err))
	}
	t.fellBack += len(recs)
	return nil
}

func (t *Trail) fail(cause error) error {
	err := fmt.Errorf("%w: fleet: writer %s: %w", grantretry.ErrAuditTrail, t.writer, cause)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
	return t.err
}

// Close commits the records written since the last Sync, as Sync does (to
// the database, or to the local trail while the database is away), and
// closes the Trail: Write and Sync then fail, and Err returns, an error
// matching [grantretry.ErrAuditTrail]. It closes neither the pool nor the
// local trail ([WithLocalTrail]), which are the caller's: close the local
// trail after the Trail. Closing a broken Trail, or one whose last commit
// fails, returns its failure, which Err keeps; closing it again returns
// nil.
func (t *Trail) Close() error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	recs, err := t.pending, t.err
	t.pending = nil
	if err == nil {
		// From here on every Write fails: no record is taken that
		// nothing would commit.
		t.err = fmt.Errorf("%w: fleet: writer %s: closed (Trail.Close); no record is written", grantretry.ErrAuditTrail, t.writer)
	}
	t.mu.Unlock()
	if err != nil || len(recs) == 0 {
		return err
	}
	if err := t.closingCommit(recs); err != nil {
		err = fmt.Errorf("%w: fleet: writer %s: closing: %w", grantretry.ErrAuditTrail, t.writer, err)
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
		return err
	}
	return nil
}

// closingCommit is Sync's commit or fail-over of recs for Close, which
// has already set the closed error: it returns the cause of a failure
// rather than breaking the Trail. syncMu must be held.
func (t *Trail) closingCommit(recs [][]byte) error {
	var cause error
	if t.cfg.now().Before(t.downUntil) {
		cause = errors.New("the database failed a moment ago")
	} else if cause = t.commit(recs); cause == nil {
		return nil
	}
	local := t.cfg.localTrail
	if local == nil {
		return cause
	}
	for _, rec := range recs {
		if _, err := local.Write(rec); err != nil {
			return errors.Join(cause, err)
		}
	}
	if err := local.Sync(); err != nil {
		return errors.Join(cause, err)
	}
	t.fellBack += len(recs)
	return nil
}

// FellBack returns how many records went to the local trail because the
// database did not take them.
func (t *Trail) FellBack() int {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	return t.fellBack
}

func randomID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
