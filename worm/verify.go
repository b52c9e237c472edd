package worm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"sort"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// DefaultMaxCheckpointAge is how old a stream's last checkpoint may be
// before Verify says the shipper stopped or the trail was cut: two
// heartbeats.
const DefaultMaxCheckpointAge = 2 * DefaultHeartbeat

// retentionSlack allows for the clocks of the shipper and the store.
const retentionSlack = time.Minute

// VerifyOptions configures Verify. The zero value verifies the store
// alone, against the defaults.
type VerifyOptions struct {
	// Local, if not nil, holds the local copy of the trail: each of its
	// streams is compared with the store, record by record.
	Local Source
	// MinRetention is the retention every object must have from its
	// upload, in COMPLIANCE mode. Default DefaultRetention.
	MinRetention time.Duration
	// MaxCheckpointAge is how old a stream's last checkpoint may be,
	// unless it is a closed one. Default DefaultMaxCheckpointAge.
	MaxCheckpointAge time.Duration
	// Clock tells the time the checkpoints' age is measured at. If nil,
	// the system clock.
	Clock grantretry.Clock
}

// Kinds of Problem.
const (
	ProblemTampered        = "tampered"         // a record differs from its anchored copy, or a segment from its chain
	ProblemMissing         = "missing"          // an anchored record is not in the local files
	ProblemGap             = "gap"              // seqs that no segment holds, or a checkpoint past the last segment
	ProblemBrokenLink      = "broken-link"      // a segment or checkpoint does not continue the chain
	ProblemDeleteMarker    = "delete-marker"    // an object hidden by a delete marker
	ProblemExtraVersion    = "extra-version"    // a second version written over an object
	ProblemRetention       = "retention"        // a version locked for less than required, or not in COMPLIANCE mode
	ProblemStaleCheckpoint = "stale-checkpoint" // the last checkpoint is older than the heartbeat allows
	ProblemUnknownObject   = "unknown-object"   // an object under the prefix that is no segment or checkpoint
	ProblemLocalChain      = "local-chain"      // a local record past the last anchor does not continue the chain
	ProblemStopped         = "stopped"          // the last checkpoint says the shipper stopped the stream for good
	ProblemNothingAnchored = "nothing-anchored" // nothing under the prefix, or local records and none of them anchored
)

// Problem is one thing Verify found wrong, named by its stream and seq,
// and by the local file and line or the object and version it is in.
type Problem struct {
	Kind    string
	Stream  string
	Seq     uint64
	File    string
	Line    int
	Key     string
	Version string
	Text    string
}

// String returns "stream S seq N: WHERE: TEXT", or TEXT alone for a
// problem of no stream.
func (p Problem) String() string {
	if p.Stream == "" {
		return p.Text
	}
	var b strings.Builder
	b.WriteString("stream " + p.Stream)
	if p.Seq > 0 {
		fmt.Fprintf(&b, " seq %d", p.Seq)
	}
	switch {
	case p.File != "":
		b.WriteString(": " + position(p.File, p.Line))
	case p.Key != "":
		b.WriteString(": " + p.Key)
		if p.Version != "" {
			b.WriteString(" (version " + p.Version + ")")
		}
	}
	return b.String() + ": " + p.Text
}

// StreamReport is what Verify found of one stream.
type StreamReport struct {
	Stream         string
	Segments       int
	Records        int // anchored
	LastSeq        uint64
	LastHash       string
	LastCheckpoint time.Time // when the last checkpoint was stored
	Closed         bool      // the last checkpoint is a closed one
	// Stopped says the last checkpoint is a stopped one: the shipper
	// stopped the stream for good at a local record that did not
	// continue its chain, and anchors nothing more of it.
	Stopped bool
	// Local is the number of local records found equal to their anchored
	// copies; AtRisk the local records past the last anchor (the window
	// not anchored yet), from seq AtRiskFrom.
	Local      int
	AtRisk     int
	AtRiskFrom uint64
}

// Report is what Verify found.
type Report struct {
	Streams  []StreamReport
	Problems []Problem
}

// VerifyError is Verify's error when it found problems. It matches
// grantretry.ErrAuditTrail.
type VerifyError struct {
	Problems []Problem
}

