package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TrailError is the first broken record VerifyTrail found in a writer's
// chain. It matches grantretry.ErrAuditTrail.
type TrailError struct {
	Writer  string
	Seq     uint64 // the record's seq, or the seq the chain expected there
	Problem string
}

func (e *TrailError) Error() string {
	return fmt.Sprintf("grantretry: audit trail: database writer %s, record seq %d: %s", quoteIfNeeded(e.Writer), e.Seq, e.Problem)
}

// quoteIfNeeded returns s as it is if it is printable text without spaces
// or quotes, else quoted with its control characters escaped: a writer
// id comes from a column anyone with the table's INSERT can fill, and an
// error is printed on an operator's terminal.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == '"' || r == '\\' }) {
		return strconv.Quote(s)
	}
	return s
}

// Is matches grantretry.ErrAuditTrail.
func (e *TrailError) Is(target error) bool { return target == grantretry.ErrAuditTrail }

// WriterSummary describes one writer's verified chain.
type WriterSummary struct {
	Writer   string
	Records  int
	LastSeq  uint64
	LastHash string // keep it outside the database: a cut tail shows only against it
}

// TrailSummary describes the verified trail of the fleet.
type TrailSummary struct {
	Writers      []WriterSummary // by writer id
	Records      int
	Messages     map[string]int // records per msg
	Dispositions map[string]int // disposition records per disposition
}

// TrailRecord is one record of the fleet's trail as ReadTrail hands it
// over.
type TrailRecord struct {
	Writer string
	Seq    uint64
	Hash   string
	Time   time.Time
	Level  string
	Msg    string
	Fields map[string]any // every other key, numbers as json.Number
}

// VerifyTrail checks every writer's hash chain in the trail table: each
// record's hash, that it follows the record before (seq and prev), that
// the chain starts at seq 1 with its opening record (MsgTrailOpened), and
// that the columns agree with the records: seq, prev and hash with the
// chain fields, and writer with the writer every opening record in the
// chain names. It returns a *TrailError naming the writer and seq of the
// first broken record: an edit, a deletion, or rows moved to another
// writer, even by a superuser who disabled the trigger. A cut tail (the
// last records of a chain deleted) shows only against a LastHash kept
// elsewhere. The written column (the server's time of the insert) is not
// covered and nothing reads it: a record's time is its own ts.
func VerifyTrail(ctx context.Context, pool *pgxpool.Pool) (TrailSummary, error) {
	return ReadTrail(ctx, pool, nil)
}

