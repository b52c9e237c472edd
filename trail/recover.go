package trail

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/grantretry/grantretry"
)

// trailSurvey is what Open found on disk.
type trailSurvey struct {
	existed bool     // the trail had a file before this open
	index   int      // largest rotated file index, 0 if none
	rotated string   // its base name, "" if none
	live    fileScan // of the live file, zero if there is none
	seq     uint64   // the record the chain goes on from, 0 for a new trail
	last    [32]byte // its hash
}

// surveyTrail finds where the chain of the trail at path goes on, and
// refuses a trail that lost synced records or is damaged where a cut could
// lose one.
func surveyTrail(path string) (trailSurvey, error) {
	var s trailSurvey
	head, err := readTrailHead(path + ".head")
	if err != nil {
		return s, err
	}
	var want uint64
	if head != nil {
		want = head.Seq
	}
	if s.index, s.rotated, err = newestRotated(path); err != nil {
		return s, fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	if s.live, err = scanFile(path, want); err != nil {
		return s, err
	}
	s.existed = s.index > 0 || s.live.size > 0
	if err := s.resumePoint(path); err != nil {
		return s, err
	}
	if err := s.checkCut(head); err != nil {
		return s, err
	}
	return s, s.checkHead(path, head)
}

// checkCut refuses to cut the live file from its first bad line on unless
// nothing from there on was ever synced: the line is the last one (a torn
// append), or it comes after the record the head says was synced last. A
// torn last line the head covers is refused by checkHead. Without a head
// nothing says where the synced records end, so only the last line may go.
// resumePoint must have run.
func (s *trailSurvey) checkCut(head *trailHead) error {
	bad := s.live.bad
	switch {
	case bad == nil, s.live.badIsLast:
		return nil
	case head == nil:
		return fmt.Errorf("%w: damaged before its last line, and no head says which records were synced: not opened (verify it, keep it as evidence, start a new trail): %w",
			grantretry.ErrAuditTrail, bad)
	case head.Seq > s.seq:
		return fmt.Errorf("%w: damaged at or before seq %d, which its head says was synced: not opened (verify it, keep it as evidence, start a new trail): %w",
			grantretry.ErrAuditTrail, head.Seq, bad)
	}
	return nil
}

// resumePoint sets the record the chain goes on from: the last good one of
// the live file before its first bad line, or if it has none (a crash
// during a rotation, or a first line lost) the last of the newest rotated
// file.
func (s *trailSurvey) resumePoint(path string) error {
	if s.live.records > 0 || s.rotated == "" {
		s.seq, s.last = s.live.seq, s.live.last
		return nil
	}
	prev := filepath.Join(filepath.Dir(path), s.rotated)
	rs, err := scanFile(prev, 0)
	if err != nil {
		return err
	}
	if rs.bad != nil || rs.records == 0 {
		return fmt.Errorf("%w: %s, the newest rotated file, does not end with a good record: not opened", grantretry.ErrAuditTrail, prev)
	}
	s.seq, s.last = rs.seq, rs.last
	return nil
}

// checkHead refuses a trail that ends before the record its head says was
// synced, or whose record at that seq is not the one synced.
func (s *trailSurvey) checkHead(path string, head *trailHead) error {
	if head == nil {
		return nil
	}
	if head.Seq > s.seq {
		return fmt.Errorf("%w: %s ends at seq %d but its head says seq %d was synced: records missing from the end, not opened",
			grantretry.ErrAuditTrail, path, s.seq, head.Seq)
	}
	if s.live.found && hex.EncodeToString(s.live.wantSum[:]) != head.Hash {
		return fmt.Errorf("%w: %s: record seq %d is not the one its head says was synced (rewritten?): not opened",
			grantretry.ErrAuditTrail, path, head.Seq)
	}
	return nil
}

// fileScan is what scanFile found in one trail file.
type fileScan struct {
	size    int64    // bytes in the file
	records int      // good records, from the first line on
	end     int64    // offset just past the last good record
	seq     uint64   // of the last good record, 0 if none
	last    [32]byte // its hash
	found   bool     // a good record has the seq scanFile was asked for
	wantSum [32]byte // its hash
	// bad is the first line that does not verify against the one before
	// it in the file, nil if none; badIsLast says it is the file's last.
	bad       *Error
	badIsLast bool
	torn      int64    // bytes from end on, when there is a bad line
	tornSum   [32]byte // their SHA-256
}

// scanFile checks the chain within the file at path, which may be missing,
// up to its first bad line. want is a seq whose hash to report.
func scanFile(path string, want uint64) (fileScan, error) {
	var s fileScan
	rr, err := openRecords(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	defer rr.close()
	if err := s.read(rr, path, want); err != nil {
		return s, fmt.Errorf("%w: %w", grantretry.ErrAuditTrail, err)
	}
	if s.bad == nil {
		return s, nil
	}
	s.torn = s.size - s.end
	return s, s.hashTail(rr.f)
}

// read reads lines up to the first bad one, then on to the end.
func (s *fileScan) read(rr *recordReader, path string, want uint64) error {
	h := sha256.New()
	for {
		line, err := rr.next()
		if err == io.EOF {
			s.size = rr.end
			return nil
		}
		if err != nil && !isLineProblem(err) {
			return err
		}
		if s.bad != nil {
			s.badIsLast = false
			continue
		}
		problem := ""
		if err != nil {
			problem = lineProblem(err)
		}
		s.take(h, rr, path, line, want, problem)
	}
}

// take checks one line and makes it the last good record, or the bad one.
func (s *fileScan) take(h hash.Hash, rr *recordReader, path string, line []byte, want uint64, problem string) {
	var l link
	if problem == "" {
		l, problem = checkLine(h, line)
	}
	if problem == "" && s.records > 0 && (l.seq != s.seq+1 || l.prev != s.last) {
		problem = "does not follow the record before"
	}
	if problem != "" {
		seq := l.seq
		if seq == 0 && s.records > 0 {
			seq = s.seq + 1
		}
		s.bad, s.badIsLast = &Error{File: path, Line: rr.line, Seq: seq, Problem: problem}, true
		return
	}
	s.records++
	s.end, s.seq, s.last = rr.end, l.seq, l.hash
	if l.seq == want {
		s.found, s.wantSum = true, l.hash
	}
}

// hashTail sums the bytes of f from s.end on.
func (s *fileScan) hashTail(f *os.File) error {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, s.end, s.torn)); err != nil {
		return err
	}
	h.Sum(s.tornSum[:0])
	return nil
}
