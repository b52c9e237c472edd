package worm

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/trail"
)

// parseLink reads at fixed offsets what trail.ParseLink finds by
// searching: they must agree on every line.
func FuzzParseLinkAgreesWithTrail(f *testing.F) {
	good, _ := trail.AppendLink(nil, sha256.New(), []byte(`{"msg":"m","seq_note":",\"seq\":1"}`), 42, [32]byte{1})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte(strings.Replace(string(good), `"seq":42`, `"seq":042`, 1)))
	f.Add([]byte(strings.Replace(string(good), `"seq":42`, `"seq":0`, 1)))
	f.Add([]byte(strings.Replace(string(good), `"seq":42`, `"seq":99999999999999999999`, 1)))
	f.Add([]byte(strings.Replace(string(good), `"seq":42`, `"seq":`, 1)))
	f.Add([]byte(strings.Replace(string(good), `,"prev":"`, `,"prev": "`, 1)))
	f.Add([]byte(`{"a":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		want, wok := trail.ParseLink(line)
		got, ok := parseLink(line)
		if ok != wok || ok && (got.seq != want.Seq || got.prev != want.Prev || got.hash != want.Hash || got.hashed != len(want.Hashed)) {
			t.Fatalf("%q: parseLink %+v %v, trail.ParseLink %+v %v", line, got, ok, want, wok)
		}
	})
}
