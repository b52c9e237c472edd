package worm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry/trail"
)

// benchSegments chains n records of about 640 bytes (the size of a
// disposition record with its chain fields) and cuts them into 1 MiB
// segments.
func benchSegments(n int) [][]byte {
	h := sha256.New()
	var prev [32]byte
	var segs [][]byte
	var cur []byte
	pad := strings.Repeat("x", 420)
	for i := 1; i <= n; i++ {
		rec := fmt.Sprintf(`{"level":"info","ts":"2026-12-01T10:00:00.%06dZ","msg":"grantretry.disposition","disposition":"succeeded","submission":"GRANT-%08d","host":"apply.grants.example","note":"%s"}`, i%1000000, i, pad)
		var line []byte
		line, prev = trail.AppendLink(nil, h, []byte(rec), uint64(i), prev)
		if len(cur)+len(line)+1 > DefaultSegmentSize {
			segs = append(segs, cur)
			cur = nil
		}
		cur = append(append(cur, line...), '\n')
	}
	return append(segs, cur)
}

// memSource is a local copy held in memory: the bytes of the segments,
// as one file.
type memSource struct{ segs [][]byte }

func (m memSource) Streams(context.Context) ([]string, error) { return []string{testStream}, nil }

func (m memSource) Scan(ctx context.Context, stream string, after uint64, fn func([]byte, string, int) error) error {
	line := 0
	for _, s := range m.segs {
		for len(s) > 0 {
			i := slices.Index(s, '\n')
			line++
			if err := fn(s[:i], "audit.jsonl", line); err != nil {
				return err
			}
			s = s[i+1:]
		}
	}
	return nil
}

// BenchmarkVerify measures, on the same bytes in the same run, SHA-256
// alone and the store verifier without its transfer: every segment's
// chain checked, alone and compared with a local copy record by record;
// and trail.Verify on the same records in a file, the local verifier.
func BenchmarkVerify(b *testing.B) {
	segs := benchSegments(50000)
	total := 0
	for _, s := range segs {
		total += len(s)
	}
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(int64(total))
		for b.Loop() {
			for _, s := range segs {
				sha256.Sum256(s)
			}
		}
	})
	check := func(b *testing.B, local bool) {
		b.SetBytes(int64(total))
		for b.Loop() {
			v := &storeVerifier{h: sha256.New(), ctx: context.Background()}
			var cmp *localCompare
			if local {
				cmp = startLocal(context.Background(), memSource{segs}, testStream, v)
			}
			st := chainState{}
			for _, s := range segs {
				n := objectName{first: st.seq + 1, last: st.seq + uint64(countLines(s))}
				st = v.segmentBytes(testStream, "k", "v", n, s, st, cmp)
			}
			if cmp != nil {
				var rep StreamReport
				cmp.finish(st, &rep)
				cmp.stop()
				if rep.Local != 50000 {
					b.Fatalf("%d local records matched", rep.Local)
				}
			}
			if len(v.rep.Problems) > 0 || st.seq != 50000 {
				b.Fatalf("problems %v at seq %d", v.rep.Problems, st.seq)
			}
		}
	}
	b.Run("store", func(b *testing.B) { check(b, false) })
	b.Run("store+local", func(b *testing.B) { check(b, true) })
	b.Run("trail.Verify", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "audit.jsonl")
		f, _ := os.Create(path)
		for _, s := range segs {
			f.Write(s)
		}
		f.Close()
		b.SetBytes(int64(total))
		for b.Loop() {
			if _, err := trail.Verify(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func countLines(b []byte) int { return bytes.Count(b, []byte("\n")) }

// BenchmarkUpload1MiB uploads 1 MiB segments to the store, as the
// Shipper does (SHA-256, COMPLIANCE retention, If-None-Match), and
// reports the latency's p50 and p99.
func BenchmarkUpload1MiB(b *testing.B) {
	st := testStore(b)
	seg := benchSegments(1700)[0]
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if err := st.put(ctx, segmentKey(st.prefix, testStream, uint64(i), uint64(i)), seg, "application/x-ndjson", time.Now().Add(testRetention), nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.SetBytes(int64(len(seg)))
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
}
