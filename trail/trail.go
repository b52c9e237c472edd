// Package trail is the write-once, hash-chained audit trail file a
// grantretry Transport records its calls in (see docs/audit-trail.md):
// Open a Trail and give it to grantretry.WithAuditTrail, and check it
// with Verify, or with "grantretry audit verify".
package trail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/durable"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Audit trail defaults and format.
const (
	// DefaultMaxFileSize is the size past which the live file of a Trail
	// is rotated, when Options.MaxFileSize is 0.
	DefaultMaxFileSize int64 = 64 << 20
	// Version is the version of the record format a Trail writes, carried
	// by its trail_opened and trail_reopened records.
	Version = 1
)

// The audit trail's own records, written with the same encoding and chain
// as the Transport's.
const (
	MsgOpened    = "grantretry.trail_opened"    // first record of a new trail
	MsgReopened  = "grantretry.trail_reopened"  // every later open: a restart is visible
	MsgContinued = "grantretry.trail_continued" // first record of each file after a rotation
	MsgRecovered = "grantretry.trail_recovered" // a torn tail, never synced, was cut off on open
)

// Field names of the chain, which ends every record, and of the trail's own
// records. Seq, prev and hash are reserved: a record that already has one
// of these keys, at any depth, is refused.
const (
	FieldSeq        = "seq"         // 1 for the first record of the trail, +1 for each record
	FieldPrev       = "prev"        // hex SHA-256 link of the record before, 64 zeros for the first
	FieldHash       = "hash"        // hex SHA-256 of prev's 32 bytes and the record up to ,"hash":"
	FieldVersion    = "version"     // on trail_opened and trail_reopened: Version
	FieldFile       = "file"        // on the trail's own records: the live file's base name
	FieldPrevFile   = "prev_file"   // on trail_continued: the file the chain comes from
	FieldPID        = "pid"         // on trail_opened and trail_reopened: the writing process
	FieldTornBytes  = "torn_bytes"  // on trail_recovered: how many bytes were cut off, up to the end of the file
	FieldTornSHA256 = "torn_sha256" // on trail_recovered: their hex SHA-256
	FieldTornOffset = "torn_offset" // on trail_recovered: where the cut bytes began in the file
)

// errClosed is what a closed trail answers.
var errClosed = fmt.Errorf("%w: closed", grantretry.ErrAuditTrail)

// trailPerm is the mode of the files a trail creates: the trail names
// funder endpoints and submission ids, which are nobody else's business.
const trailPerm = 0o600

// Options configures Open. The zero value is the default.
type Options struct {
	// MaxFileSize is the size in bytes past which the live file is
	// rotated. If 0, DefaultMaxFileSize. A file always holds at least
	// its first record and one more, whatever the limit.
	MaxFileSize int64
	// Clock stamps the trail's own records. If nil, the system clock.
	Clock grantretry.Clock
}

// Trail is a write-once, hash-chained audit trail: a grantretry.AuditSink
// (and a zapcore.WriteSyncer) that appends JSON records to a file opened append-only and ends each with
// its seq, the hash of the record before and its own hash, so that any
// edit, deletion, insertion or reordering is detectable (Verify).
// Sync makes every record written so far durable and records the last one
// in a head file, so a truncated tail is detectable too. The live file is
// rotated by size without breaking the chain. See docs/audit-trail.md.
//
// After its first failure a trail is broken for good: every later Write and
// Sync fails, wrapping that first error, and Err reports it. A Trail
// is safe for concurrent use; one process at a time may write a trail.
type Trail struct {
	path, head, dir string // the live file, the head file, their directory
	maxSize         int64
	now             func() time.Time // the Options' Clock, or time.Now
	enc             zapcore.Encoder  // of the trail's own records

	// fault is the first failure, or the closed state; nil while healthy.
	// Set once, by compare-and-swap, and read without a lock, so Err
	// never waits for a write or a sync.
	fault atomic.Pointer[trailFault]

	// beforeFsync, if not nil, is called by Sync after it released mu and
	// before its fsync, so a test can write (and rotate) at that point.
	// Always nil outside tests.
	beforeFsync func()

	// syncMu serialises Sync and Close, which write the head file. It is
	// taken before mu, never while mu is held. A Sync holds it, but not
	// mu, during its fsyncs, so records go on being written meanwhile and
	// the next Sync makes all of them durable at once (group commit).
	syncMu sync.Mutex

	// mu is held across hashing and writing a record, so the chain order
	// is the file order; every field below is guarded by it.
	mu      sync.Mutex
	f       *os.File // the live file
	size    int64    // bytes in f
	records int      // records in f
	index   int      // largest rotated file index, 0 if none
	seq     uint64   // of the last record written
	last    [32]byte // hash of the last record written
	dirty   bool     // records written since the last sync
	closed  bool
	h       hash.Hash
	next    [32]byte // hash of the record being written
	buf     []byte   // the record being written
}

