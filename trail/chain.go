package trail

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"math"
	"strconv"
)

// chain returns line, which ends in "}\n", with the chain fields of the
// next record appended, and leaves its hash in t.next. t.mu must be held.
func (t *Trail) chain(line []byte) []byte {
	b, next := AppendLink(t.buf[:0], t.h, line[:len(line)-1], t.seq+1, t.last)
	t.next = next
	b = append(b, '\n')
	t.buf = b
	return b
}

// Link is one record's chain fields, as the trail writes them at the end
// of every record: `,"seq":N,"prev":"<64 hex>","hash":"<64 hex>"}`. It is
// exported for other stores of the same chain (the fleet's table), so
// that one format and one hash rule serve every sink and verifier.
type Link struct {
	Seq        uint64
	Prev, Hash [32]byte
	// Hashed is the record's bytes that Hash covers, after Prev: all of
	// it up to ,"hash":".
	Hashed []byte
}

// AppendLink appends to dst record, a JSON object ending in "}" (and no
// newline), with the chain fields of record seq after prev, and returns
// the result and the record's hash. h is a SHA-256 hash it may reset.
func AppendLink(dst []byte, h hash.Hash, record []byte, seq uint64, prev [32]byte) ([]byte, [32]byte) {
	b := append(dst, record[:len(record)-1]...)
	b = append(b, seqKey...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, prevKey...)
	b = hex.AppendEncode(b, prev[:])
	b = append(b, '"')
	var sum [32]byte
	linkSum(h, &prev, b, &sum)
	b = append(b, hashKey...)
	b = hex.AppendEncode(b, sum[:])
	b = append(b, `"}`...)
	return b, sum
}

// ParseLink reads the chain fields that end line (without its newline),
// as the trail writes them; ok is false if they are missing or malformed.
// It does not check the hash: see Link.Valid.
func ParseLink(line []byte) (l Link, ok bool) {
	p, ok := parseLink(line)
	return Link{Seq: p.seq, Prev: p.prev, Hash: p.hash, Hashed: p.hashed}, ok
}

// Valid reports whether l.Hash is the hash of l.Prev and l.Hashed; h is a
// SHA-256 hash it may reset.
func (l Link) Valid(h hash.Hash) bool {
	var sum [32]byte
	linkSum(h, &l.Prev, l.Hashed, &sum)
	return sum == l.Hash
}

// linkSum puts into out the hash of a record: SHA-256 over the link before
// it and the record's bytes up to ,"hash":".
func linkSum(h hash.Hash, prev *[32]byte, hashed []byte, out *[32]byte) {
	h.Reset()
	h.Write(prev[:])
	h.Write(hashed)
	h.Sum(out[:0])
}

// link is a record's chain fields.
type link struct {
	seq    uint64
	prev   [32]byte
	hash   [32]byte
	hashed []byte // the bytes the hash covers, after the link before
}

const (
	seqKey  = `,"seq":`
	prevKey = `,"prev":"`
	hashKey = `,"hash":"`
)

// parseLink reads the chain fields that end line (without its newline):
// `,"seq":N,"prev":"<64 hex>","hash":"<64 hex>"}`. The hashed part is
// everything before the last ,"hash":", which is the trail's: inside a
// JSON string a quote is always escaped. The fields are read where they
// must be, counted from the end: no later ,"hash":" or ,"prev":" can
// hide among hex digits, nor a later ,"seq": among the seq's digits.
func parseLink(line []byte) (link, bool) {
	var l link
	i := len(line) - (len(hashKey) + 64 + 2)
	if i < 0 || string(line[i:i+len(hashKey)]) != hashKey || string(line[len(line)-2:]) != `"}` {
		return l, false
	}
	if _, err := hex.Decode(l.hash[:], line[i+len(hashKey):len(line)-2]); err != nil {
		return l, false
	}
	hashed := line[:i]
	j := len(hashed) - (len(prevKey) + 64 + 1)
	if j < 0 || string(hashed[j:j+len(prevKey)]) != prevKey || hashed[len(hashed)-1] != '"' {
		return l, false
	}
	if _, err := hex.Decode(l.prev[:], hashed[j+len(prevKey):len(hashed)-1]); err != nil {
		return l, false
	}
	d := j
	for d > 0 && hashed[d-1] >= '0' && hashed[d-1] <= '9' {
		d--
	}
	k := d - len(seqKey)
	if k < 0 || string(hashed[k:d]) != seqKey {
		return l, false
	}
	seq, ok := parseSeq(hashed[d:j])
	if !ok {
		return l, false
	}
	l.seq, l.hashed = seq, hashed
	return l, true
}

// parseSeq reads digits, as strconv.ParseUint in base 10 does, and
// refuses 0.
func parseSeq(digits []byte) (uint64, bool) {
	if len(digits) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, n > 0
}

// checkLine parses line's chain fields and checks its hash; it returns
// what is wrong, "" if nothing.
func checkLine(h hash.Hash, line []byte) (link, string) {
	l, ok := parseLink(line)
	if !ok {
		return l, unlinkedProblem(line)
	}
	var sum [32]byte
	linkSum(h, &l.prev, l.hashed, &sum)
	if sum != l.hash {
		return l, hashProblem
	}
	return l, ""
}

const hashProblem = "hash does not match the record (edited?)"

// unlinkedProblem says what is wrong with line, which has no chain fields.
func unlinkedProblem(line []byte) string {
	if !json.Valid(line) {
		return "not a JSON object (torn or edited?)"
	}
	return "no chain fields (seq, prev, hash) at the end of the record"
}

// chainHasher checks lines as checkLine does, with buffers of its own:
// what a hash.Hash is given escapes, so checkLine's allocate every time.
type chainHasher struct {
	h   hash.Hash
	buf [32]byte
}

func newChainHasher() *chainHasher { return &chainHasher{h: sha256.New()} }

// check is checkLine.
func (c *chainHasher) check(line []byte) (link, string) {
	l, ok := parseLink(line)
	if !ok {
		return l, unlinkedProblem(line)
	}
	c.buf = l.prev
	c.h.Reset()
	c.h.Write(c.buf[:])
	c.h.Write(l.hashed)
	c.h.Sum(c.buf[:0])
	if c.buf != l.hash {
		return l, hashProblem
	}
	return l, ""
}