func (e *VerifyError) Error() string {
	s := "grantretry: worm: " + e.Problems[0].String()
	if n := len(e.Problems); n > 1 {
		s += fmt.Sprintf(" (and %d more)", n-1)
	}
	return s
}

// Is matches grantretry.ErrAuditTrail.
func (e *VerifyError) Is(target error) bool { return target == grantretry.ErrAuditTrail }

// Verify checks everything under the store's prefix: it lists every
// version of every object, not only the current ones, and reports delete
// markers, extra versions, seqs that no segment holds, segments that do
// not continue the chain, retention shorter than MinRetention or not in
// COMPLIANCE mode, a last checkpoint older than MaxCheckpointAge, and a
// last checkpoint that says the shipper stopped the stream for good.
// With o.Local it compares each local stream with its anchored records:
// a local record that differs from its anchored copy or is missing is
// tampering, named by file, line and seq; local records past the last
// anchor are the window at risk. A check of nothing fails: nothing
// anchored under the prefix, or a local stream with records and none of
// them anchored, is a problem (a mistyped prefix or stream name passes no
// check). It returns a *VerifyError when it found a problem, another
// error when it could not read the store.
func Verify(ctx context.Context, store *Store, o VerifyOptions) (Report, error) {
	setDefault(&o.MinRetention, DefaultRetention)
	setDefault(&o.MaxCheckpointAge, DefaultMaxCheckpointAge)
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	objs, err := store.versions(ctx, "")
	if err != nil {
		return Report{}, fmt.Errorf("grantretry: worm: listing the store: %w", err)
	}
	v := &storeVerifier{o: o, store: store, h: sha256.New(), ctx: ctx}
	streams := v.group(objs)
	if o.Local != nil {
		local, err := o.Local.Streams(ctx)
		if err != nil {
			return Report{}, err
		}
		for _, name := range local {
			if streams[name] == nil {
				streams[name] = &storedStream{name: name}
			}
			streams[name].local = true
		}
	}
	names := make([]string, 0, len(streams))
	for name := range streams {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rep, err := v.stream(streams[name])
		if err != nil {
			return v.rep, err
		}
		v.rep.Streams = append(v.rep.Streams, rep)
	}
	v.nothingAnchored(streams)
	if len(v.rep.Problems) > 0 {
		return v.rep, &VerifyError{Problems: v.rep.Problems}
	}
	return v.rep, nil
}

// nothingAnchored reports each local stream with records and no segment
// in the store, and, if there is none, a prefix with no segment under it.
// A segment that does not verify is reported as what it is, not as
// nothing.
func (v *storeVerifier) nothingAnchored(streams map[string]*storedStream) {
	anchored, reported := false, false
	for _, r := range v.rep.Streams {
		has := len(streams[r.Stream].segments) > 0
		anchored = anchored || has
		if !has && r.AtRisk > 0 {
			v.problem(Problem{Kind: ProblemNothingAnchored, Stream: r.Stream, Seq: r.AtRiskFrom,
				Text: fmt.Sprintf("%s in the local files and none anchored under s3://%s/%s: a mistyped prefix or stream name, or a stream never shipped",
					plural(uint64(r.AtRisk), "record"), v.store.bucket, v.store.prefix)})
			reported = true
		}
	}
	if !anchored && !reported {
		v.problem(Problem{Kind: ProblemNothingAnchored,
			Text: fmt.Sprintf("nothing anchored under s3://%s/%s: a mistyped prefix, or nothing shipped yet", v.store.bucket, v.store.prefix)})
	}
}

// storedObject is one key's versions, oldest first, and delete markers.
type storedObject struct {
	name     objectName
	key      string
	versions []object
	markers  []object
}

type storedStream struct {
	name        string
	local       bool // the local copy has the stream
	segments    []*storedObject
	checkpoints []*storedObject
}

type storeVerifier struct {
	ctx   context.Context
	o     VerifyOptions
	store *Store
	h     hash.Hash
	rep   Report
	offs  []int
}

func (v *storeVerifier) problem(p Problem) { v.rep.Problems = append(v.rep.Problems, p) }

