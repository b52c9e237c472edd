package worm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// Each case ships a trail of 60 records (several files, several
// segments), tampers with it, and checks that Verify names the right
// stream and seq, and the file and line of local tampering.

const testStream = "audit.jsonl"

func shippedTrail(t *testing.T) (*Store, []string) {
	st := testStore(t)
	files := makeTrail(t, t.TempDir(), 60)
	ship(t, st, files, Options{})
	return st, files
}

// wantProblem checks that err is a *VerifyError whose first problem is of
// kind at seq, in file and line if file is not "".
func wantProblem(t *testing.T, err error, kind string, seq uint64, file string, line int) Problem {
	t.Helper()
	var ve *VerifyError
	if !errors.As(err, &ve) || !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Fatalf("Verify: %v, want a *VerifyError", err)
	}
	p := ve.Problems[0]
	if p.Kind != kind || p.Stream != testStream || p.Seq != seq || (file != "" && (p.File != file || p.Line != line)) {
		t.Fatalf("first problem %q (%s, stream %s, seq %d, %s line %d), want %s at seq %d of stream %s (%s line %d); all: %v",
			p, p.Kind, p.Stream, p.Seq, p.File, p.Line, kind, seq, testStream, file, line, ve.Problems)
	}
	return p
}

func TestVerifyHonestTrail(t *testing.T) {
	st, files := shippedTrail(t)
	rep, err := verify(t, st, files, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := lastSeq(t, files)
	if len(rep.Streams) != 1 || rep.Streams[0].LastSeq != last || rep.Streams[0].Local != int(last) || rep.Streams[0].Segments < 3 || !rep.Streams[0].Closed {
		t.Fatalf("report %+v, want one closed stream of %d records, all local ones matched, in 3 segments or more", rep.Streams, last)
	}
}

func TestVerifyReportsWindowAtRisk(t *testing.T) {
	st := testStore(t)
	dir := t.TempDir()
	files := makeTrail(t, dir, 20)
	ship(t, st, files, Options{})
	anchored := lastSeq(t, files)
	tr, err := trail.Open(filepath.Join(dir, "audit.jsonl"), trail.Options{MaxFileSize: 6 << 10})
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, tr, 20, 5)
	tr.Close()
	files = trailFiles(t, filepath.Join(dir, "audit.jsonl"))
	rep, err := verify(t, st, files, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Streams[0]
	// trail_reopened and five records are past the anchor.
	if s.LastSeq != anchored || s.AtRisk != 6 || s.AtRiskFrom != anchored+1 || lastSeq(t, files) != anchored+6 {
		t.Fatalf("report %+v, want 6 records at risk from seq %d", s, anchored+1)
	}
}

func rewriteLines(t *testing.T, path string, f func(lines [][]byte) [][]byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if err := os.WriteFile(path, bytes.Join(f(lines), nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCatchesEditedRecord(t *testing.T) {
	st, files := shippedTrail(t)
	file, line := where(t, files, 17)
	rewriteLines(t, file, func(lines [][]byte) [][]byte {
		lines[line-1] = bytes.Replace(lines[line-1], []byte(`"succeeded"`), []byte(`"abandoned"`), 1)
		return lines
	})
	_, err := verify(t, st, files, VerifyOptions{})
	wantProblem(t, err, ProblemTampered, 17, file, line)
}

func TestVerifyCatchesDeletedRecord(t *testing.T) {
	st, files := shippedTrail(t)
	file, line := where(t, files, 20)
	rewriteLines(t, file, func(lines [][]byte) [][]byte { return append(lines[:line-1], lines[line:]...) })
	file, line = where(t, files, 21) // where seq 20 was missed
	_, err := verify(t, st, files, VerifyOptions{})
	wantProblem(t, err, ProblemMissing, 20, file, line)
}

func TestVerifyCatchesSwappedRecords(t *testing.T) {
	st, files := shippedTrail(t)
	file, line := where(t, files, 12)
	if f2, _ := where(t, files, 13); f2 != file {
		t.Fatal("seq 12 and 13 are in different files; move the case")
	}
	rewriteLines(t, file, func(lines [][]byte) [][]byte {
		lines[line-1], lines[line] = lines[line], lines[line-1]
		return lines
	})
	_, err := verify(t, st, files, VerifyOptions{})
	wantProblem(t, err, ProblemMissing, 12, file, line)
}

// The tail cut and the head file removed verifies locally; the anchor
// shows what is missing.
func TestVerifyCatchesCutTailWithoutHead(t *testing.T) {
	st, files := shippedTrail(t)
	last := lastSeq(t, files)
	file, line := where(t, files, last)
	cut := min(5, line-1)
	rewriteLines(t, file, func(lines [][]byte) [][]byte { return lines[:line-cut] })
	var kept []string
	for _, f := range files {
		if strings.HasSuffix(f, ".head") {
			os.Remove(f)
			continue
		}
		kept = append(kept, f)
	}
	if _, err := trail.Verify(kept...); err != nil {
		t.Fatalf("trail.Verify: %v; the case is a cut that verifies locally", err)
	}
	_, err := verify(t, st, kept, VerifyOptions{})
	wantProblem(t, err, ProblemMissing, last-uint64(cut)+1, file, line-cut+1)
}

// Record 10 removed and the whole chain after it rewritten, head
// included, verifies locally; its anchored copy shows it.
func TestVerifyCatchesRewrittenChain(t *testing.T) {
	st, files := shippedTrail(t)
	recs := recordFiles(files)
	src, _ := OpenFiles("", recs...)
	ordered, _, _ := src.files()
	var bodies [][]byte
	counts := map[string]int{}
	for _, f := range ordered {
		rewriteLines(t, f, func(lines [][]byte) [][]byte {
			for _, l := range lines {
				lk, _ := trail.ParseLink(l[:len(l)-1])
				i := bytes.LastIndex(lk.Hashed, []byte(`,"seq":`))
				bodies = append(bodies, append(append([]byte(nil), lk.Hashed[:i]...), '}'))
			}
			counts[f] = len(lines)
			return lines
		})
	}
	bodies = append(bodies[:9], bodies[10:]...)
	counts[ordered[len(ordered)-1]]--
	h := sha256.New()
	var prev [32]byte
	seq := uint64(0)
	for _, f := range ordered {
		var out []byte
		for i := 0; i < counts[f]; i++ {
			seq++
			var b []byte
			b, prev = trail.AppendLink(nil, h, bodies[seq-1], seq, prev)
			out = append(append(out, b...), '\n')
		}
		if err := os.WriteFile(f, out, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	head := filepath.Join(filepath.Dir(ordered[0]), "audit.jsonl.head")
	os.WriteFile(head, []byte(`{"version":1,"seq":`+itoa(seq)+`,"hash":"`+hexHash(prev)+`","file":"audit.jsonl"}`+"\n"), 0o600)
	if _, err := trail.Verify(files...); err != nil {
		t.Fatalf("trail.Verify: %v; the case is a rewrite that verifies locally", err)
	}
	file, line := where(t, files, 10)
	_, err := verify(t, st, files, VerifyOptions{})
	wantProblem(t, err, ProblemTampered, 10, file, line)
}

func itoa(n uint64) string { return trimZeros(pad(n)) }

func trimZeros(s string) string {
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return "0"
	}
	return s
}

// segmentObjects lists the stream's segment keys in seq order.
func segmentObjects(t *testing.T, st *Store) []objectName {
	t.Helper()
	objs, err := st.versions(context.Background(), testStream+"/"+segmentsDir+"/")
	if err != nil {
		t.Fatal(err)
	}
	var out []objectName
	for _, o := range objs {
		n, err := parseKey(strings.TrimPrefix(o.key, st.prefix))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestVerifyCatchesDeleteMarker(t *testing.T) {
	st, files := shippedTrail(t)
	seg := segmentObjects(t, st)[1]
	key := segmentKey(st.prefix, testStream, seg.first, seg.last)
	if _, err := st.c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	_, err := verify(t, st, files, VerifyOptions{})
	p := wantProblem(t, err, ProblemDeleteMarker, seg.first, "", 0)
	if p.Key != key {
		t.Errorf("problem names %s, want %s", p.Key, key)
	}
}

func TestVerifyCatchesSecondVersion(t *testing.T) {
	st, files := shippedTrail(t)
	seg := segmentObjects(t, st)[1]
	key := segmentKey(st.prefix, testStream, seg.first, seg.last)
	ctx := context.Background()
	data, _, err := st.get(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"succeeded"`), []byte(`"abandoned"`), 1)
	sum := sha256.Sum256(data)
	_, err = st.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(st.bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])), ObjectLockMode: types.ObjectLockModeCompliance,
		ObjectLockRetainUntilDate: aws.Time(time.Now().Add(testRetention))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = verify(t, st, files, VerifyOptions{})
	wantProblem(t, err, ProblemExtraVersion, seg.first, "", 0)
}

// A shipper that stops without closing (killed, or stopped to hide what
// came after) leaves a last checkpoint that grows old.
func TestVerifyCatchesStaleCheckpoint(t *testing.T) {
	st := testStore(t)
	files := makeTrail(t, t.TempDir(), 30)
	src, _ := OpenFiles("", files...)
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Retention: testRetention, SegmentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.poll(ctx, true)
	if err := s.drain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, st, files, VerifyOptions{}); err != nil {
		t.Fatalf("verify just after shipping: %v", err)
	}
	later := fixedClock{time.Now().Add(DefaultMaxCheckpointAge + time.Minute)}
	_, err = verify(t, st, files, VerifyOptions{Clock: later})
	wantProblem(t, err, ProblemStaleCheckpoint, lastSeq(t, files), "", 0)
}

func TestVerifyCatchesShortRetention(t *testing.T) {
	st, files := shippedTrail(t)
	_, err := verify(t, st, files, VerifyOptions{MinRetention: 3 * testRetention})
	wantProblem(t, err, ProblemRetention, 1, "", 0)
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                                   { return c.t }
func (c fixedClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func lastSeq(t *testing.T, files []string) uint64 {
	t.Helper()
	sum, err := trail.Verify(files...)
	if err != nil {
		t.Fatal(err)
	}
	return sum.LastSeq
}

// A verify of nothing fails: a prefix with nothing anchored under it, or
// local records none of which is anchored (a mistyped prefix or stream).
func TestVerifyReportsNothingAnchored(t *testing.T) {
	st := testStore(t)
	_, err := verify(t, st, nil, VerifyOptions{})
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Problems[0].Kind != ProblemNothingAnchored || ve.Problems[0].Stream != "" {
		t.Fatalf("store alone, nothing under the prefix: %v; want %s", err, ProblemNothingAnchored)
	}
	_, err = verify(t, st, makeTrail(t, t.TempDir(), 5), VerifyOptions{})
	wantProblem(t, err, ProblemNothingAnchored, 1, "", 0)
}
