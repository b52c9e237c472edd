package trail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"
)

// refParseLink is parseLink as it was written first, searching for the
// keys from the end: parseLink must read exactly the same.
func refParseLink(line []byte) (link, bool) {
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

func checkParseLinkAgainstRef(t *testing.T, line []byte) {
	t.Helper()
	got, ok := parseLink(line)
	want, wok := refParseLink(line)
	if ok != wok || ok && (got.seq != want.seq || got.prev != want.prev || got.hash != want.hash || !bytes.Equal(got.hashed, want.hashed)) {
		t.Fatalf("%q: parseLink = %+v, %v; want %+v, %v", line, got, ok, want, wok)
	}
}

func linkedLineForTest(seq uint64) []byte {
	b, _ := AppendLink(nil, sha256.New(), []byte(`{"msg":"a","seq_x":1}`), seq, [32]byte{1, 2, 3})
	return b
}

var parseLinkSeeds = []string{
	string(linkedLineForTest(1)), string(linkedLineForTest(18446744073709551615)),
	`{"a":1,"seq":18446744073709551616,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":0,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":007,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":+7,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`,"seq":7,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`"seq":7,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":7,"prev":"` + zeros + `","hash":"` + zeros[:63] + `G"}`,
	`{"a":1,"seq":7,"seq":8,"prev":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":7,"prev":"` + zeros + `","hash":"` + zeros + `","hash":"` + zeros + `"}`,
	`{"a":1,"seq":7,"prev":"` + zeros + `","hash":"` + zeros + `" }`,
	``, `}`, `"}`,
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

func TestParseLinkMatchesSearchFromTheEnd(t *testing.T) {
	for _, s := range parseLinkSeeds {
		checkParseLinkAgainstRef(t, []byte(s))
	}
	line := linkedLineForTest(4711)
	for i := range line {
		checkParseLinkAgainstRef(t, line[:i])
		checkParseLinkAgainstRef(t, line[i:])
		for _, c := range []byte(`,"seq:prevhash0A9gG}{ `) {
			edited := bytes.Clone(line)
			edited[i] = c
			checkParseLinkAgainstRef(t, edited)
		}
	}
}

func FuzzParseLink(f *testing.F) {
	for _, s := range parseLinkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkParseLinkAgainstRef(t, line) })
}