// group sorts the listing into streams, and reports what is no segment
// or checkpoint.
func (v *storeVerifier) group(objs []object) map[string]*storedStream {
	streams := map[string]*storedStream{}
	byKey := map[string]*storedObject{}
	for _, ob := range objs {
		so := byKey[ob.key]
		if so == nil {
			n, err := parseKey(strings.TrimPrefix(ob.key, v.store.prefix))
			if err != nil {
				v.problem(Problem{Kind: ProblemUnknownObject, Key: ob.key, Version: ob.version,
					Text: "an object under the prefix that is no segment or checkpoint"})
				continue
			}
			so = &storedObject{name: n, key: ob.key}
			byKey[ob.key] = so
			ss := streams[n.stream]
			if ss == nil {
				ss = &storedStream{name: n.stream}
				streams[n.stream] = ss
			}
			if n.checkpoint {
				ss.checkpoints = append(ss.checkpoints, so)
			} else {
				ss.segments = append(ss.segments, so)
			}
		}
		if ob.deleteMarker {
			so.markers = append(so.markers, ob)
		} else {
			so.versions = append(so.versions, ob)
		}
	}
	return streams
}

// stream verifies one stream's segments and checkpoints, and its local
// copy.
func (v *storeVerifier) stream(ss *storedStream) (StreamReport, error) {
	rep := StreamReport{Stream: ss.name}
	sort.Slice(ss.segments, func(i, j int) bool { return ss.segments[i].name.first < ss.segments[j].name.first })
	var cmp *localCompare
	if ss.local {
		cmp = startLocal(v.ctx, v.o.Local, ss.name, v)
		defer cmp.stop()
	}
	boundaries := map[uint64][32]byte{}
	st := chainState{}
	chainOK := true
	for _, so := range ss.segments {
		v.objectVersions(ss.name, so, so.name.first, "segment seq "+seqRange(so.name.first, so.name.last))
		if len(so.versions) == 0 {
			continue // only delete markers: its seqs show as a gap
		}
		if !chainOK {
			continue
		}
		switch {
		case so.name.first > st.seq+1:
			v.problem(Problem{Kind: ProblemGap, Stream: ss.name, Seq: st.seq + 1, Key: so.key,
				Text: fmt.Sprintf("seq %s are in no segment: the store's chain has a gap before this segment", seqRange(st.seq+1, so.name.first-1))})
			cmp.abandon()
			chainOK = false
			continue
		case so.name.first <= st.seq:
			v.problem(Problem{Kind: ProblemGap, Stream: ss.name, Seq: so.name.first, Key: so.key,
				Text: fmt.Sprintf("the segment starts at seq %d, the one before ends at seq %d: segments overlap", so.name.first, st.seq)})
			chainOK = false
			continue
		}
		next, err := v.segment(ss.name, so, st, cmp)
		if err != nil {
			return rep, err
		}
		if next.seq != so.name.last {
			chainOK = false
			cmp.abandon()
			continue
		}
		rep.Segments++
		rep.Records += int(next.seq - st.seq)
		st = next
		boundaries[st.seq] = st.hash
	}
	rep.LastSeq = st.seq
	if st.seq > 0 {
		rep.LastHash = hexHash(st.hash)
	}
	if err := v.checkpoints(ss, st, boundaries, &rep); err != nil {
		return rep, err
	}
	if cmp != nil {
		cmp.finish(st, &rep)
	}
	return rep, nil
}

// objectVersions reports delete markers and extra versions of so.
func (v *storeVerifier) objectVersions(stream string, so *storedObject, seq uint64, what string) {
	for _, m := range so.markers {
		v.problem(Problem{Kind: ProblemDeleteMarker, Stream: stream, Seq: seq, Key: so.key, Version: m.version,
			Text: what + " is hidden by a delete marker (deleted; its locked versions are still in the store)"})
	}
	for _, x := range so.versions[min(1, len(so.versions)):] {
		v.problem(Problem{Kind: ProblemExtraVersion, Stream: stream, Seq: seq, Key: so.key, Version: x.version,
			Text: fmt.Sprintf("%s has %d versions: a second one was uploaded over it (the first is the one verified)", what, len(so.versions))})
	}
}