// trailFault is a broken or closed trail: first is what the failing call
// returned, later what every call after it returns.
type trailFault struct {
	first, later error
}

// brokenError is the error of every call after a trail's first failure.
type brokenError struct {
	first error
	msg   string
}

func (e *brokenError) Error() string { return e.msg }

func (e *brokenError) Unwrap() error { return e.first }

var (
	_ grantretry.AuditSink = (*Trail)(nil)
	_ zapcore.WriteSyncer  = (*Trail)(nil)
)

// Open opens the trail whose live file is path, creating it if there is
// none, and continues its chain. Its directory must exist. The
// trail's files are path (live, mode 0600, opened O_APPEND), path.000001
// and on (rotated), and path.head (the last synced record).
//
// Opening an existing trail checks its live file. A torn tail is cut off
// and recorded in a trail_recovered record (where it began, its size and
// SHA-256): the last line if it does not verify (a crash in the middle of
// an append: no newline, zeros, a partial record), or, when the trail has
// a head file, everything from the first line that does not verify, if
// that line comes after the record the head says was synced last (a power
// loss can leave any unsynced page of the file unwritten). No record Sync
// confirmed is ever cut. Anything else wrong refuses the open: records the
// head says were synced are missing or differ, or a line at or before the
// head's record, or before the last line without a head, does not verify.
// Run Verify, keep the files as evidence and start a new trail elsewhere.
func Open(path string, o Options) (*Trail, error) {
	t, err := newTrail(path, o)
	if err != nil {
		return nil, err
	}
	s, err := surveyTrail(t.path)
	if err != nil {
		return nil, err
	}
	now := t.now() // before mu: a Clock is the caller's code
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.start(s, now); err != nil {
		if t.f != nil {
			t.f.Close()
		}
		return nil, err
	}
	return t, nil
}

func newTrail(path string, o Options) (*Trail, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no path", grantretry.ErrAuditTrail)
	}
	if o.MaxFileSize < 0 {
		return nil, fmt.Errorf("%w: MaxFileSize %d is negative", grantretry.ErrAuditTrail, o.MaxFileSize)
	}
	t := &Trail{
		path:    filepath.Clean(path),
		maxSize: o.MaxFileSize,
		now:     time.Now,
		enc:     zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig()),
		h:       sha256.New(),
	}
	t.head, t.dir = t.path+".head", filepath.Dir(t.path)
	if t.maxSize == 0 {
		t.maxSize = DefaultMaxFileSize
	}
	if o.Clock != nil {
		t.now = o.Clock.Now
	}
	return t, nil
}

