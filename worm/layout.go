package worm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Object names. Under the prefix every stream has a folder of segments and
// one of checkpoints; the numbers are zero-padded to 20 digits so that
// names sort in seq order:
//
//	PREFIX/STREAM/segments/FIRST-LAST.jsonl
//	PREFIX/STREAM/checkpoints/SEQ-UNIXNANO.json
const (
	segmentsDir    = "segments"
	checkpointsDir = "checkpoints"
	segmentExt     = ".jsonl"
	checkpointExt  = ".json"
	seqDigits      = 20
)

// Object metadata of a segment (x-amz-meta-*): what the segment's name
// and records say, repeated where a listing tool shows it.
const (
	metaStream   = "grantretry-stream"
	metaFirstSeq = "grantretry-first-seq"
	metaLastSeq  = "grantretry-last-seq"
	metaPrevHash = "grantretry-prev-hash"
	metaLastHash = "grantretry-last-hash"
)

// checkStream returns an error if name cannot be a stream: it is a folder
// in object names, so letters, digits, '.', '_' and '-', up to 200 bytes,
// and not "." or "..".
func checkStream(name string) error {
	if name == "" || len(name) > 200 || name == "." || name == ".." {
		return fmt.Errorf("grantretry: worm: stream name %q: empty, too long, \".\" or \"..\"", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("grantretry: worm: stream name %q: only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// StreamName turns a name, such as a trail file's base name or a fleet
// writer id, into a stream name: every byte other than a letter, a digit,
// '.', '_' or '-' becomes '_'.
func StreamName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	switch string(b) {
	case "", ".", "..":
		return "trail"
	}
	return string(b)
}

// normPrefix makes prefix "" or a folder ending in "/".
func normPrefix(prefix string) string {
	prefix = strings.TrimLeft(prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

func pad(n uint64) string {
	s := strconv.FormatUint(n, 10)
	return strings.Repeat("0", seqDigits-len(s)) + s
}

func segmentKey(prefix, stream string, first, last uint64) string {
	return prefix + stream + "/" + segmentsDir + "/" + pad(first) + "-" + pad(last) + segmentExt
}

func checkpointKey(prefix, stream string, seq uint64, t time.Time) string {
	return prefix + stream + "/" + checkpointsDir + "/" + pad(seq) + "-" + pad(uint64(t.UnixNano())) + checkpointExt
}

// objectName is what an object's key says, under the prefix.
type objectName struct {
	stream     string
	checkpoint bool
	first      uint64 // of a segment
	last       uint64 // of a segment; a checkpoint's seq
	nanos      uint64 // of a checkpoint: its time
}

var errNotOurs = errors.New("not a segment or checkpoint name")

// parseKey reads a key below the prefix (the prefix already cut).
func parseKey(rest string) (objectName, error) {
	var n objectName
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || checkStream(parts[0]) != nil {
		return n, errNotOurs
	}
	n.stream = parts[0]
	var ext string
	switch parts[1] {
	case segmentsDir:
		ext = segmentExt
	case checkpointsDir:
		ext, n.checkpoint = checkpointExt, true
	default:
		return n, errNotOurs
	}
	base, ok := strings.CutSuffix(parts[2], ext)
	a, b, ok2 := strings.Cut(base, "-")
	if !ok || !ok2 || len(a) != seqDigits || len(b) != seqDigits {
		return n, errNotOurs
	}
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return n, errNotOurs
	}
	if n.checkpoint {
		n.last, n.nanos = x, y
		return n, nil
	}
	if x == 0 || y < x {
		return n, errNotOurs
	}
	n.first, n.last = x, y
	return n, nil
}