// segment fetches and checks the first version of a segment as the
// successor of st, and compares its records with the local ones.
func (v *storeVerifier) segment(stream string, so *storedObject, st chainState, cmp *localCompare) (chainState, error) {
	ver := so.versions[0]
	data, sum, meta, err := v.store.getWithMeta(v.ctx, so.key, ver.version)
	if err != nil {
		return st, fmt.Errorf("grantretry: worm: reading %s: %w", so.key, err)
	}
	v.retention(stream, so, ver, so.name.first)
	if sum != "" {
		h := sha256.Sum256(data)
		if base64.StdEncoding.EncodeToString(h[:]) != sum {
			v.problem(Problem{Kind: ProblemTampered, Stream: stream, Seq: so.name.first, Key: so.key, Version: ver.version,
				Text: "the segment's bytes do not match the SHA-256 the store keeps for them"})
		}
	}
	next := v.segmentBytes(stream, so.key, ver.version, so.name, data, st, cmp)
	if next != st {
		v.segmentMeta(stream, so, ver.version, meta, st, next)
	}
	return next, nil
}

// segmentMeta reports a segment whose metadata does not say what its
// name and its records do: its stream, first and last seq, the hash
// before its first record and its last record's hash.
func (v *storeVerifier) segmentMeta(stream string, so *storedObject, version string, meta map[string]string, before, last chainState) {
	want := map[string]string{
		metaStream: stream, metaFirstSeq: fmt.Sprint(so.name.first), metaLastSeq: fmt.Sprint(so.name.last),
		metaPrevHash: hexHash(before.hash), metaLastHash: hexHash(last.hash),
	}
	for _, k := range []string{metaStream, metaFirstSeq, metaLastSeq, metaPrevHash, metaLastHash} {
		if got, ok := meta[k]; !ok || got != want[k] {
			if !ok {
				got = "nothing"
			}
			v.problem(Problem{Kind: ProblemBrokenLink, Stream: stream, Seq: so.name.first, Key: so.key, Version: version,
				Text: fmt.Sprintf("the segment's metadata %s says %s, its name and records %s", k, got, want[k])})
			return
		}
	}
}

// segmentBytes checks a segment's bytes; the verifier's work once they
// are fetched.
func (v *storeVerifier) segmentBytes(stream, key, version string, name objectName, data []byte, st chainState, cmp *localCompare) chainState {
	next, offs, bad := checkSegment(v.h, st, data, v.offs[:0])
	v.offs = offs
	if bad != nil {
		kind := ProblemBrokenLink
		if strings.Contains(bad.text, "edited") {
			kind = ProblemTampered
		}
		v.problem(Problem{Kind: kind, Stream: stream, Seq: bad.seq, Key: key, Version: version,
			Text: fmt.Sprintf("record %d of the segment: %s", bad.index+1, bad.text)})
		return st
	}
	if next.seq != name.last {
		v.problem(Problem{Kind: ProblemBrokenLink, Stream: stream, Seq: name.first, Key: key, Version: version,
			Text: fmt.Sprintf("the segment's name says seq %s, its records are seq %s", seqRange(name.first, name.last), seqRange(st.seq+1, next.seq))})
		return st
	}
	if cmp != nil {
		for i, off := range offs {
			end := len(data) - 1
			if i+1 < len(offs) {
				end = offs[i+1] - 1
			}
			cmp.anchored(st.seq+uint64(i)+1, data[off:end])
		}
	}
	return next
}

// retention reports a version locked for less than MinRetention from its
// upload, or not in COMPLIANCE mode.
func (v *storeVerifier) retention(stream string, so *storedObject, ver object, seq uint64) {
	mode, until, err := v.store.retention(v.ctx, so.key, ver.version)
	text := ""
	switch {
	case err != nil:
		text = "its retention cannot be read: " + err.Error()
	case mode != "COMPLIANCE":
		text = fmt.Sprintf("retention mode %q, not COMPLIANCE: it can be shortened or removed", mode)
	case until.Before(ver.modified.Add(v.o.MinRetention - retentionSlack)):
		text = fmt.Sprintf("locked until %s, %s after its upload: shorter than the %s required",
			until.UTC().Format(time.RFC3339), until.Sub(ver.modified).Round(time.Second), v.o.MinRetention)
	}
	if text != "" {
		v.problem(Problem{Kind: ProblemRetention, Stream: stream, Seq: seq, Key: so.key, Version: ver.version, Text: text})
	}
}

