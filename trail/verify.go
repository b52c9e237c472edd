package trail

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/grantretry/grantretry"
)

// Error is the first broken record Verify or Read found. It matches
// grantretry.ErrAuditTrail.
type Error struct {
	File string // the file, as given
	Line int    // 1-based line number in File
	// Seq is the record's seq, or, when the record's own cannot be read,
	// the seq the chain expected there.
	Seq uint64
	// Problem says what is wrong, for a person: "hash does not match the
	// record (edited?)", "seq 41 after seq 39: 1 record missing".
	Problem string
	// NotTrail says the trail's first line is not a record of a trail at
	// all (no seq, prev and hash): the file is not an audit trail, or its
	// very first record is torn.
	NotTrail bool
}

// Error returns "grantretry: audit trail: FILE line N (record seq S): PROBLEM".
func (e *Error) Error() string {
	return "grantretry: audit trail: " + e.Position() + ": " + e.Problem
}

// Position returns "FILE line N (record seq S)", or "line N (record seq
// S)" without a file.
func (e *Error) Position() string {
	s := e.File
	if e.Line > 0 {
		s += " line " + strconv.Itoa(e.Line)
	}
	if e.Seq > 0 {
		s += " (record seq " + strconv.FormatUint(e.Seq, 10) + ")"
	}
	return strings.TrimPrefix(s, " ") // no file: lines VerifyLines was given
}

// Is matches grantretry.ErrAuditTrail.
func (e *Error) Is(target error) bool { return target == grantretry.ErrAuditTrail }

// Summary describes a verified trail, or the part of it read before
// the first broken record.
type Summary struct {
	Files    []string // the files with records, in chain order
	Records  int
	FirstSeq uint64
	LastSeq  uint64
	LastHash string // hex hash of the last record: anchor it outside the trail
	// HeadSeq is the seq the head file says was synced last, 0 without a
	// head file.
	HeadSeq      uint64
	Messages     map[string]int // records per msg
	Dispositions map[string]int // disposition records per disposition
}

// Verify checks the hash chain of the given trail files, the live one and
// the rotated ones, in any order. When they carry the trail's
// own names (one live file FILE and rotated files FILE.000001 and on) it
// reads them in rotation order, the live file last; otherwise in the order
// of the seq of their first record. Every record must be a JSON object
// whose hash matches it, whose prev is the hash of the record before and
// whose seq follows it; the trail must start at seq 1; and if the trail
// has a head file, the chain must reach the seq it says was synced, with
// the hash it says. The head files are FILE.head beside the files, and any
// head file given among paths (a path ending in .head), wherever it is.
// It returns a *Error naming the first broken record.
func Verify(paths ...string) (Summary, error) {
	return Read(paths, nil)
}

// verifier reads a trail's files in chain order, checking each record
// against the one before.
type verifier struct {
	fn    func(Record) error
	pool  *scanPool
	heads []*headCheck
	sum   Summary
	files trailNames
	cur   trailFile // the file being read
	lines int       // lines read in it
	seq   uint64    // of the last record read, 0 before the first
	last  [32]byte  // its hash
	lastF trailFile // the file that holds it
	// lines says the records are lines in memory, not files: the chain
	// before them is given (seq and last, when anchored), and no file
	// name is known.
	linesOnly, anchored bool
	lastPrev            [32]byte // the prev of the last record, when linesOnly
	lastHashed          []byte   // what its hash covers, when linesOnly
	msgs, disps         counts   // the summary's counts, as they grow
}

// headCheck is a head file and what the chain says of it.
type headCheck struct {
	path string
	head trailHead
}

// trailFile is one file of the trail being read.
type trailFile struct {
	path  string
	index int    // rotation index, 0 for the live file; -1 without the trail's own names
	first uint64 // seq of its first record, when ordered by it
}

// trailNames is what the names of the files given say.
type trailNames struct {
	own     bool            // they are one trail's own names: FILE and FILE.NNNNNN
	base    string          // FILE's base name, when own
	indexes []int           // the rotation indexes given, ascending, when own
	given   map[string]bool // base names of the files given
}

