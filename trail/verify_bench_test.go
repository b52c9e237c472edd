package trail_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// memSink is an audit sink that keeps the lines a Transport writes.
type memSink struct{ buf []byte }

func (m *memSink) Write(p []byte) (int, error) { m.buf = append(m.buf, p...); return len(p), nil }
func (m *memSink) Sync() error                 { return nil }
func (m *memSink) Err() error                  { return nil }

// writeBenchTrail writes a trail of records records into dir as a
// pipeline would: the audit lines of calls through a Transport (every
// fifth attempt refused with a 503 and retried), chained by a trail.Trail
// with its default rotation. The lines are collected first and written
// in batches, so that the Transport's sync at every disposition does not
// make the fixture take minutes. It returns the trail's files.
func writeBenchTrail(tb testing.TB, dir string, records int) []string {
	tb.Helper()
	n := 0
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		n++
		status := http.StatusCreated
		if n%5 == 0 {
			status = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"id":"A1"}`)), Request: r}, nil
	})
	mem := &memSink{}
	tr := grantretry.New(base, grantretry.WithAuditTrail(mem), grantretry.WithBudget(3, time.Minute),
		grantretry.WithBackoff(time.Nanosecond, time.Nanosecond), grantretry.WithoutBreaker(), grantretry.WithoutRetryThrottle())
	path := filepath.Join(dir, "trail.jsonl")
	sink, err := trail.Open(path, trail.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	written := 1 // trail_opened
	for i := 1; written < records; i++ {
		ctx := grantretry.WithSubmissionID(context.Background(), fmt.Sprintf("GRANT-%08d", i))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://apply07.grants.gov/grantsws/rest/submit",
			strings.NewReader(fmt.Sprintf(`{"opportunity":"HHS-2026-ACF-%06d"}`, i)))
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		// Whole lines only, and no more than records in all.
		lines := mem.buf
		for k := 0; k < len(lines) && written < records; {
			e := bytes.IndexByte(lines[k:], '\n')
			k += e + 1
			written++
			if written == records || k == len(lines) {
				if _, err := sink.Write(lines[:k]); err != nil {
					tb.Fatal(err)
				}
				break
			}
		}
		mem.buf = mem.buf[:0]
	}
	if err := sink.Close(); err != nil {
		tb.Fatal(err)
	}
	files, err := filepath.Glob(path + "*")
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

// BenchmarkVerifyThroughput measures, in the same run and over the same
// trail of 300,000 records (GRANTRETRY_TRAIL_BENCH_RECORDS to change it),
// crypto/sha256 over the trail's bytes in one stream (sha256), SHA-256 of
// each record as the chain hashes it (sha256-records), and Verify over
// the trail's files (verify); each reports MB/s of the trail's size.
// GRANTRETRY_TRAIL_BENCH_DIR, if set, is where the trail is written and
// left, for timing the command on it.
func BenchmarkVerifyThroughput(b *testing.B) {
	records := 300000
	if s := os.Getenv("GRANTRETRY_TRAIL_BENCH_RECORDS"); s != "" {
		var err error
		if records, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	dir := os.Getenv("GRANTRETRY_TRAIL_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "trail.jsonl*"))
	if s, err := trail.Verify(files...); len(files) == 0 || err != nil || s.Records < records {
		for _, f := range files {
			os.Remove(f)
		}
		files = writeBenchTrail(b, dir, records)
	}
	sum, err := trail.Verify(files...)
	if err != nil {
		b.Fatal(err)
	}
	var data []byte
	for _, f := range sum.Files {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, d...)
	}
	size := int64(len(data))
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			h := sha256.New()
			h.Write(data)
			h.Sum(nil)
		}
	})
	b.Run("sha256-records", func(b *testing.B) {
		// What the chain itself costs: one SHA-256 per record, over the
		// link before it and the record up to its hash.
		var prev, out [32]byte
		b.SetBytes(size)
		for b.Loop() {
			h := sha256.New()
			for rest := data; len(rest) > 0; {
				i := bytes.IndexByte(rest, '\n')
				h.Reset()
				h.Write(prev[:])
				h.Write(rest[:i-len(`,"hash":"`)-64-2])
				h.Sum(out[:0])
				rest = rest[i+1:]
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			s, err := trail.Verify(files...)
			if err != nil || s.Records < records {
				b.Fatal(s.Records, err)
			}
		}
	})
}