// checkpoints checks a stream's checkpoints against its chain, which
// stands at st: none may name a seq past it, the last must name a
// segment's last record with its hash, and be recent enough.
func (v *storeVerifier) checkpoints(ss *storedStream, st chainState, boundaries map[uint64][32]byte, rep *StreamReport) error {
	var latest *storedObject
	var latestAt time.Time
	for _, so := range ss.checkpoints {
		v.objectVersions(ss.name, so, so.name.last, "checkpoint of seq "+fmt.Sprint(so.name.last))
		if len(so.versions) == 0 {
			continue
		}
		if so.name.last > st.seq {
			v.problem(Problem{Kind: ProblemGap, Stream: ss.name, Seq: st.seq + 1, Key: so.key,
				Text: fmt.Sprintf("a checkpoint says seq %d was anchored, the segments end at seq %d: segments missing from the end", so.name.last, st.seq)})
		}
		if at := so.versions[0].modified; latest == nil || at.After(latestAt) || at.Equal(latestAt) && so.name.nanos > latest.name.nanos {
			latest, latestAt = so, at
		}
	}
	if latest == nil {
		if len(ss.segments) > 0 {
			v.problem(Problem{Kind: ProblemStaleCheckpoint, Stream: ss.name, Seq: st.seq,
				Text: "the stream has segments and no checkpoint"})
		}
		return nil
	}
	ver := latest.versions[0]
	v.retention(ss.name, latest, ver, latest.name.last)
	data, _, err := v.store.get(v.ctx, latest.key, ver.version)
	if err != nil {
		return fmt.Errorf("grantretry: worm: reading %s: %w", latest.key, err)
	}
	var cp checkpoint
	var h [32]byte
	if json.Unmarshal(data, &cp) != nil || hexDecode(h[:], cp.Hash) != nil {
		v.problem(Problem{Kind: ProblemBrokenLink, Stream: ss.name, Seq: latest.name.last, Key: latest.key, Version: ver.version,
			Text: "not a checkpoint"})
		return nil
	}
	rep.LastCheckpoint, rep.Closed, rep.Stopped = latestAt, cp.Kind == kindClosed, cp.Kind == kindStopped
	if want, ok := boundaries[cp.Seq]; cp.Seq != latest.name.last || cp.Stream != ss.name || (cp.Seq > 0 && (!ok || want != h)) {
		v.problem(Problem{Kind: ProblemBrokenLink, Stream: ss.name, Seq: cp.Seq, Key: latest.key, Version: ver.version,
			Text: "the checkpoint does not name the last record of a segment with its hash"})
	}
	if rep.Stopped {
		v.problem(Problem{Kind: ProblemStopped, Stream: ss.name, Seq: cp.Seq, Key: latest.key, Version: ver.version,
			Text: fmt.Sprintf("the shipper stopped the stream for good after seq %d, at a local record that does not continue the chain: nothing after it is anchored", cp.Seq)})
		return nil
	}
	if age := v.o.Clock.Now().Sub(latestAt); age > v.o.MaxCheckpointAge && !rep.Closed {
		v.problem(Problem{Kind: ProblemStaleCheckpoint, Stream: ss.name, Seq: cp.Seq, Key: latest.key, Version: ver.version,
			Text: fmt.Sprintf("the last checkpoint was stored %s ago, the heartbeat allows %s: the shipper stopped, or the trail was cut after seq %d",
				age.Round(time.Second), v.o.MaxCheckpointAge, cp.Seq)})
	}
	return nil
}

func seqRange(a, b uint64) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d to %d", a, b)
}

// localRecord is one line of the local copy.
type localRecord struct {
	data []byte
	file string
	line int
}

// localCompare walks a local stream beside its anchored records. It
// reports the first local record that differs, and stops comparing
// there: what follows a removed or moved record cannot be matched line
// by line.
type localCompare struct {
	v       *storeVerifier
	stream  string
	cancel  context.CancelFunc
	batches chan []localRecord
	errc    chan error
	batch   []localRecord
	done    bool // the local records ran out
	stopped bool // a problem was reported, or the store's chain broke
	matched int
	last    localRecord
}

