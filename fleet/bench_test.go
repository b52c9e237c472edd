package fleet

import (
	"bytes"
	"context"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkTrailDispositionCommit16 measures what a disposition costs the
// caller with the fleet's trail: 16 writers (16 processes' Trails, each
// with a pool of its own, as processes have) each write an attempt and a
// disposition record and Sync, concurrently; the time of the two Writes
// and the Sync is what RoundTrip waits for its trail. It reports p50 and p99 in µs. Each Trail has committed
// its opening record before the timing starts, as a process does before
// its first call. The pacings (see pacings) differ in when the writers'
// commits meet: "poisson-5ms" is the case fleet mode is built for
// (docs/fleet.md), 16 independent processes each making a call per 5 ms
// on average; "lockstep-5ms" sends all 16 at the same instant every 5
// ms, a burst independent processes do not make; "saturated" has no pause, which measures the server's
// commit throughput more than a call's latency. BenchmarkCommitFloor16 is
// the floor under all three.
//
//	cd fleet && go test -run '^$' -bench TrailDispositionCommit16 -benchtime 4000x
func BenchmarkTrailDispositionCommit16(b *testing.B) {
	for _, p := range pacings {
		b.Run(p.name, func(b *testing.B) { benchDispositionCommit(b, p) })
	}
}

// A pacing says how long a writer waits before each commit, as the call
// to the funder that comes before a disposition does.
type pacing struct {
	name string
	wait func(r *mrand.Rand) time.Duration // nil: no wait
}

var pacings = []pacing{
	{"saturated", nil},
	// Every writer waits 5 ms: started together, the 16 stay in step and
	// commit in bursts of 16.
	{"lockstep-5ms", func(*mrand.Rand) time.Duration { return 5 * time.Millisecond }},
	// Each writer's waits are exponential with a mean of 5 ms, drawn from
	// a stream of its own: lockstep-5ms's rate, with the commits of 16
	// independent processes arriving as a Poisson process.
	{"poisson-5ms", func(r *mrand.Rand) time.Duration {
		return time.Duration(r.ExpFloat64() * float64(5*time.Millisecond))
	}},
}

// paced runs writers goroutines; writer w makes ops w, w+writers, ...
// below b.N, each after p's wait, and returns every op's latency.
func paced(b *testing.B, writers int, p pacing, op func(w int) error) []time.Duration {
	lat := make([][]time.Duration, writers)
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(uint64(w), 13))
			for i := w; i < b.N; i += writers {
				if p.wait != nil {
					time.Sleep(p.wait(r))
				}
				t0 := time.Now()
				if err := op(w); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	return slices.Concat(lat...)
}

func benchDispositionCommit(b *testing.B, p pacing) {
	const writers = 16
	ctx := context.Background()
	pool := newPool(b)
	trails := make([]*Trail, writers)
	for i := range trails {
		own, err := pgxpool.New(ctx, pool.Config().ConnString())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(own.Close)
		tr, err := NewTrail(ctx, own, WithLimit(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if err := tr.Sync(); err != nil {
			b.Fatal(err)
		}
		trails[i] = tr
	}
	attempt := []byte(`{"ts":"2026-01-02T03:04:05.123456789Z","level":"info","msg":"grantretry.attempt","correlation_id":"c0ffee","idempotency_key":"k","submission_id":"GRANT-1","method":"POST","host":"funder.example","path":"/submit","attempt":1,"status":201,"error":"","reason":"ok:201","retryable":false,"wait":"0s","wait_source":"","latency":"1.2ms","elapsed":"1.2ms"}` + "\n")
	disp := []byte(`{"ts":"2026-01-02T03:04:05.123456789Z","level":"info","msg":"grantretry.disposition","correlation_id":"c0ffee","idempotency_key":"k","submission_id":"GRANT-1","method":"POST","host":"funder.example","path":"/submit","disposition":"succeeded","attempts":1,"stop_reason":"success","status":201,"reason":"ok:201","error":"","payload_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","payload_bytes":0,"not_replayable":"","elapsed":"1.2ms","dead_letter_id":"","record_error":"","reconciles":0,"ambiguous":false}` + "\n")
	lat := paced(b, writers, p, func(w int) error {
		tr := trails[w]
		tr.Write(attempt)
		tr.Write(disp)
		return tr.Sync()
	})
	reportLatency(b, lat)
	sum, err := VerifyTrail(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	if want := writers + 2*b.N; sum.Records != want {
		b.Fatalf("the trail holds %d records, want %d", sum.Records, want)
	}
}

// BenchmarkCommitFloor16 measures the floor under the trail's figures:
// 16 writers, each on a connection of its own, paced as in
// BenchmarkTrailDispositionCommit16. "roundtrip" is a SELECT 1: the wire
// and the scheduler, no WAL. "insert-commit" is a bare INSERT of 600
// bytes committed on its own with synchronous commit: the WAL flush that
// every durable commit waits for, which no trail design can beat.
// "insert-nosync" is the same INSERT with synchronous_commit off for that
// session only, which a durable trail must never use: the difference to
// "insert-commit" is the flush's share. "1-writer" is "insert-commit" with
// one writer alone.
//
//	cd fleet && go test -run '^$' -bench CommitFloor16 -benchtime 4000x
func BenchmarkCommitFloor16(b *testing.B) {
	insert := "INSERT INTO grantretry_floor (record) VALUES ($1)"
	record := strings.Repeat("x", 600)
	for _, p := range pacings {
		b.Run("roundtrip/"+p.name, func(b *testing.B) {
			benchFloor(b, 16, p, "on", "SELECT 1")
		})
		b.Run("insert-commit/"+p.name, func(b *testing.B) {
			benchFloor(b, 16, p, "on", insert, record)
		})
		b.Run("insert-nosync/"+p.name, func(b *testing.B) {
			benchFloor(b, 16, p, "off", insert, record)
		})
		b.Run("insert-commit-1-writer/"+p.name, func(b *testing.B) {
			benchFloor(b, 1, p, "on", insert, record)
		})
	}
}

// benchFloor runs sql on writers connections of their own, with
// synchronous_commit set to syncCommit, and reports its latency.
func benchFloor(b *testing.B, writers int, p pacing, syncCommit, sql string, args ...any) {
	ctx := context.Background()
	pool := newPool(b)
	if _, err := pool.Exec(ctx, `CREATE TABLE grantretry_floor (id bigserial PRIMARY KEY, record text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	conns := make([]*pgx.Conn, writers)
	for i := range conns {
		c, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy()) // not ConnString: it keeps pool_* parameters, which the server refuses
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(ctx) })
		if _, err := c.Exec(ctx, "SELECT set_config('synchronous_commit', $1, false)", syncCommit); err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	reportLatency(b, paced(b, writers, p, func(w int) error {
		_, err := conns[w].Exec(ctx, sql, args...)
		return err
	}))
}

// reportLatency reports the p50 and p99 of lat in µs.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkFleetSuccessPiece is what fleet mode adds to a call that
// succeeds, alone: the host's state read and the success counted
// (FleetHost.State and Succeeded on a real Coordinator). A whole call's
// time varies by more than this from run to run (BenchmarkSuccessPathFleet).
//
//	cd fleet && go test -run '^$' -bench FleetSuccessPiece -count 10
func BenchmarkFleetSuccessPiece(b *testing.B) {
	co := NewCoordinator(newPool(b), WithDepositEvery(time.Hour))
	b.Cleanup(co.Close)
	h := co.Host("http://funder.example:80", grantretry.FleetPolicy{})
	b.ReportAllocs()
	for b.Loop() {
		if h.State() == grantretry.FleetOpen {
			b.Fatal("open")
		}
		h.Succeeded()
	}
}

// BenchmarkSuccessPathFleet measures fleet mode's success path: a call
// that succeeds, through an in-memory inner transport, with fleet mode
// off and on a real Coordinator (its database up, the host's fleet state
// closed). Fleet mode on reads the state and counts the success in
// memory; the database is not asked.
//
//	cd fleet && go test -run '^$' -bench SuccessPathFleet -benchmem -count 10
func BenchmarkSuccessPathFleet(b *testing.B) {
	pool := newPool(b)
	co := NewCoordinator(pool)
	b.Cleanup(co.Close)
	inner := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Header: http.Header{},
			Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
	})
	const url = "http://funder.example/submit"
	on := grantretry.New(inner, grantretry.WithFleet(co))
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if resp, err := on.RoundTrip(req); err != nil {
		b.Fatal(err)
	} else {
		resp.Body.Close()
	}
	for start := time.Now(); co.Host("http://funder.example:80", grantretry.FleetPolicy{}).State() != grantretry.FleetClosed; {
		if time.Since(start) > 5*time.Second {
			b.Fatal("the Coordinator did not hear the host's state within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	payload := []byte(`{"applicant":"Riverbend Food Bank","amount":125000}`)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, tc := range []struct {
			name string
			rt   http.RoundTripper
		}{{"fleet=off", grantretry.New(inner)}, {"fleet=on", on}} {
			b.Run("method="+method+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var body io.Reader
					if method == http.MethodPost {
						body = bytes.NewReader(payload)
					}
					req, _ := http.NewRequest(method, url, body)
					resp, err := tc.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
			})
		}
	}
}
