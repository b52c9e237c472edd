package worm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"github.com/grantretry/grantretry/worm/s3test"
)

// BenchmarkOutageCallLatency makes calls at a steady pace through a
// Transport whose audit trail is a trail file, without a shipper ("off")
// and with one ("on") whose store goes away for WORM_BENCH_OUTAGE (60s
// by default) mid-run and comes back. It reports the calls' p50 and p99
// latency, and for "on" how long after the store's return the backlog
// was anchored; it fails if a record is not anchored in the end.
// Run it once: -benchtime 1x.
func BenchmarkOutageCallLatency(b *testing.B) {
	outage := 60 * time.Second
	if s := os.Getenv("WORM_BENCH_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		outage = d
	}
	const before, after, pace = 5 * time.Second, 15 * time.Second, 2 * time.Millisecond
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }))
	defer funder.Close()
	run := func(b *testing.B, shipping bool) {
		live := filepath.Join(b.TempDir(), "audit.jsonl")
		tr, err := trail.Open(live, trail.Options{})
		if err != nil {
			b.Fatal(err)
		}
		client := &http.Client{Transport: grantretry.New(nil, grantretry.WithAuditTrail(tr))}
		var s *Shipper
		var p *proxy
		var st *Store
		var mu sync.Mutex
		var upAt, drainedAt time.Time
		var upSeq uint64
		if shipping {
			endpoint, bucket := s3test.Endpoint(b)
			p = newProxy(b, strings.TrimPrefix(endpoint, "http://"))
			st = testStore(b)
			via, _ := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + p.addr, Bucket: bucket, Prefix: st.prefix})
			src, _ := FollowFiles("", live)
			s, err = NewShipper(Options{Store: via, Source: src, QueueDir: b.TempDir(), Audit: tr, Retention: testRetention})
			if err != nil {
				b.Fatal(err)
			}
			s.anchoredHook = func(q *queued, _ time.Time) {
				mu.Lock()
				if upSeq > 0 && drainedAt.IsZero() && q.last >= upSeq {
					drainedAt = time.Now()
				}
				mu.Unlock()
			}
			s.Start()
		}
		var lat []time.Duration
		start := time.Now()
		down, up := start.Add(before), start.Add(before+outage)
		isDown := false
		for next := start; time.Since(start) < before+outage+after; next = next.Add(pace) {
			time.Sleep(time.Until(next))
			now := time.Now()
			if shipping && !isDown && now.After(down) && now.Before(up) {
				p.down()
				isDown = true
			}
			if shipping && isDown && now.After(up) {
				sum, err := trail.Verify(live)
				if err != nil {
					b.Fatal(err)
				}
				mu.Lock()
				upSeq, upAt = sum.LastSeq, time.Now()
				mu.Unlock()
				p.up(b)
				isDown = false
			}
			t0 := time.Now()
			resp, err := client.Get(funder.URL)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(len(lat)), "calls")
		if !shipping {
			tr.Close()
			return
		}
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		tr.Close()
		mu.Lock()
		b.ReportMetric(drainedAt.Sub(upAt).Seconds(), "anchored-after-return-s")
		mu.Unlock()
		rep, err := Verify(context.Background(), st, VerifyOptions{Local: mustFiles(b, live), MinRetention: testMinRetention})
		if err != nil {
			b.Fatal(err)
		}
		sum, _ := trail.Verify(live)
		if r := rep.Streams[0]; r.Local != sum.Records || r.AtRisk != 0 {
			b.Fatalf("report %+v; the trail has %d records: want every one anchored", r, sum.Records)
		}
		b.ReportMetric(float64(sum.Records), "records-anchored")
	}
	b.Run("off", func(b *testing.B) {
		for b.Loop() {
			run(b, false)
		}
	})
	b.Run("on", func(b *testing.B) {
		for b.Loop() {
			run(b, true)
		}
	})
}

func mustFiles(b testing.TB, live string) *Files {
	f, err := OpenFiles("", trailFiles(b, live)...)
	if err != nil {
		b.Fatal(err)
	}
	return f
}
