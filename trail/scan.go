package trail

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grantretry/grantretry"
)

// A trail is read in blocks of whole lines, and each block is scanned on
// its own (a record's hash covers only its own bytes and the prev it
// names), on as many goroutines as there are processors: what a record's
// chain fields, its hash and its JSON say is known before the chain is
// followed, record by record, in order, on the caller's goroutine.

const (
	// fileBlock is the most a block of a file holds: more than the
	// longest record, so that a block ends at the end of a record.
	fileBlock = 2 * maxRecordBytes
	// sliceBlock is about the most a block of lines in memory holds.
	sliceBlock = 256 << 10
	// maxScanWorkers bounds the goroutines, and so the blocks in
	// memory, of one read.
	maxScanWorkers = 8
)

// lineScan is what the scan of one line found before the chain is
// followed.
type lineScan struct {
	line    []byte // without its newline, in the block
	lineErr error  // errNoNewline or errLineTooLong: the line was not scanned
	l       link
	parsed  bool    // the chain fields parsed
	problem string  // checkLine's
	notJSON bool    // the record is not a JSON object
	msg     []byte  // the record's msg
	disp    []byte  // its disposition
	rec     *Record // when the records are decoded whole, without File and Line
	// short holds msg and disp when they fit, so that counting them
	// reads what the scan wrote, not the block's bytes again, which have
	// left the cache by then.
	short [2][24]byte
}

// block is consecutive lines of a file or a slice.
type block struct {
	buf     []byte // a file's block is read into it
	data    []byte // whole lines, and at the end of the input maybe a line without its newline
	tooLong bool   // the block is the start of a line too long to be a record, and the last
	err     error  // a read error, after data
	lines   []lineScan
	done    chan struct{} // closed once lines are scanned
}

// scan scans every line of b. With full, it decodes each record whole
// for Read's fn.
func (b *block) scan(h *chainHasher, full bool) {
	b.lines = b.lines[:0]
	if b.tooLong {
		b.lines = append(b.lines, lineScan{lineErr: errLineTooLong})
		return
	}
	for rest := b.data; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			ls := lineScan{line: rest, lineErr: errNoNewline}
			if len(rest) >= maxRecordBytes {
				ls.lineErr = errLineTooLong
			}
			b.lines = append(b.lines, ls)
			return
		}
		line := rest[:i]
		rest = rest[i+1:]
		if len(line) >= maxRecordBytes {
			b.lines = append(b.lines, lineScan{lineErr: errLineTooLong})
			return
		}
		b.lines = append(b.lines, lineScan{line: line})
		scanLine(h, &b.lines[len(b.lines)-1], full)
	}
}

// scanLine checks ls.line's chain fields, hash and JSON.
func scanLine(h *chainHasher, ls *lineScan, full bool) {
	ls.l, ls.problem = h.check(ls.line)
	ls.parsed = ls.l.hashed != nil
	if ls.problem != "" {
		return
	}
	if !full {
		var ok bool
		ls.msg, ls.disp, ok = scanRecordJSON(ls.line)
		ls.notJSON = !ok
		if len(ls.msg) <= len(ls.short[0]) {
			ls.msg = ls.short[0][:copy(ls.short[0][:], ls.msg)]
		}
		if len(ls.disp) <= len(ls.short[1]) {
			ls.disp = ls.short[1][:copy(ls.short[1][:], ls.disp)]
		}
		return
	}
	rec, err := decodeRecord(ls.line, ls.l)
	ls.rec, ls.notJSON = &rec, err != nil
	d, _ := rec.Fields[grantretry.FieldDisposition].(string)
	ls.msg, ls.disp = []byte(rec.Msg), []byte(d)
}

// decodeRecord decodes line, whose chain fields are l, whole.
func decodeRecord(line []byte, l link) (Record, error) {
	rec := Record{Seq: l.seq, Hash: hex.EncodeToString(l.hash[:])}
	if !json.Valid(line) {
		return rec, errors.New("not JSON")
	}
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&rec.Fields); err != nil {
		return rec, err
	}
	rec.Msg, _ = rec.Fields["msg"].(string)
	rec.Level, _ = rec.Fields["level"].(string)
	if ts, ok := rec.Fields["ts"].(string); ok {
		rec.Time, _ = time.Parse(time.RFC3339Nano, ts)
	}
	for _, k := range []string{"ts", "level", "msg", FieldSeq, FieldPrev, FieldHash} {
		delete(rec.Fields, k)
	}
	return rec, nil
}

// scanPool scans blocks on its goroutines, or, with one processor, on
// the caller's.
type scanPool struct {
	full  bool
	depth int // blocks in flight
	work  chan *block
	wg    sync.WaitGroup
	h     *chainHasher // the caller's, without goroutines
	stop  atomic.Bool
	free  []*block
}

func newScanPool(full bool) *scanPool {
	n := min(runtime.GOMAXPROCS(0), maxScanWorkers)
	p := &scanPool{full: full, depth: max(2*n, 2)}
	if n == 1 {
		p.h = newChainHasher()
		return p
	}
	p.work = make(chan *block, p.depth)
	p.wg.Add(n)
	for range n {
		go p.worker()
	}
	return p
}