// order dedupes paths, reads the head files among them and beside them,
// and returns the trail files in chain order: by rotation index when the
// names are the trail's own, which an edit of a record cannot change, else
// by the seq of each file's first record.
func (v *verifier) order(paths []string) ([]trailFile, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no file to read", grantretry.ErrAuditTrail)
	}
	var files []trailFile
	seen := map[string]bool{}
	for _, p := range paths {
		c := filepath.Clean(p)
		switch {
		case seen[c]:
			continue
		case strings.HasSuffix(c, ".head.tmp"):
			// a head being written when a crash came: maybe torn, and
			// never more than the head it was to replace is worth
		case isHeadPath(c):
			if err := v.addHead(c); err != nil {
				return nil, err
			}
		default:
			files = append(files, trailFile{path: p})
			if err := v.addHead(trailBase(c) + ".head"); err != nil {
				return nil, err
			}
		}
		seen[c] = true
	}
	v.files = nameFiles(files)
	if v.files.own {
		slices.SortStableFunc(files, func(a, b trailFile) int { return cmp.Compare(rotationRank(a.index), rotationRank(b.index)) })
		return files, nil
	}
	return orderByFirstSeq(files)
}

// nameFiles sets each file's rotation index, if the files carry one
// trail's own names.
func nameFiles(files []trailFile) trailNames {
	n := trailNames{own: true, given: map[string]bool{}}
	for i := range files {
		c := filepath.Clean(files[i].path)
		n.given[filepath.Base(c)] = true
		base := trailBase(c)
		if i == 0 {
			n.base = base
		}
		n.own = n.own && base == n.base
		files[i].index, _ = rotatedIndex(filepath.Base(base), filepath.Base(c))
	}
	if !n.own {
		for i := range files {
			files[i].index = -1
		}
		return trailNames{given: n.given}
	}
	for _, f := range files {
		if f.index > 0 {
			n.indexes = append(n.indexes, f.index)
		}
	}
	slices.Sort(n.indexes)
	n.base = filepath.Base(n.base)
	return n
}

// rotationRank puts the live file, index 0, after every rotated one.
func rotationRank(index int) int {
	if index == 0 {
		return math.MaxInt
	}
	return index
}

// orderByFirstSeq drops empty files and orders the rest by the seq of
// their first record.
func orderByFirstSeq(files []trailFile) ([]trailFile, error) {
	var out []trailFile
	for _, f := range files {
		first, err := firstSeq(f.path)
		if err != nil {
			return nil, err
		}
		if first > 0 {
			f.first = first
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b trailFile) int { return cmp.Compare(a.first, b.first) })
	return out, nil
}

// rotatedName is the name of the rotated file with index i.
func (n *trailNames) rotatedName(i int) string {
	return fmt.Sprintf("%s.%06d", n.base, i)
}

// missingRotated names the rotated files with an index between lo and hi,
// both exclusive, that are not among the files given, and counts them.
// Only the trail's own names say which are missing.
func (n *trailNames) missingRotated(lo, hi int) ([]string, int) {
	if !n.own {
		return nil, 0
	}
	var names []string
	count, prev := 0, lo
	gap := func(a, b int) { // the indexes strictly between a and b
		switch {
		case b-a == 2:
			names = append(names, n.rotatedName(a+1))
		case b-a > 2:
			names = append(names, n.rotatedName(a+1)+" to "+n.rotatedName(b-1))
		}
		count += max(b-a-1, 0)
	}
	for _, i := range n.indexes {
		if i <= lo || i >= hi {
			continue
		}
		gap(prev, i)
		prev = i
	}
	gap(prev, hi)
	return names, count
}

// addHead reads the head file at path, if there is one and it is not
// known yet.
func (v *verifier) addHead(path string) error {
	for _, hc := range v.heads {
		if hc.path == path {
			return nil
		}
	}
	head, err := readTrailHead(path)
	if err != nil || head == nil {
		return err
	}
	v.heads = append(v.heads, &headCheck{path: path, head: *head})
	if head.Seq > v.sum.HeadSeq {
		v.sum.HeadSeq = head.Seq
	}
	return nil
}

