package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"go.uber.org/zap/zapcore"
)

// attemptRecord is an attempt record as the Transport hands it to its
// sink, before the chain fields.
func attemptRecord(t *testing.T, i int) []byte {
	t.Helper()
	enc := zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig())
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Date(2026, 12, 4, 9, 0, 0, i, time.UTC), Message: grantretry.MsgAttempt}
	buf, err := enc.EncodeEntry(ent, []zapcore.Field{
		{Key: grantretry.FieldCorrelationID, Type: zapcore.StringType, String: "c0ffee-" + strconv.Itoa(i)},
		{Key: grantretry.FieldAttempt, Type: zapcore.Int64Type, Integer: 1},
		{Key: grantretry.FieldReason, Type: zapcore.StringType, String: "transport:reset"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// pageFigure is the allocs/op docs/audit-trail.md gives for a row of its
// cost table.
func pageFigure(t *testing.T, page, row string) float64 {
	t.Helper()
	m := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(row) + "` \\|[^|]+\\|[^|]+\\| ([0-9]+) \\|$").FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("docs/audit-trail.md has no allocs/op for %s", row)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return n
}

// docs/audit-trail.md gives what the trail allocates: per record written
// (its cost table's op=write), and none per record verified.
func TestAuditTrailAllocationFiguresAreTheTrails(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "audit-trail.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)

	dir := t.TempDir()
	sink, err := trail.Open(filepath.Join(dir, "trail.jsonl"), trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := attemptRecord(t, 0)
	write := testing.AllocsPerRun(200, func() {
		if _, err := sink.Write(rec); err != nil {
			t.Fatal(err)
		}
	})
	if want := pageFigure(t, page, "op=write"); write != want {
		t.Errorf("a record written to the trail allocates %v times; docs/audit-trail.md says %v", write, want)
	}
	for i := 1; i <= 4000; i++ {
		if _, err := sink.Write(attemptRecord(t, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}

	lines, err := os.ReadFile(filepath.Join(dir, "trail.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	all := bytes.SplitAfter(lines, []byte("\n"))
	all = all[:len(all)-1]
	verify := func(n int) float64 {
		block := bytes.Join(all[:n], nil)
		return testing.AllocsPerRun(20, func() {
			if _, err := trail.VerifyLines(block, 0, [32]byte{}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Blocks of records are checked in parallel, and the list of blocks
	// grows with the trail: that is allocations per block, not per record.
	few, many := verify(400), verify(len(all))
	t.Logf("verifying allocates %v times for 400 records, %v for %d", few, many, len(all))
	if perRecord := (many - few) / float64(len(all)-400); perRecord >= 0.01 {
		t.Errorf("verifying allocates %.3f times a record (%v for 400 records, %v for %d)", perRecord, few, many, len(all))
	}
	if !strings.Contains(oneLine(page), "record's JSON in one pass, with no allocation") {
		t.Error("docs/audit-trail.md no longer says what verifying a record allocates")
	}
}