func (p *scanPool) worker() {
	defer p.wg.Done()
	h := newChainHasher()
	for b := range p.work {
		if !p.stop.Load() {
			b.scan(h, p.full)
		}
		close(b.done)
	}
}

// close ends the pool's goroutines.
func (p *scanPool) close() {
	if p.work != nil {
		close(p.work)
		p.wg.Wait()
	}
}

func (p *scanPool) submit(b *block) {
	b.done = make(chan struct{})
	if p.work == nil {
		b.scan(p.h, p.full)
		close(b.done)
		return
	}
	p.work <- b
}

func (p *scanPool) get() *block {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return &block{}
}

func (p *scanPool) put(b *block) {
	b.data, b.tooLong, b.err = nil, false, nil
	p.free = append(p.free, b)
}

// run scans the blocks fill fills, fill returning false after the last
// one, and takes their lines in order. It returns the first broken
// record's error, once no block is being scanned.
func (v *verifier) run(fill func(*block) bool) error {
	p := v.pool
	var queue []*block
	defer func() {
		p.stop.Store(len(queue) > 0)
		for _, b := range queue {
			<-b.done
			p.put(b)
		}
		p.stop.Store(false)
	}()
	for more := true; ; {
		for more && len(queue) < p.depth {
			b := p.get()
			more = fill(b)
			p.submit(b)
			queue = append(queue, b)
		}
		if len(queue) == 0 {
			return nil
		}
		b := queue[0]
		queue = queue[1:]
		<-b.done
		err := v.take(b)
		p.put(b)
		if err != nil {
			return err
		}
	}
}

// take takes the lines of b, in order.
func (v *verifier) take(b *block) error {
	for i := range b.lines {
		v.lines++
		if err := v.record(v.lines, &b.lines[i]); err != nil {
			return err
		}
	}
	if b.err != nil {
		return readError(b.err)
	}
	return nil
}

// fileBlocks fills blocks from f, each with whole lines but the last,
// which ends where the file does.
type fileBlocks struct {
	f     *os.File
	carry []byte // the start of a line, read into the block before
}

func (r *fileBlocks) fill(b *block) bool {
	if cap(b.buf) < fileBlock {
		b.buf = make([]byte, fileBlock)
	}
	buf := b.buf[:fileBlock]
	n := copy(buf, r.carry) // it may overlap buf: copy moves it
	r.carry = nil
	var err error
	for n < len(buf) && err == nil {
		var m int
		m, err = r.f.Read(buf[n:])
		n += m
	}
	data := buf[:n]
	last := bytes.LastIndexByte(data, '\n')
	switch {
	case err == io.EOF:
		b.data = data
		return false
	case err != nil:
		b.data, b.err = data[:last+1], err
		return false
	case last < 0:
		b.tooLong = true
		return false
	}
	b.data, r.carry = data[:last+1], data[last+1:]
	return true
}

// sliceBlocks fills blocks with the lines of data, without copying them.
type sliceBlocks struct{ rest []byte }

func (s *sliceBlocks) fill(b *block) bool {
	i := -1
	if len(s.rest) > sliceBlock {
		i = bytes.IndexByte(s.rest[sliceBlock:], '\n')
	}
	if i < 0 {
		b.data, s.rest = s.rest, nil
		return false
	}
	b.data, s.rest = s.rest[:sliceBlock+i+1], s.rest[sliceBlock+i+1:]
	return len(s.rest) > 0
}

// readError is the error of a file that could not be read.
func readError(err error) error {
	return fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
}

// VerifyLines checks data, consecutive records of one chain each ending
// in a newline, as Verify checks the records of a file: each must be a
// JSON object whose hash matches it, whose seq follows the seq of the
// record before and whose prev is that record's hash. The record before
// the first is the one with seq after and hash prev; after 0 says data
// starts the chain, and then its first record must have seq 1 and a prev
// of 64 zeros, and prev must be zero.
//
// It returns the link of the last record that verified (its Hashed is in
// data), or, before any, a Link with Seq after and Hash prev: the records
// verified are the returned Seq minus after, and the next piece of the
// chain is checked from the returned Seq and Hash. At the first broken
// record it returns as well a *Error whose Line is the record's line in
// data, counted from 1, whose Seq is its seq and whose File is empty,
// with the Problem Verify would report. Like Verify, it scans data on
// as many goroutines as there are processors and allocates nothing per
// record: a store that keeps the trail in pieces (objects, rows) can
// check each piece at about the speed of hashing it.
func VerifyLines(data []byte, after uint64, prev [32]byte) (Link, error) {
	if after == 0 && prev != ([32]byte{}) {
		return Link{Hash: prev}, fmt.Errorf("%w: VerifyLines: after 0 starts the chain, which has no record before it, but prev is not zero", grantretry.ErrAuditTrail)
	}
	if after == math.MaxUint64 && len(data) > 0 {
		return Link{Seq: after, Hash: prev}, fmt.Errorf("%w: VerifyLines: no record can follow seq %d", grantretry.ErrAuditTrail, after)
	}
	v := &verifier{pool: newScanPool(false), linesOnly: true, anchored: after > 0, seq: after, last: prev}
	defer v.pool.close()
	src := &sliceBlocks{rest: data}
	err := v.run(src.fill)
	return Link{Seq: v.seq, Prev: v.lastPrev, Hash: v.last, Hashed: v.lastHashed}, err
}
