package trail

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"time"
)

// Record is one record of a trail, as Read hands it over and Records
// yields it.
type Record struct {
	File  string
	Line  int
	Seq   uint64
	Hash  string
	Time  time.Time // the ts field, zero if it has none or it does not parse
	Level string
	Msg   string
	// Fields holds every other key of the record (not ts, level, msg, seq,
	// prev or hash), numbers as json.Number.
	Fields map[string]any
}

// Read verifies the trail as Verify does and hands every record to fn, in
// chain order, as it goes. It stops at the first
// broken record, after fn has seen every record before it, or at fn's
// first error, which it returns. fn may be nil.
func Read(paths []string, fn func(Record) error) (sum Summary, err error) {
	v := &verifier{fn: fn, pool: newScanPool(fn != nil)}
	defer v.pool.close()
	defer func() { sum = v.summary() }()
	files, err := v.order(paths)
	if err != nil {
		return v.sum, err
	}
	for _, f := range files {
		if err := v.file(f); err != nil {
			return v.sum, err
		}
	}
	return v.sum, v.finish(paths)
}

// Records yields the records of the trail files paths, verified as Read
// verifies them, one at a time in chain order, reading the files as the
// loop goes: it stops reading as soon as the loop stops. Where Read would
// return an error (a broken record, after the records before it; a file
// that cannot be read; a trail that falls short of its head), Records
// yields it with a zero Record, and yields nothing more: the records after
// a break in the chain cannot be trusted.
func Records(paths ...string) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		stopped := false
		_, err := Read(paths, func(r Record) error {
			if !yield(r, nil) {
				stopped = true
				return errLoopStopped
			}
			return nil
		})
		if err != nil && !stopped {
			yield(Record{}, err)
		}
	}
}

// errLoopStopped ends Read when the loop over Records stops.
var errLoopStopped = errors.New("the loop over the records stopped")

// rawString returns the JSON string raw holds, "" if it holds anything
// else.
func rawString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// recordReader reads a trail file line by line.
type recordReader struct {
	f    *os.File
	r    *bufio.Reader
	line int   // number of the line last read
	end  int64 // offset just past it
}

// Problems of a line as read, before its content is looked at.
var (
	errNoNewline   = errors.New("file ends mid-record (torn or truncated)")
	errLineTooLong = fmt.Errorf("record longer than %d bytes", maxRecordBytes)
)

func isLineProblem(err error) bool {
	return errors.Is(err, errNoNewline) || errors.Is(err, errLineTooLong)
}

func lineProblem(err error) string { return err.Error() }

func openRecords(path string) (*recordReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &recordReader{f: f, r: bufio.NewReaderSize(f, maxRecordBytes)}, nil
}

func (rr *recordReader) close() { rr.f.Close() }

// next returns the next line without its newline, valid until the next
// call; io.EOF at the end; errNoNewline with the partial last line;
// errLineTooLong for a line longer than a record can be.
func (rr *recordReader) next() ([]byte, error) {
	b, err := rr.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, rr.skipLine(len(b))
	}
	if err == io.EOF && len(b) == 0 {
		return nil, io.EOF
	}
	rr.line++
	rr.end += int64(len(b))
	if err == io.EOF {
		return b, errNoNewline
	}
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// skipLine reads past the rest of a line too long to be a record.
func (rr *recordReader) skipLine(n int) error {
	rr.line++
	rr.end += int64(n)
	for {
		b, err := rr.r.ReadSlice('\n')
		rr.end += int64(len(b))
		if err == nil || err == io.EOF {
			return errLineTooLong
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}
