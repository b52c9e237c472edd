package worm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A segment whose metadata does not say what its name and records do is
// reported, naming the field: a writer that mislabels what it anchors is
// caught, not trusted.
func TestVerifyReportsSegmentMetadataThatDisagrees(t *testing.T) {
	st := testStore(t)
	files := recordFiles(makeTrail(t, t.TempDir(), 20))
	src, err := OpenFiles("", files...)
	if err != nil {
		t.Fatal(err)
	}
	var data bytes.Buffer
	var last uint64
	if err := src.Scan(context.Background(), src.Stream(), 0, func(rec []byte, _ string, _ int) error {
		data.Write(rec)
		data.WriteByte('\n')
		last++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{
		metaStream: src.Stream(), metaFirstSeq: "1", metaLastSeq: fmt.Sprint(last),
		metaPrevHash: hexHash([32]byte{}), metaLastHash: hexHash([32]byte{1}),
	}
	if err := st.put(context.Background(), segmentKey(st.prefix, src.Stream(), 1, last), data.Bytes(), "application/x-ndjson", time.Now().Add(testRetention), meta); err != nil {
		t.Fatal(err)
	}
	_, err = verify(t, st, files, VerifyOptions{})
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("Verify: %v, want a *VerifyError", err)
	}
	for _, p := range ve.Problems {
		if p.Kind == ProblemBrokenLink && p.Seq == 1 && strings.Contains(p.Text, "metadata "+metaLastHash) {
			return
		}
	}
	t.Fatalf("no problem names the segment's last-hash metadata: %v", ve.Problems)
}