// start opens the live file where the survey says the chain goes on, cuts a
// torn tail, writes the records that say what happened, stamped now, and
// syncs. t.mu must be held.
func (t *Trail) start(s trailSurvey, now time.Time) error {
	f, created, err := openLive(t.path)
	if err != nil {
		return fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	t.f, t.index, t.seq, t.last = f, s.index, s.seq, s.last
	t.size, t.records = s.live.end, s.live.records
	if s.live.torn > 0 {
		// The one write that is not an append: the torn bytes were never
		// synced (the survey refuses a cut at or before the head's
		// record), and the chain cannot go on after a line that does not
		// verify. Their size and hash are kept in trail_recovered.
		if err := f.Truncate(s.live.end); err != nil {
			return t.fail("cut the torn tail", err)
		}
	}
	if created || s.live.records == 0 {
		// A live file without records may have been created by a process
		// that crashed before its directory entry was durable.
		if err := durable.SyncDir(t.dir); err != nil {
			return t.fail("sync the directory", err)
		}
	}
	opened, err := t.writeFirst(s, now)
	if err != nil {
		return err
	}
	if err := t.writeRecovered(s.live, now); err != nil {
		return err
	}
	if s.existed && !opened {
		if err := t.writeOwn(now, zapcore.InfoLevel, MsgReopened, t.versionFields()...); err != nil {
			return err
		}
	}
	return t.syncLocked()
}

// writeFirst writes the first record of a live file that has none:
// trail_opened for a new trail, trail_continued for a file after a
// rotation (or after a crash in the middle of one). It reports whether it
// opened a new trail. t.mu must be held.
func (t *Trail) writeFirst(s trailSurvey, now time.Time) (bool, error) {
	switch {
	case t.records > 0:
		return false, nil
	case t.seq == 0:
		return true, t.writeOwn(now, zapcore.InfoLevel, MsgOpened, t.versionFields()...)
	default:
		return false, t.writeOwn(now, zapcore.InfoLevel, MsgContinued,
			zap.String(FieldFile, filepath.Base(t.path)),
			zap.String(FieldPrevFile, s.rotated))
	}
}

// writeRecovered records the torn tail cut off the live file, if any.
// t.mu must be held.
func (t *Trail) writeRecovered(live fileScan, now time.Time) error {
	if live.torn == 0 {
		return nil
	}
	return t.writeOwn(now, zapcore.WarnLevel, MsgRecovered,
		zap.String(FieldFile, filepath.Base(t.path)),
		zap.Int64(FieldTornOffset, live.end),
		zap.Int64(FieldTornBytes, live.torn),
		zap.String(FieldTornSHA256, hex.EncodeToString(live.tornSum[:])))
}

func (t *Trail) versionFields() []zapcore.Field {
	return []zapcore.Field{
		zap.Int(FieldVersion, Version),
		zap.String(FieldFile, filepath.Base(t.path)),
		zap.Int(FieldPID, os.Getpid()),
	}
}

// openLive opens path for appending, creating it if needed, and reports
// whether it did.
func openLive(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, trailPerm)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, trailPerm)
	return f, false, err
}

// Write appends p, one or more records, each a JSON object on one line
// ending in "\n", as zap writes them. It appends the chain fields to each
// before its closing brace and writes it with one write call. It refuses p
// whole, writing nothing, if any line is not a non-empty JSON object, would
// be longer than 1 MiB with its chain fields, or has a seq, prev or hash
// key at any depth (however written: "seq" :1, "\u0073eq":1). Any failure,
// a refusal included, breaks the trail: a record that should be in it is
// not.
func (t *Trail) Write(p []byte) (int, error) {
	if err := checkRecords(p); err != nil {
		return 0, t.fail("refused a record", err)
	}
	// Read before mu, as a Clock is the caller's code: it stamps the
	// trail_continued of a rotation this write may cause.
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.fault.Load(); f != nil {
		return 0, f.later
	}
	n := 0
	for n < len(p) {
		end := n + bytes.IndexByte(p[n:], '\n') + 1
		if err := t.appendLine(p[n:end], now); err != nil {
			return n, err
		}
		n = end
	}
	return n, nil
}

// appendLine chains and writes one record, rotating first if it would make
// the live file too large; now stamps the rotation's record. t.mu must be
// held.
func (t *Trail) appendLine(line []byte, now time.Time) error {
	rec := t.chain(line)
	if t.size+int64(len(rec)) > t.maxSize && t.records > 1 {
		if err := t.rotate(now); err != nil {
			return err
		}
		rec = t.chain(line) // it follows trail_continued now
	}
	return t.emit(rec)
}

// emit writes a record chain built, and makes it the last. t.mu must be
// held.
func (t *Trail) emit(rec []byte) error {
	n, err := t.f.Write(rec)
	t.size += int64(n)
	if err != nil {
		return t.fail(fmt.Sprintf("record seq %d", t.seq+1), err)
	}
	t.seq++
	t.last = t.next
	t.records++
	t.dirty = true
	return nil
}

// writeOwn writes one of the trail's own records, stamped now, which the
// caller read from the Clock before it took mu. t.mu must be held.
func (t *Trail) writeOwn(now time.Time, level zapcore.Level, msg string, fields ...zapcore.Field) error {
	buf, err := t.enc.EncodeEntry(zapcore.Entry{Level: level, Time: now, Message: msg}, fields)
	if err != nil {
		return t.fail("encode "+msg, err)
	}
	defer buf.Free()
	return t.emit(t.chain(buf.Bytes()))
}

