package worm

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// captured is one PUT a capturing server received.
type captured struct {
	path string
	h    http.Header
	body []byte
}

// captureStore returns a Store on a server that answers as S3 does to the
// requests a Shipper makes (Object Lock configuration, an empty listing,
// PUTs) and keeps each PUT, and the PUTs so far.
func captureStore(t *testing.T) (*Store, func() []captured) {
	t.Helper()
	var mu sync.Mutex
	var puts []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Has("object-lock"):
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`)
		case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>`)
		case r.Method == http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			puts = append(puts, captured{r.URL.Path, r.Header.Clone(), b})
			mu.Unlock()
			w.Header().Set("ETag", `"x"`)
		default:
			http.Error(w, "unexpected", http.StatusNotImplemented)
		}
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	st, err := NewStore(context.Background(), StoreConfig{Endpoint: srv.URL, Bucket: "b", Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	return st, func() []captured {
		mu.Lock()
		defer mu.Unlock()
		return append([]captured(nil), puts...)
	}
}

// No local S3 server enforces AWS's rule that an Object Lock PUT carries
// Content-MD5 or an x-amz-checksum-* header, so this test captures what
// each upload sends.
func TestUploadsCarryLockChecksumAndNoOverwrite(t *testing.T) {
	st, uploads := captureStore(t)
	files := makeTrail(t, t.TempDir(), 30)
	start := time.Now()
	ship(t, st, files, Options{Retention: DefaultRetention})
	puts := uploads()
	if len(puts) < 4 {
		t.Fatalf("%d uploads, want segments and checkpoints", len(puts))
	}
	segments := 0
	for _, p := range puts {
		sum := sha256.Sum256(p.body)
		want := map[string]string{
			"If-None-Match":                "*",
			"X-Amz-Object-Lock-Mode":       "COMPLIANCE",
			"X-Amz-Checksum-Sha256":        base64.StdEncoding.EncodeToString(sum[:]),
			"X-Amz-Sdk-Checksum-Algorithm": "SHA256",
		}
		for k, v := range want {
			if got := p.h.Get(k); got != v {
				t.Errorf("PUT %s: %s %q, want %q", p.path, k, got, v)
			}
		}
		until, err := time.Parse(time.RFC3339, p.h.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		if err != nil || until.Before(start.Add(DefaultRetention-time.Second)) || until.After(time.Now().Add(DefaultRetention+time.Second)) {
			t.Errorf("PUT %s: retain until %q, want %s from now", p.path, p.h.Get("X-Amz-Object-Lock-Retain-Until-Date"), DefaultRetention)
		}
		if strings.Contains(p.path, "/"+segmentsDir+"/") {
			segments++
			if p.h.Get("X-Amz-Meta-Grantretry-Last-Hash") == "" || p.h.Get("X-Amz-Meta-Grantretry-Prev-Hash") == "" {
				t.Errorf("PUT %s: the segment does not name its prev and last hash", p.path)
			}
		}
	}
	if segments < 2 || !strings.HasPrefix(puts[0].path, "/b/p/audit.jsonl/segments/00000000000000000001-") {
		t.Errorf("%d segments, the first at %s; want several, the first from seq 1", segments, puts[0].path)
	}
}

// The default retention is three calendar years and a day from the
// upload, as docs/write-once.md says: a day more than three years even
// when they hold a leap day, where 3×365+1 days would be three years
// exactly.
func TestDefaultRetentionIsThreeCalendarYearsAndADay(t *testing.T) {
	for _, tc := range []struct{ upload, until string }{
		{"2027-06-01T09:30:00Z", "2030-06-02T09:30:00Z"}, // 29 February 2028 within
		{"2028-06-01T09:30:00Z", "2031-06-02T09:30:00Z"}, // none within
		{"2028-02-29T12:00:00Z", "2031-03-02T12:00:00Z"}, // from a leap day
	} {
		st, uploads := captureStore(t)
		upload, _ := time.Parse(time.RFC3339, tc.upload)
		src, err := OpenFiles("", makeTrail(t, t.TempDir(), 3)...)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Clock: fixedClock{upload}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, p := range uploads() {
			if got := p.h.Get("X-Amz-Object-Lock-Retain-Until-Date"); got != tc.until {
				t.Errorf("uploaded %s: PUT %s retained until %s, want %s", tc.upload, p.path, got, tc.until)
				break
			}
		}
	}
}
