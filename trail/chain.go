package trail

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"hash"
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
// JSON string a quote is always escaped.
func parseLink(line []byte) (link, bool) {
	var l link
	i := bytes.LastIndex(line, []byte(hashKey))
	if i < 0 || len(line)-i != len(hashKey)+64+2 || !bytes.HasSuffix(line, []byte(`"}`)) {
		return l, false
	}
	if _, err := hex.Decode(l.hash[:], line[i+len(hashKey):len(line)-2]); err != nil {
		return l, false
	}
	hashed := line[:i]
	j := bytes.LastIndex(hashed, []byte(prevKey))
	if j < 0 || len(hashed)-j != len(prevKey)+64+1 || hashed[len(hashed)-1] != '"' {
		return l, false
	}
	if _, err := hex.Decode(l.prev[:], hashed[j+len(prevKey):len(hashed)-1]); err != nil {
		return l, false
	}
	k := bytes.LastIndex(hashed[:j], []byte(seqKey))
	if k < 0 {
		return l, false
	}
	seq, err := strconv.ParseUint(string(hashed[k+len(seqKey):j]), 10, 64)
	if err != nil || seq == 0 {
		return l, false
	}
	l.seq, l.hashed = seq, hashed
	return l, true
}

// checkLine parses line's chain fields and checks its hash; it returns
// what is wrong, "" if nothing.
func checkLine(h hash.Hash, line []byte) (link, string) {
	l, ok := parseLink(line)
	if !ok {
		if !json.Valid(line) {
			return l, "not a JSON object (torn or edited?)"
		}
		return l, "no chain fields (seq, prev, hash) at the end of the record"
	}
	var sum [32]byte
	linkSum(h, &l.prev, l.hashed, &sum)
	if sum != l.hash {
		return l, "hash does not match the record (edited?)"
	}
	return l, ""
}
