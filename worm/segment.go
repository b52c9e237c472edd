package worm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"time"
)

// chainState is where a stream's chain stands: the seq and hash of its
// last record, zero before the first.
type chainState struct {
	seq  uint64
	hash [32]byte
}

// linkProblem says what is wrong with line as the record after st; "" if
// nothing. h is a SHA-256 hash it resets.
func linkProblem(h hash.Hash, st chainState, line []byte) (link, string) {
	l, ok := parseLink(line)
	switch {
	case !ok:
		return l, "not a trail record (no seq, prev and hash at its end)"
	case l.seq != st.seq+1:
		if l.seq > st.seq+1 {
			return l, fmt.Sprintf("seq %d after seq %d: %s missing", l.seq, st.seq, plural(l.seq-st.seq-1, "record"))
		}
		return l, fmt.Sprintf("seq %d after seq %d: a record repeated or moved", l.seq, st.seq)
	case l.prev != st.hash:
		return l, fmt.Sprintf("prev is not the hash of seq %d (a record replaced, or the chain rewritten?)", st.seq)
	}
	var sum [32]byte
	h.Reset()
	h.Write(l.prev[:])
	h.Write(line[:l.hashed])
	h.Sum(sum[:0])
	if sum != l.hash {
		return l, "hash does not match the record (edited?)"
	}
	return l, ""
}

// link is a record's chain fields.
type link struct {
	seq        uint64
	prev, hash [32]byte
	hashed     int // the hash covers prev and line[:hashed]
}

const (
	seqKey  = `,"seq":`
	prevKey = `,"prev":"`
	hashKey = `,"hash":"`
	// tailLen is the length of what ends every record after its seq:
	// ,"prev":"<64 hex>","hash":"<64 hex>"}.
	tailLen = len(prevKey) + 64 + 1 + len(hashKey) + 64 + 2
)

// parseLink reads the chain fields that end line (without its newline),
// as the trail writes them: `,"seq":N,"prev":"<64 hex>","hash":"<64
// hex>"}`. It reads what trail.ParseLink reads, at fixed offsets from the
// end instead of searching for the keys: the verifier's inner loop is
// then the hash.
func parseLink(line []byte) (link, bool) {
	var l link
	n := len(line)
	if n < tailLen+len(seqKey)+1 {
		return l, false
	}
	i := n - 2 - 64 - len(hashKey) // where ,"hash":" starts
	j := i - 1 - 64 - len(prevKey) // where ,"prev":" starts
	if string(line[n-2:]) != `"}` || string(line[i:i+len(hashKey)]) != hashKey ||
		line[i-1] != '"' || string(line[j:j+len(prevKey)]) != prevKey {
		return l, false
	}
	if _, err := hex.Decode(l.hash[:], line[i+len(hashKey):n-2]); err != nil {
		return l, false
	}
	if _, err := hex.Decode(l.prev[:], line[j+len(prevKey):i-1]); err != nil {
		return l, false
	}
	k := j
	for k > 0 && line[k-1] >= '0' && line[k-1] <= '9' && j-k < 20 {
		k--
	}
	if k == j || k < len(seqKey) || string(line[k-len(seqKey):k]) != seqKey {
		return l, false
	}
	var seq uint64
	for _, c := range line[k:j] {
		d := uint64(c - '0')
		if seq > (1<<64-1-d)/10 {
			return l, false
		}
		seq = seq*10 + d
	}
	if seq == 0 {
		return l, false
	}
	l.seq, l.hashed = seq, i
	return l, true
}

// segmentProblem is the first broken record of a segment.
type segmentProblem struct {
	index int    // 0-based line of the segment
	seq   uint64 // the record's seq, or the one expected there
	text  string
}

// checkSegment checks that data, a segment's bytes, is whole records that
// continue the chain from st, and returns where the chain stands after it
// and each record's offset in data (appended to offs, which it may reuse).
// It is the verifier's inner loop: one scan for newlines, the chain
// fields read from each line's end, one SHA-256 per record.
func checkSegment(h hash.Hash, st chainState, data []byte, offs []int) (chainState, []int, *segmentProblem) {
	if len(data) == 0 {
		return st, offs, &segmentProblem{seq: st.seq + 1, text: "the segment is empty"}
	}
	for i, off := 0, 0; off < len(data); i++ {
		n := bytes.IndexByte(data[off:], '\n')
		if n < 0 {
			return st, offs, &segmentProblem{index: i, seq: st.seq + 1, text: "the segment ends mid-record"}
		}
		line := data[off : off+n]
		l, problem := linkProblem(h, st, line)
		if problem != "" {
			seq := l.seq
			if seq == 0 {
				seq = st.seq + 1
			}
			return st, offs, &segmentProblem{index: i, seq: seq, text: problem}
		}
		offs = append(offs, off)
		st = chainState{seq: l.seq, hash: l.hash}
		off += n + 1
	}
	return st, offs, nil
}

// checkpoint is the body of a checkpoint object: where a stream's chain
// stood when the checkpoint was written.
type checkpoint struct {
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`  // the last record anchored
	Hash   string    `json:"hash"` // its hash, hex
	Time   time.Time `json:"time"`
	// Kind is "segment" after a segment, "heartbeat" on the timer,
	// "closed" when the shipper closed (a stream that ends with a closed
	// checkpoint stopped, it was not cut), or "stopped" when the shipper
	// stopped the stream for good at a local record that does not
	// continue its chain: nothing after Seq will be anchored.
	Kind string `json:"kind"`
}

// Checkpoint kinds.
const (
	kindSegment   = "segment"
	kindHeartbeat = "heartbeat"
	kindClosed    = "closed"
	kindStopped   = "stopped"
)

func (c checkpoint) encode() []byte {
	b, _ := json.Marshal(c) // a struct of strings, numbers and a time: it cannot fail
	return append(b, '\n')
}

func hexHash(h [32]byte) string { return hex.EncodeToString(h[:]) }

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

func plural(n uint64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