// firstSeq returns the seq of the first record of the file at path, 0 if
// it is empty.
func firstSeq(path string) (uint64, error) {
	rr, err := openRecords(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	defer rr.close()
	line, err := rr.next()
	switch {
	case err == io.EOF:
		return 0, nil
	case err != nil && !isLineProblem(err):
		return 0, fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	l, ok := parseLink(line)
	if err != nil || !ok {
		return 0, &Error{File: path, Line: 1, Problem: "the first line is not a record with chain fields, the file cannot be put in order"}
	}
	return l.seq, nil
}

// file reads and checks every record of the file f.
func (v *verifier) file(f trailFile) error {
	fl, err := os.Open(f.path)
	if err != nil {
		return readError(err)
	}
	defer fl.Close()
	v.cur, v.lines = f, 0
	r := &fileBlocks{f: fl}
	return v.run(r.fill)
}

// record checks ls, the n-th line of the current file, and takes it as
// the last record.
func (v *verifier) record(n int, ls *lineScan) error {
	if ls.lineErr != nil {
		return v.broken(n, 0, lineProblem(ls.lineErr))
	}
	l, problem := ls.l, ls.problem
	if problem != "" && !ls.parsed && v.sum.Records == 0 && !v.anchored && n == 1 {
		return &Error{File: v.cur.path, Line: n, NotTrail: true,
			Problem: "not an audit trail: the first line is not a trail record (seq, prev, hash), or the trail's first record is torn"}
	}
	if problem == "" {
		problem = v.chainProblem(n, l, ls.line)
	}
	if problem != "" {
		return v.broken(n, l.seq, problem)
	}
	if ls.notJSON {
		return v.broken(n, l.seq, "not a JSON object (edited?)")
	}
	if problem := v.headProblem(l); problem != "" {
		return v.broken(n, l.seq, problem)
	}
	v.accept(l, ls.msg, ls.disp)
	if v.fn != nil {
		rec := *ls.rec
		rec.File, rec.Line = v.cur.path, n
		return v.fn(rec)
	}
	return nil
}

func (v *verifier) broken(line int, seq uint64, problem string) error {
	if seq == 0 {
		seq = v.seq + 1
	}
	return &Error{File: v.cur.path, Line: line, Seq: seq, Problem: problem}
}

// chainProblem says what is wrong with record l, the n-th line of its
// file, as the successor of the last record read; "" if nothing.
func (v *verifier) chainProblem(n int, l link, line []byte) string {
	if v.sum.Records == 0 && !v.anchored {
		switch {
		case l.seq != 1:
			return v.startGap(l, line)
		case l.prev != [32]byte{}:
			return "the first record of the trail has a prev that is not 64 zeros"
		}
		return ""
	}
	atStart := n == 1 && !v.linesOnly
	switch {
	case l.seq > v.seq+1 && atStart:
		return v.boundaryGap(l, line)
	case l.seq > v.seq+1:
		return fmt.Sprintf("seq %d after seq %d: %s missing", l.seq, v.seq, trailPlural(l.seq-v.seq-1, "record"))
	case l.seq <= v.seq && atStart:
		return fmt.Sprintf("first record of %s has seq %d, the file before (%s) ends at seq %d: the files overlap",
			filepath.Base(v.cur.path), l.seq, filepath.Base(v.lastF.path), v.seq)
	case l.seq <= v.seq:
		return fmt.Sprintf("seq %d after seq %d: a record repeated or moved (inserted or reordered?)", l.seq, v.seq)
	case l.prev != v.last && atStart:
		return fmt.Sprintf("prev does not match the hash of the last record of %s, the file before (a file replaced?)", filepath.Base(v.lastF.path))
	case l.prev != v.last:
		return "prev does not match the hash of the record before (inserted or reordered?)"
	}
	return ""
}

// startGap says what is missing before l, the first record read, whose
// seq is not 1. That a file is missing is said only when the names say
// so: a rotated index below the file's is not among the files, or the
// file's trail_continued names a file that is not.
func (v *verifier) startGap(l link, line []byte) string {
	s := fmt.Sprintf("trail starts at seq %d, not 1: %s missing", l.seq, trailPlural(l.seq-1, "record"))
	if v.linesOnly {
		return s + " before it"
	}
	if v.cur.index > 0 {
		if names, count := v.files.missingRotated(0, v.cur.index); count > 0 {
			return s + ", the first " + pluralVerb(count, "file is", "files are") + " missing (" + notAmong(names, count) + ")"
		}
	}
	if names, count := v.notGiven(line); count > 0 {
		return s + ", a file is missing (" + notAmong(names, count) + ")"
	}
	return s + " before it"
}

// boundaryGap says what is missing between the last record read and l,
// the first record of the next file, whose seq does not follow.
func (v *verifier) boundaryGap(l link, line []byte) string {
	missing := l.seq - v.seq - 1
	before := filepath.Base(v.lastF.path)
	s := fmt.Sprintf("first record of %s has seq %d, the file before (%s) ends at seq %d: %s missing",
		filepath.Base(v.cur.path), l.seq, before, v.seq, trailPlural(missing, "record"))
	var names []string
	count := 0
	if v.lastF.index > 0 && v.cur.index > 0 {
		names, count = v.files.missingRotated(v.lastF.index, v.cur.index)
	}
	if count == 0 {
		if prev := continuedFrom(line); prev == before {
			return s + " from the end of " + before
		}
		names, count = v.notGiven(line)
	}
	if count == 0 {
		return s
	}
	return s + ", " + pluralVerb(count, "a file is", "files are") + " missing (" + notAmong(names, count) + ")"
}

// notGiven names the file the record line continues from, if it is a
// trail_continued record and that file is not among the files given.
func (v *verifier) notGiven(line []byte) ([]string, int) {
	prev := continuedFrom(line)
	if prev == "" || v.files.given[prev] {
		return nil, 0
	}
	return []string{prev}, 1
}

// continuedFrom returns the prev_file of line if it is a trail_continued
// record, "" otherwise.
func continuedFrom(line []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || rawString(m["msg"]) != MsgContinued {
		return ""
	}
	return rawString(m[FieldPrevFile])
}

func notAmong(names []string, count int) string {
	return strings.Join(names, ", ") + " " + pluralVerb(count, "is", "are") + " not among the files"
}

func pluralVerb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func trailPlural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatUint(n, 10) + " " + noun + "s"
}

// headProblem says what is wrong with record l if a head file names its
// seq with another hash.
func (v *verifier) headProblem(l link) string {
	for _, hc := range v.heads {
		if hc.head.Seq == l.seq && hc.head.Hash != hex.EncodeToString(l.hash[:]) {
			return fmt.Sprintf("hash is not the one %s says was synced for seq %d (rewritten?)", filepath.Base(hc.path), l.seq)
		}
	}
	return ""
}

// accept makes l, whose msg and disposition are msg and disp, the last
// record read and counts it.
func (v *verifier) accept(l link, msg, disp []byte) {
	s := &v.sum
	if s.Records == 0 {
		s.FirstSeq = l.seq
	}
	if len(s.Files) == 0 || s.Files[len(s.Files)-1] != v.cur.path {
		s.Files = append(s.Files, v.cur.path)
	}
	s.Records++
	s.LastSeq = l.seq
	v.msgs.add(msg)
	if string(msg) == grantretry.MsgDisposition {
		v.disps.add(disp)
	}
	v.seq, v.last, v.lastF = l.seq, l.hash, v.cur
	if v.linesOnly {
		v.lastPrev, v.lastHashed = l.prev, l.hashed
	}
}

// counts counts records by a field's value. The values are few (a
// handful of msgs and dispositions), so a list searched in order costs
// less than a map's hash; past a few dozen values, a map takes over.
type counts struct {
	list []countOf
	more map[string]*int
}

type countOf struct {
	k string
	n int
}

const countList = 32

// add counts k, allocating only for a value not seen before.
func (c *counts) add(k []byte) {
	for i := range c.list {
		if c.list[i].k == string(k) {
			c.list[i].n++
			return
		}
	}
	if len(c.list) < countList {
		c.list = append(c.list, countOf{k: string(k), n: 1})
		return
	}
	if p := c.more[string(k)]; p != nil {
		*p++
		return
	}
	if c.more == nil {
		c.more = map[string]*int{}
	}
	n := 1
	c.more[string(k)] = &n
}

// into adds the counts to m.
func (c *counts) into(m map[string]int) {
	for _, e := range c.list {
		m[e.k] += e.n
	}
	for k, n := range c.more {
		m[k] += *n
	}
}

// summary returns the summary of the records taken so far.
func (v *verifier) summary() Summary {
	s := v.sum
	s.Messages, s.Dispositions = map[string]int{}, map[string]int{}
	v.msgs.into(s.Messages)
	v.disps.into(s.Dispositions)
	if s.Records > 0 {
		s.LastHash = hex.EncodeToString(v.last[:])
	}
	return s
}

// finish checks what only the whole trail shows: that it has records, and
// that it reaches every head.
func (v *verifier) finish(paths []string) error {
	if v.sum.Records == 0 {
		return &Error{File: strings.Join(paths, ", "), Problem: "no record in the trail"}
	}
	for _, hc := range v.heads {
		if hc.head.Seq > v.seq {
			return &Error{File: v.cur.path, Line: v.lines + 1, Seq: v.seq + 1, Problem: fmt.Sprintf(
				"trail ends at seq %d but its head says seq %d was synced: records missing from the end", v.seq, hc.head.Seq)}
		}
	}
	return nil
}
