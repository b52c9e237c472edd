package worm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/grantretry/grantretry/trail"
)

// Source is where a trail's records are: the Shipper reads the records
// to anchor from it, and Verify compares it with what is anchored. Its
// method sets use only built-in types, so that another module can
// provide one (the fleet's trail does) without importing this one.
//
// Streams returns the names of the source's streams, one hash chain each
// (valid stream names: see StreamName). Scan calls fn with the records of
// stream in chain order, as the source holds them, each line without its
// newline (valid only during the call) and where it is (a file and a
// 1-based line, or a table and 0), starting at the first record whose seq
// is after after; every line after that one is passed, whatever it holds,
// up to the last durable record. It passes only whole, durable records: a
// record the source may still lose (a trail file's records after its
// head, which a power loss can take and the reopened trail write again
// under the same seqs) and a live file's last line still being written
// are left for a later Scan. It stops at fn's first error and returns it.
// A Source must be safe for concurrent use.
type Source interface {
	Streams(ctx context.Context) ([]string, error)
	Scan(ctx context.Context, stream string, after uint64, fn func(record []byte, file string, line int) error) error
}

// Files is the Source of one trail file's records (package trail): one
// stream, named after the live file unless told otherwise. It passes the
// records up to the one the trail's head file names (see
// [trail.ReadHead]), the last the trail synced; without a head file, every
// whole record. It is safe for concurrent use.
type Files struct {
	stream string
	live   string   // the live file, when following
	paths  []string // the files given, when not following
	head   string   // the live file whose head file says what is durable

	mu  sync.Mutex // guards cur
	cur cursor

	// readers keeps Scan's readers, whose buffer holds the longest
	// record, for the next Scan: a shipper scans every PollInterval.
	readers sync.Pool
}

// cursor is where the last Scan stopped: just after the record seq, at
// offset off of a file (identified by info, which a rotation's rename
// keeps), which is its line-th line.
type cursor struct {
	seq  uint64
	info os.FileInfo
	off  int64
	line int
}

// FollowFiles returns the Source of the trail whose live file is live: it
// reads the rotated files (live.000001 and on) and the live file as they
// are on each Scan, as a shipper beside a running pipeline does. stream
// names the stream; "" for StreamName of the live file's base name.
func FollowFiles(stream, live string) (*Files, error) {
	if stream == "" {
		stream = StreamName(filepath.Base(live))
	}
	if err := checkStream(stream); err != nil {
		return nil, err
	}
	if live == "" {
		return nil, errors.New("grantretry: worm: no trail file")
	}
	return &Files{stream: stream, live: filepath.Clean(live), head: filepath.Clean(live)}, nil
}

// OpenFiles returns the Source of the trail files given, as "grantretry
// audit verify" takes them: the live file, rotated files and head files,
// in any order. With one trail's own names they are read in rotation
// order, the live file last; otherwise by the seq of each file's first
// record. The head file given, else the one beside the live file, says
// which records are durable. stream names the stream; "" for StreamName
// of the live file's base name.
func OpenFiles(stream string, paths ...string) (*Files, error) {
	var files []string
	head := ""
	seen := map[string]bool{}
	for _, p := range paths {
		c := filepath.Clean(p)
		if seen[c] || strings.HasSuffix(c, ".head.tmp") {
			continue
		}
		if live, ok := strings.CutSuffix(c, ".head"); ok {
			head = live
			continue
		}
		seen[c] = true
		if _, err := os.Stat(c); err != nil {
			return nil, fmt.Errorf("grantretry: worm: %w", err)
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		return nil, errors.New("grantretry: worm: no trail file among the files given")
	}
	if stream == "" {
		stream = StreamName(filepath.Base(trail.LiveFile(files[0])))
	}
	if err := checkStream(stream); err != nil {
		return nil, err
	}
	if head == "" {
		head = trail.LiveFile(filepath.Clean(files[0]))
	}
	return &Files{stream: stream, paths: files, head: head}, nil
}

// Stream returns the name of the files' stream.
func (f *Files) Stream() string { return f.stream }

// Streams returns the files' one stream.
func (f *Files) Streams(context.Context) ([]string, error) { return []string{f.stream}, nil }

// Scan calls fn with the records after seq after, in chain order.
func (f *Files) Scan(ctx context.Context, stream string, after uint64, fn func([]byte, string, int) error) error {
	if stream != f.stream {
		return nil
	}
	// The head before the files: every record it names is in them.
	head, synced, err := trail.ReadHead(f.head)
	if err != nil {
		return fmt.Errorf("grantretry: worm: %w", err)
	}
	files, live, err := f.files()
	if err != nil {
		return err
	}
	f.mu.Lock()
	cur := f.cur
	f.mu.Unlock()
	start, off, line := 0, int64(0), 0
	resumed := false
	if cur.info != nil && cur.seq == after && after > 0 {
		for i, p := range files {
			if fi, err := os.Stat(p); err == nil && os.SameFile(fi, cur.info) {
				start, off, line, resumed = i, cur.off, cur.line, true
				break
			}
		}
	}
	if !resumed && after > 0 {
		start = skipFiles(files, after)
	}
	r := &scanRun{fn: fn, after: after, started: resumed, readers: &f.readers, limited: synced, limit: head.Seq}
	for i := start; i < len(files); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i > start {
			off, line = 0, 0
		}
		var want os.FileInfo
		if i == len(files)-1 {
			want = live
		}
		end, err := r.file(files[i], off, line, want)
		if errors.Is(err, errRotated) {
			return nil // the next Scan lists the files again and goes on after r.last
		}
		if err != nil {
			return err
		}
		if end.info != nil && r.last > 0 {
			f.mu.Lock()
			f.cur = cursor{seq: r.last, info: end.info, off: end.off, line: end.line}
			f.mu.Unlock()
		}
		if end.partial || end.held {
			break // nothing after a line still being written, or not synced
		}
	}
	return nil
}