// ReadTrail verifies the trail as VerifyTrail does and hands every record
// to fn, writer by writer, in chain order. It stops at the first broken
// record or at fn's first error, which it returns. fn may be nil.
func ReadTrail(ctx context.Context, pool *pgxpool.Pool, fn func(TrailRecord) error) (TrailSummary, error) {
	sum := TrailSummary{Messages: map[string]int{}, Dispositions: map[string]int{}}
	rows, err := pool.Query(ctx,
		`SELECT writer, seq, record, prev, hash FROM grantretry_trail ORDER BY writer, seq`)
	if err != nil {
		return sum, queryError(err)
	}
	defer rows.Close()
	v := chainVerifier{h: sha256.New()}
	for rows.Next() {
		var writer, record, prev, hsh string
		var seq int64
		if err := rows.Scan(&writer, &seq, &record, &prev, &hsh); err != nil {
			return sum, fmt.Errorf("%w: fleet: %w", grantretry.ErrAuditTrail, err)
		}
		if writer != v.writer {
			v.next(&sum, writer)
		}
		rec, err := v.check(writer, uint64(seq), []byte(record), prev, hsh)
		if err != nil {
			return sum, err
		}
		sum.Records++
		sum.Messages[rec.Msg]++
		if rec.Msg == grantretry.MsgDisposition {
			if d, ok := rec.Fields[grantretry.FieldDisposition].(string); ok {
				sum.Dispositions[d]++
			}
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return sum, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return sum, queryError(err)
	}
	v.next(&sum, "")
	return sum, nil
}

// undefinedTable is PostgreSQL's SQLSTATE for a relation that does not
// exist.
const undefinedTable = "42P01"

// queryError wraps a failure to read the trail table. A database where
// Migrate never ran has no trail at all, which is not a broken chain: the
// error says so, and still wraps the server's error for errors.As.
func queryError(err error) error {
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == undefinedTable {
		return fmt.Errorf("%w: fleet: the database has no table grantretry_trail: the fleet's schema was never created in it (Migrate creates it), or it is not the fleet's database: %w",
			grantretry.ErrAuditTrail, err)
	}
	return fmt.Errorf("%w: fleet: %w", grantretry.ErrAuditTrail, err)
}

// chainVerifier follows one writer's chain at a time.
type chainVerifier struct {
	h      hash.Hash
	writer string
	cur    WriterSummary
	seq    uint64
	last   [32]byte
}

// next closes the current writer's summary and starts writer's.
func (v *chainVerifier) next(sum *TrailSummary, writer string) {
	if v.writer != "" {
		v.cur.LastSeq, v.cur.LastHash = v.seq, hex.EncodeToString(v.last[:])
		sum.Writers = append(sum.Writers, v.cur)
	}
	v.writer, v.cur, v.seq, v.last = writer, WriterSummary{Writer: writer}, 0, [32]byte{}
}

func (v *chainVerifier) check(writer string, seq uint64, line []byte, prevCol, hashCol string) (TrailRecord, error) {
	broken := func(seq uint64, format string, args ...any) (TrailRecord, error) {
		return TrailRecord{}, &TrailError{Writer: writer, Seq: seq, Problem: fmt.Sprintf(format, args...)}
	}
	if seq != v.seq+1 {
		if v.seq == 0 {
			return broken(seq, "the chain starts at seq %d, not 1 (its first records deleted, or this record's writer column edited?)", seq)
		}
		if seq > v.seq+1 {
			return broken(v.seq+1, "seq %d follows seq %d: %d records missing (deleted?)", seq, v.seq, seq-v.seq-1)
		}
		return broken(seq, "seq %d follows seq %d", seq, v.seq)
	}
	l, ok := trail.ParseLink(line)
	if !ok {
		return broken(seq, "no chain fields (seq, prev, hash) at the end of the record (edited?)")
	}
	switch {
	case !l.Valid(v.h):
		return broken(seq, "hash does not match the record (edited?)")
	case l.Seq != seq:
		return broken(seq, "the record says seq %d (edited?)", l.Seq)
	case l.Prev != v.last:
		return broken(seq, "prev is not the hash of seq %d (edited, or a record replaced?)", v.seq)
	case prevCol != hex.EncodeToString(l.Prev[:]) || hashCol != hex.EncodeToString(l.Hash[:]):
		return broken(seq, "the prev or hash column does not match the record (edited?)")
	}
	v.seq, v.last = seq, l.Hash
	v.cur.Records++
	rec, err := decodeRecord(l.Hashed)
	if err != nil {
		return broken(seq, "%v", err)
	}
	rec.Writer, rec.Seq, rec.Hash = writer, seq, hex.EncodeToString(l.Hash[:])
	// The writer column is outside the hashed bytes: only the chain's
	// opening records name the writer inside them. A chain renamed whole
	// (its rows' writer changed together) links and hashes as before, so
	// it shows only here: its first record must be an opening record, and
	// every opening record must name the chain it is in.
	switch {
	case seq == 1 && rec.Msg != MsgTrailOpened:
		return broken(seq, "the chain's first record is %q, not its opening record %q (the writer column edited?)", rec.Msg, MsgTrailOpened)
	case rec.Msg == MsgTrailOpened && rec.Fields["writer"] != writer:
		return broken(seq, "the opening record names writer %s, not this chain's (the writer column edited?)", quoteIfNeeded(fmt.Sprint(rec.Fields["writer"])))
	}
	return rec, nil
}

// decodeRecord reads the record's own fields (hashed ends before the
// chain's prev; its seq and prev are dropped).
func decodeRecord(hashed []byte) (TrailRecord, error) {
	var rec TrailRecord
	obj := append(append([]byte(nil), hashed...), '}')
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return rec, fmt.Errorf("not a JSON object: %v", err)
	}
	rec.Level, _ = m["level"].(string)
	rec.Msg, _ = m["msg"].(string)
	if ts, ok := m["ts"].(string); ok {
		rec.Time, _ = time.Parse(time.RFC3339Nano, ts)
	}
	for _, k := range []string{"ts", "level", "msg", "seq", "prev"} {
		delete(m, k)
	}
	rec.Fields = m
	return rec, nil
}
