package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envLostChild carries a child process's lostChild, as JSON: the test
// binary, run again with it, is one process of the fleet.
const envLostChild = "GRANTRETRY_TEST_LOST_CHILD"

// The run: the funder up for lostBefore, then down (503) until it comes
// back (each benchmark's back), up again until lostEnd; the database goes
// away for every process at lostDBGone, mid-outage, and stays away.
const (
	lostProcs  = 16
	lostBefore = time.Second
	lostDBGone = 4 * time.Second
	lostEnd    = 20 * time.Second
)

type lostChild struct {
	Proc   int
	DSN    string
	Funder string
}

// lostStorm is what the funder saw of one run.
type lostStorm struct {
	mu   sync.Mutex
	hits []stormHit
}

type stormHit struct {
	at    time.Duration // since the run began
	proc  int
	key   string
	ok    bool
	retry bool // the key was seen before
}

// BenchmarkFleetLostMidOutage runs 16 OS processes (this test binary
// again), each a Transport with WithFleet on a Coordinator of its own
// with the default policy, one caller each calling every 10-30 ms,
// through a funder's outage; the database goes away for all of them (a
// loopback proxy closed; the shared server untouched) while the fleet's
// breaker is open, and the funder comes back with the database still
// away. It reports what the down funder got after the database went
// (requests, those in its first 0.5 s, retries) and, once the funder is
// back, how long until its first success and from that one until every
// process had one.
//
//	cd fleet && go test -run '^$' -bench FleetLostMidOutage -benchtime 1x -count 2
func BenchmarkFleetLostMidOutage(b *testing.B) {
	// Two times for the funder's return: the local breakers' probe
	// times are what decides how soon one finds it.
	for _, back := range []time.Duration{9 * time.Second, 9500 * time.Millisecond} {
		b.Run("back="+back.String(), func(b *testing.B) {
			for b.Loop() {
				r := runLostStorm(b, back)
				b.ReportMetric(float64(r.afterGone), "reqs-after-db-gone")
				b.ReportMetric(float64(r.firstHalf), "reqs-first-0.5s")
				b.ReportMetric(float64(r.retries), "retries-after-db-gone")
				b.ReportMetric(float64(r.firstOK.Milliseconds()), "ms-to-first-ok")
				b.ReportMetric(float64(r.resume.Milliseconds()), "ms-to-all-resumed")
				b.ReportMetric(float64(r.resumed), "procs-resumed")
			}
		})
	}
}

type lostResult struct {
	afterGone, firstHalf, retries int
	firstOK, resume               time.Duration
	resumed                       int
}

func runLostStorm(b *testing.B, lostBack time.Duration) lostResult {
	direct := newPool(b)
	proxy := newDBProxy(b, proxyTarget(direct))
	cfg := direct.Config().ConnConfig
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", cfg.User, proxy.port(), cfg.Database)

	st := &lostStorm{}
	var start atomic.Int64
	seen := map[string]bool{}
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s := start.Load()
		if s == 0 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		at := time.Since(time.Unix(0, s))
		ok := at < lostBefore || at >= lostBack
		proc, _ := strconv.Atoi(r.Header.Get("X-Process"))
		key := r.Header.Get(grantretry.HeaderIdempotencyKey)
		st.mu.Lock()
		st.hits = append(st.hits, stormHit{at, proc, key, ok, seen[key]})
		seen[key] = true
		st.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer funder.Close()

	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		ready chan struct{}
		errb  strings.Builder
	}
	children := make([]*child, lostProcs)
	for i := range children {
		enc, _ := json.Marshal(lostChild{Proc: i, DSN: dsn, Funder: funder.URL})
		c := &child{ready: make(chan struct{})}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcessFleetLost$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), envLostChild+"="+string(enc))
		c.cmd.Stderr = &c.errb
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "child: ready" {
					close(c.ready)
				}
			}
		}()
		children[i] = c
	}
	defer func() {
		for _, c := range children {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	}()
	for _, c := range children {
		select {
		case <-c.ready:
		case <-time.After(time.Minute):
			b.Fatalf("a child process was not ready in a minute; its stderr:\n%s", c.errb.String())
		}
	}
	begin := time.Now()
	start.Store(begin.UnixNano())
	for _, c := range children {
		io.WriteString(c.stdin, "go\n")
	}
	time.Sleep(lostDBGone - time.Since(begin))
	proxy.Close()
	for _, c := range children {
		if err := c.cmd.Wait(); err != nil {
			b.Fatalf("child process: %v; its stderr:\n%s", err, c.errb.String())
		}
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	var r lostResult
	first := map[int]time.Duration{}
	var firstOK time.Duration = -1
	for _, h := range st.hits {
		switch {
		case h.at >= lostDBGone && h.at < lostBack:
			r.afterGone++
			if h.at < lostDBGone+500*time.Millisecond {
				r.firstHalf++
			}
			if h.retry {
				r.retries++
			}
		case h.at >= lostBack && h.ok:
			if firstOK < 0 || h.at < firstOK {
				firstOK = h.at
			}
			if _, ok := first[h.proc]; !ok {
				first[h.proc] = h.at
			}
		}
	}
	if firstOK >= 0 {
		r.firstOK = firstOK - lostBack
		ats := make([]time.Duration, 0, len(first))
		for _, at := range first {
			ats = append(ats, at)
		}
		r.resume = slices.Max(ats) - firstOK
	}
	r.resumed = len(first)
	return r
}

// TestHelperProcessFleetLost is one process of BenchmarkFleetLostMidOutage
// when envLostChild is set; without it, it does nothing.
func TestHelperProcessFleetLost(t *testing.T) {
	spec := os.Getenv(envLostChild)
	if spec == "" {
		t.Skip("a child process of BenchmarkFleetLostMidOutage")
	}
	var cfg lostChild
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MinConns, pcfg.MaxConns = 2, 2
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	co := NewCoordinator(pool)
	defer co.Close()
	inner := &http.Transport{MaxIdleConnsPerHost: 4}
	tag := strconv.Itoa(cfg.Proc)
	tp := grantretry.New(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Process", tag)
		return inner.RoundTrip(r)
	}), grantretry.WithFleet(co), grantretry.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	var n int
	call := func() {
		n++
		req, _ := http.NewRequest(http.MethodPost, cfg.Funder+"/submit", strings.NewReader(`{}`))
		req.Header.Set(grantretry.HeaderIdempotencyKey, fmt.Sprintf("p%d-%d", cfg.Proc, n))
		if resp, err := tp.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	call() // the Transport asks the fleet for the host
	host := co.Host(cfg.Funder, grantretry.FleetPolicy{})
	for deadline := time.Now().Add(30 * time.Second); host.State() == grantretry.FleetUnknown; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fleet's state stayed unknown")
		}
	}
	fmt.Println("child: ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	rng := rand.New(rand.NewPCG(uint64(cfg.Proc), 1))
	time.Sleep(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
	for time.Since(begin) < lostEnd {
		call()
		time.Sleep(10*time.Millisecond + time.Duration(rng.Int64N(int64(20*time.Millisecond))))
	}
}