// startLocal reads the local stream in the background, in batches.
func startLocal(ctx context.Context, src Source, stream string, v *storeVerifier) *localCompare {
	ctx, cancel := context.WithCancel(ctx)
	c := &localCompare{v: v, stream: stream, cancel: cancel, batches: make(chan []localRecord, 4), errc: make(chan error, 1)}
	go func() {
		defer close(c.batches)
		var batch []localRecord
		var buf []byte
		size := 0
		err := src.Scan(ctx, stream, 0, func(rec []byte, file string, line int) error {
			if len(buf)+len(rec) > cap(buf) {
				buf = make([]byte, 0, max(1<<20, len(rec)))
			}
			start := len(buf)
			buf = append(buf, rec...)
			batch = append(batch, localRecord{data: buf[start:len(buf):len(buf)], file: file, line: line})
			size += len(rec)
			if size >= 1<<20 {
				select {
				case c.batches <- batch:
				case <-ctx.Done():
					return ctx.Err()
				}
				batch, size, buf = nil, 0, nil
			}
			return nil
		})
		if err == nil && len(batch) > 0 {
			select {
			case c.batches <- batch:
			case <-ctx.Done():
			}
		}
		c.errc <- err
	}()
	return c
}

func (c *localCompare) next() (localRecord, bool) {
	for len(c.batch) == 0 {
		if c.done {
			return localRecord{}, false
		}
		b, ok := <-c.batches
		if !ok {
			c.done = true
			if err := <-c.errc; err != nil && !c.stopped {
				c.v.problem(Problem{Kind: ProblemMissing, Stream: c.stream, Text: "the local files cannot be read: " + err.Error()})
				c.stopped = true
			}
			return localRecord{}, false
		}
		c.batch = b
	}
	r := c.batch[0]
	c.batch = c.batch[1:]
	c.last = r
	return r, true
}

// abandon stops the comparison where the store's chain breaks.
func (c *localCompare) abandon() {
	if c != nil {
		c.stopped = true
	}
}

func (c *localCompare) stop() { c.cancel() }

// anchored compares the anchored record seq, line, with the next local
// record.
func (c *localCompare) anchored(seq uint64, line []byte) {
	if c.stopped {
		return
	}
	prev := c.last
	r, ok := c.next()
	if !ok {
		if c.stopped {
			return
		}
		p := Problem{Kind: ProblemMissing, Stream: c.stream, Seq: seq, File: prev.file, Line: prev.line + 1,
			Text: fmt.Sprintf("seq %d is anchored, the local files end at seq %d: records missing from the end (the tail cut)", seq, seq-1)}
		if prev.file == "" {
			p.Text = fmt.Sprintf("seq %d is anchored, the local files hold no record", seq)
		}
		c.v.problem(p)
		c.stopped = true
		return
	}
	if bytes.Equal(r.data, line) {
		c.matched++
		return
	}
	p := Problem{Kind: ProblemTampered, Stream: c.stream, Seq: seq, File: r.file, Line: r.line}
	l, ok := trail.ParseLink(r.data)
	switch {
	case !ok:
		p.Text = fmt.Sprintf("not the record anchored as seq %d: not a trail record (edited?)", seq)
	case l.Seq == seq:
		p.Text = "differs from its anchored copy (edited, or the chain rewritten)"
	case l.Seq > seq:
		p.Kind = ProblemMissing
		p.Text = fmt.Sprintf("seq %d is anchored but not here: the line holds seq %d (a record removed or moved)", seq, l.Seq)
	default:
		p.Text = fmt.Sprintf("the line holds seq %d where the anchored chain has seq %d (a record repeated or moved)", l.Seq, seq)
	}
	c.v.problem(p)
	c.stopped = true
}

// finish counts the local records past the last anchor, st, checking
// that they continue the chain.
func (c *localCompare) finish(st chainState, rep *StreamReport) {
	rep.Local = c.matched
	if c.stopped {
		return
	}
	for {
		r, ok := c.next()
		if !ok {
			return
		}
		l, problem := linkProblem(c.v.h, st, r.data)
		if problem != "" {
			c.v.problem(Problem{Kind: ProblemLocalChain, Stream: c.stream, Seq: max(l.seq, st.seq+1), File: r.file, Line: r.line,
				Text: "past the last anchor: " + problem})
			return
		}
		if rep.AtRisk == 0 {
			rep.AtRiskFrom = l.seq
		}
		rep.AtRisk++
		st = chainState{seq: l.seq, hash: l.hash}
	}
}