// errRotated is a Scan's reason to stop early: the live file was rotated
// after the files were listed, so its path names a newer file than the
// listing's, and the records between are in a rotated file not listed.
var errRotated = errors.New("grantretry: worm: the live file was rotated during the scan")

// files lists the trail's files in chain order. Following a live file,
// live is that file as it was before the rotated files were listed: if
// the live path names another file when it is read, a rotation came
// between, and the scan must list again.
func (f *Files) files() (paths []string, live os.FileInfo, err error) {
	if f.live == "" {
		paths, err = orderFiles(f.paths)
		return paths, nil, err
	}
	live, _ = os.Stat(f.live)
	entries, err := os.ReadDir(filepath.Dir(f.live))
	if err != nil {
		return nil, nil, fmt.Errorf("grantretry: worm: %w", err)
	}
	base := filepath.Base(f.live)
	type rot struct {
		n    int
		path string
	}
	var rs []rot
	for _, e := range entries {
		if n, ok := trail.RotatedIndex(base, e.Name()); ok {
			rs = append(rs, rot{n, filepath.Join(filepath.Dir(f.live), e.Name())})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].n < rs[j].n })
	var out []string
	for _, r := range rs {
		out = append(out, r.path)
	}
	if live != nil {
		out = append(out, f.live)
	}
	return out, live, nil
}

// scanRun is one Scan's progress.
type scanRun struct {
	fn      func([]byte, string, int) error
	after   uint64
	started bool   // a record after after was passed: pass every line
	last    uint64 // seq of the last record passed, 0 if none parsed
	readers *sync.Pool
	// limited says the trail has a head, and limit is its seq: nothing
	// after it is passed.
	limited bool
	limit   uint64
}

// fileEnd is where a file's scan stopped.
type fileEnd struct {
	info    os.FileInfo
	off     int64
	line    int
	partial bool // at a last line without its newline
	held    bool // at the first record after the head's
}

// file passes the whole lines of path from offset off, the line-th line
// before it. If want is not nil and path is another file now, it passes
// nothing and returns errRotated.
func (r *scanRun) file(path string, off int64, line int, want os.FileInfo) (fileEnd, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fileEnd{}, nil // rotated away between the listing and now: the next Scan finds it
		}
		return fileEnd{}, fmt.Errorf("grantretry: worm: %w", err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return fileEnd{}, fmt.Errorf("grantretry: worm: %w", err)
	}
	if want != nil && !os.SameFile(info, want) {
		return fileEnd{}, errRotated
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return fileEnd{}, fmt.Errorf("grantretry: worm: %w", err)
	}
	br, _ := r.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReaderSize(fh, 2<<20)
	}
	br.Reset(fh)
	defer r.readers.Put(br)
	end := fileEnd{info: info, off: off, line: line}
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return end, fmt.Errorf("grantretry: worm: %s line %d: a line longer than a record can be", path, end.line+1)
		}
		if err == io.EOF {
			end.partial = len(b) > 0
			return end, nil
		}
		if err != nil {
			return end, fmt.Errorf("grantretry: worm: %w", err)
		}
		rec := b[:len(b)-1]
		seq := uint64(0)
		if l, ok := trail.ParseLink(rec); ok {
			seq = l.Seq
		}
		if r.started || seq > r.after || (seq == 0 && r.after == 0) {
			if r.limited && max(r.after, r.last) >= r.limit {
				// Past the head: not durable yet, or never to be if a
				// power loss takes it. A line before the head's record
				// is passed whatever it holds, as damage to report.
				end.held = true
				return end, nil
			}
			r.started = true
			if err := r.fn(rec, path, end.line+1); err != nil {
				return end, err
			}
			if seq > 0 {
				r.last = seq
			}
		}
		end.off += int64(len(b))
		end.line++
	}
}

// skipFiles returns the index of the first file that can hold the record
// after seq after: every file before it starts at or before it, and so
// does the next one.
func skipFiles(files []string, after uint64) int {
	start := 0
	for i, p := range files {
		first, err := firstSeq(p)
		if err != nil || first == 0 {
			break
		}
		if first > after+1 {
			break
		}
		start = i
	}
	return start
}

// orderFiles puts the files given in chain order: rotation order when
// they carry one trail's names, else by their first record's seq.
func orderFiles(paths []string) ([]string, error) {
	base := trail.LiveFile(filepath.Clean(paths[0]))
	own := true
	for _, p := range paths {
		own = own && trail.LiveFile(filepath.Clean(p)) == base
	}
	type ranked struct {
		rank uint64
		path string
	}
	rs := make([]ranked, 0, len(paths))
	for _, p := range paths {
		var rank uint64
		if own {
			n, ok := trail.RotatedIndex(filepath.Base(base), filepath.Base(filepath.Clean(p)))
			rank = uint64(n)
			if !ok {
				rank = 1 << 62 // the live file last
			}
		} else {
			first, err := firstSeq(p)
			if err != nil {
				return nil, err
			}
			rank = first
		}
		rs = append(rs, ranked{rank, p})
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].rank < rs[j].rank })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.path
	}
	return out, nil
}

// firstSeq returns the seq of path's first record, 0 if it has none or it
// does not parse.
func firstSeq(path string) (uint64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("grantretry: worm: %w", err)
	}
	defer fh.Close()
	b, err := bufio.NewReaderSize(fh, 2<<20).ReadSlice('\n')
	if err != nil {
		return 0, nil
	}
	l, _ := trail.ParseLink(b[:len(b)-1])
	return l.Seq, nil
}