// rotate makes the live file durable, renames it to the next rotated name
// and starts a new live file with trail_continued, stamped now. t.mu must
// be held.
func (t *Trail) rotate(now time.Time) error {
	rotated := fmt.Sprintf("%s.%06d", t.path, t.index+1)
	if err := t.f.Sync(); err != nil {
		return t.fail("sync before rotating", err)
	}
	if err := t.f.Close(); err != nil {
		return t.fail("close before rotating", err)
	}
	if err := os.Rename(t.path, rotated); err != nil {
		return t.fail("rotate", err)
	}
	f, _, err := openLive(t.path)
	if err != nil {
		return t.fail("rotate", err)
	}
	t.f, t.size, t.records, t.index = f, 0, 0, t.index+1
	if err := durable.SyncDir(t.dir); err != nil {
		return t.fail("sync the directory", err)
	}
	// The head is left to the next Sync: only Sync and Close write it.
	return t.writeOwn(now, zapcore.InfoLevel, MsgContinued,
		zap.String(FieldFile, filepath.Base(t.path)),
		zap.String(FieldPrevFile, filepath.Base(rotated)))
}

// Sync makes every record written so far durable (fsync), then records the
// last one in the head file. It does nothing when nothing was written since
// the last Sync. The Transport calls it after every final disposition,
// before the caller learns the disposition. Records written by other
// goroutines during its fsync are made durable by the next Sync, which
// covers them all with one fsync.
func (t *Trail) Sync() error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	for {
		t.mu.Lock()
		if f := t.fault.Load(); f != nil {
			t.mu.Unlock()
			return f.later
		}
		if !t.dirty {
			t.mu.Unlock()
			return nil
		}
		f, seq, last, name := t.f, t.seq, t.last, filepath.Base(t.path)
		t.dirty = false // a record written from now on is the next Sync's
		t.mu.Unlock()

		if t.beforeFsync != nil {
			t.beforeFsync()
		}
		err := f.Sync()
		if errors.Is(err, os.ErrClosed) && t.rotatedAway(f) {
			// A rotation synced and closed f meanwhile: what f holds is
			// durable, and the records after it are in the new file.
			continue
		}
		if err != nil {
			return t.fail("sync", err)
		}
		if err := writeTrailHead(t.head, seq, &last, name); err != nil {
			return t.fail("write the head", err)
		}
		return nil
	}
}

// rotatedAway reports whether f is no longer the live file, and if so marks
// the trail dirty, since its new live file has not been synced.
func (t *Trail) rotatedAway(f *os.File) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == f {
		return false
	}
	t.dirty = true
	return true
}

// syncLocked syncs the live file and writes the head. t.syncMu and t.mu
// must be held, or the trail not yet be shared (Open).
func (t *Trail) syncLocked() error {
	if err := t.f.Sync(); err != nil {
		return t.fail("sync", err)
	}
	if err := writeTrailHead(t.head, t.seq, &t.last, filepath.Base(t.path)); err != nil {
		return t.fail("write the head", err)
	}
	t.dirty = false
	return nil
}

// Err returns the trail's first failure, an error matching
// grantretry.ErrAuditTrail once it is closed, and nil while it is healthy.
// It never waits for a write or a sync in progress.
func (t *Trail) Err() error {
	if f := t.fault.Load(); f != nil {
		return f.first
	}
	return nil
}

// Close syncs and closes the trail. Writes after Close fail. Closing a
// broken trail returns its failure; closing it again returns nil.
func (t *Trail) Close() error {
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	var err error
	if f := t.fault.Load(); f != nil {
		err = f.later
	} else if t.dirty {
		err = t.syncLocked()
	}
	if cerr := t.f.Close(); cerr != nil && err == nil {
		err = t.fail("close", cerr)
	}
	t.fault.CompareAndSwap(nil, &trailFault{first: errClosed, later: errClosed})
	return err
}

// fail breaks the trail for good, unless it is already broken, and returns
// the error of the failing call.
func (t *Trail) fail(what string, cause error) error {
	first := fmt.Errorf("%w: %s: %w", grantretry.ErrAuditTrail, what, cause)
	later := &brokenError{
		first: first,
		msg:   fmt.Sprintf("grantretry: audit trail: broken by an earlier failure, no record is written (%s: %v)", what, cause),
	}
	if t.fault.CompareAndSwap(nil, &trailFault{first: first, later: later}) {
		return first
	}
	return t.fault.Load().later
}
