package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envLettersChild carries a child process's lettersChild, as JSON: the
// test binary, run again with it, is one process of the fleet.
const envLettersChild = "GRANTRETRY_TEST_LETTERS_CHILD"

// The outage run: lettersProcs processes of lettersWorkers callers each,
// a lettersPace apart, against a funder up, then down (503) for
// lettersDown, then up. Each process holds up to 6 connections (its
// Coordinator's pool of 4, pgxpool's default on up to 4 cores, and
// Letters' own 2): 12 processes fit PostgreSQL's default of 100
// connections beside the test's own pool. A server out of connections
// refuses the fleet's statements, and the processes lose its state for
// that reason, not for the letters.
const (
	lettersProcs   = 12
	lettersWorkers = 8
	lettersPace    = 200 * time.Millisecond
	lettersBefore  = 1500 * time.Millisecond
	lettersDown    = 6 * time.Second
	lettersAfter   = 1500 * time.Millisecond
)

// lettersChild is what a child process is told.
type lettersChild struct {
	Proc     int
	DSN      string
	Funder   string
	Letters  bool   // keep dead letters in the fleet's database
	Fallback string // the fallback directory, with Letters
}

// lettersReport is what a child process saw.
type lettersReport struct {
	Proc     int
	Calls    int
	Owed     []string // the letters the Transport reported kept, by ID
	FellBack int      // of them, kept in the fallback directory
	Lost     int      // calls that owed a letter and kept none
	// Samples of the funder host's fleet state, every 2 ms of the run,
	// and how many were FleetUnknown (the database is up throughout).
	Samples, Unknown int
	// Connections the Coordinator's pool and the letters' inserts opened
	// during the run; each beyond the pools' first is a reconnect.
	CoordConns, LetterConns int64
}

// outageFunder answers 201, but 503 in its outage, and notes when each
// attempt came and from which process.
type outageFunder struct {
	srv   *httptest.Server
	start atomic.Int64 // Unix ns the run began; 0 before
	mu    sync.Mutex
	hits  []time.Duration // attempts in the outage, since start
	keys  map[string]int  // attempts after the run, per Idempotency-Key
}

func newOutageFunder(t *testing.T) *outageFunder {
	f := &outageFunder{keys: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		st := f.start.Load()
		if st == 0 {
			w.WriteHeader(http.StatusCreated)
			return
		}
		at := time.Since(time.Unix(0, st))
		f.mu.Lock()
		defer f.mu.Unlock()
		if at >= lettersBefore && at < lettersBefore+lettersDown {
			f.hits = append(f.hits, at-lettersBefore)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if at >= lettersBefore+lettersDown+lettersAfter {
			f.keys[r.Header.Get(grantretry.HeaderIdempotencyKey)]++
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// outageRunResult is one run of the lettersProcs processes.
type outageRunResult struct {
	reports []lettersReport
	hits    []time.Duration // the funder's attempts in its outage
	dirs    []string
	f       *outageFunder
}

// probes is the attempts the funder got in its outage from its second
// second on, once every process refuses calls: the breakers' probes.
func (r outageRunResult) probes() int {
	n := 0
	for _, h := range r.hits {
		if h >= time.Second {
			n++
		}
	}
	return n
}

func (r outageRunResult) sum(f func(lettersReport) int64) int64 {
	var n int64
	for _, rep := range r.reports {
		n += f(rep)
	}
	return n
}

func (r outageRunResult) summary() string {
	return fmt.Sprintf("%d calls; %d attempts in the outage, %d probes after its first second; FleetUnknown in %d of %d samples; new connections: Coordinators' pools %d, letters' %d; letters owed %d, fell back %d, lost %d",
		r.sum(func(x lettersReport) int64 { return int64(x.Calls) }), len(r.hits), r.probes(),
		r.sum(func(x lettersReport) int64 { return int64(x.Unknown) }), r.sum(func(x lettersReport) int64 { return int64(x.Samples) }),
		r.sum(func(x lettersReport) int64 { return x.CoordConns }), r.sum(func(x lettersReport) int64 { return x.LetterConns }),
		r.sum(func(x lettersReport) int64 { return int64(len(x.Owed)) }), r.sum(func(x lettersReport) int64 { return int64(x.FellBack) }),
		r.sum(func(x lettersReport) int64 { return int64(x.Lost) }))
}

// runLettersOutage runs lettersProcs OS processes (this test binary again), each a
// Transport with WithFleet on a Coordinator of its own and, with
// letters, fleet.NewLetters on the Coordinator's pool, as a user wires
// them, with a fallback directory each.
func runLettersOutage(t *testing.T, dsn string, letters bool) outageRunResult {
	f := newOutageFunder(t)
	res := outageRunResult{f: f}
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		lines chan string
		errb  strings.Builder
	}
	children := make([]*child, lettersProcs)
	base := t.TempDir()
	for i := range children {
		cfg := lettersChild{Proc: i, DSN: dsn, Funder: f.srv.URL, Letters: letters}
		if letters {
			cfg.Fallback = filepath.Join(base, "fallback-"+strconv.Itoa(i))
			res.dirs = append(res.dirs, cfg.Fallback)
		}
		enc, _ := json.Marshal(cfg)
		c := &child{lines: make(chan string, 4)}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcessLettersOutage$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), envLettersChild+"="+string(enc))
		c.cmd.Stderr = &c.errb
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				if s := sc.Text(); strings.HasPrefix(s, "child: ") {
					c.lines <- strings.TrimPrefix(s, "child: ")
				}
			}
			close(c.lines)
		}()
		children[i] = c
		t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	}
	line := func(c *child, what string, within time.Duration) string {
		select {
		case s, ok := <-c.lines:
			if ok {
				return s
			}
		case <-time.After(within):
		}
		c.cmd.Process.Kill()
		c.cmd.Wait()
		t.Fatalf("child process: no %s line; its stderr:\n%s", what, c.errb.String())
		return ""
	}
	for _, c := range children {
		if s := line(c, "ready", time.Minute); s != "ready" {
			t.Fatalf("child process said %q, want ready", s)
		}
	}
	f.start.Store(time.Now().UnixNano())
	for _, c := range children {
		io.WriteString(c.stdin, "go\n")
	}
	for _, c := range children {
		s := line(c, "report", time.Minute)
		var rep lettersReport
		if err := json.Unmarshal([]byte(strings.TrimPrefix(s, "report ")), &rep); err != nil {
			t.Fatalf("child report %q: %v", s, err)
		}
		res.reports = append(res.reports, rep)
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child process %d: %v; its stderr:\n%s", rep.Proc, err, c.errb.String())
		}
	}
	f.mu.Lock()
	res.hits = append([]time.Duration(nil), f.hits...)
	f.mu.Unlock()
	return res
}

// TestFleetLettersAtTheirDefaultLimitKeepTheBreakerAndLandOnce runs the
// fleet of lettersProcs OS processes through a funder's 6 s outage twice, without
// letters and with them at their default limit. With letters, every
// letter owed is in exactly one place (the database or one fallback
// directory), draining the directories and redelivering sends each
// once, the processes do not lose the fleet's state with the database up
// any more than without letters, and the breaker's probes stay as few.
func TestFleetLettersAtTheirDefaultLimitKeepTheBreakerAndLandOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet of processes through an outage, twice")
	}
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	off := runLettersOutage(t, dsn, false)
	t.Logf("letters off: %s", off.summary())
	on := runLettersOutage(t, dsn, true)
	t.Logf("letters on:  %s", on.summary())

	// The processes keep the fleet's state, and the breaker its probes,
	// as without letters. The two runs are real processes on a shared
	// machine, whose share of samples that missed the fleet's state, and
	// whose probes, move from run to run with the machine: a process that
	// cannot reach the database in time decides alone. The bounds leave
	// room for that, and no more: letters that cost the processes the
	// fleet's state would show as a share several times the run without
	// them, and as each process probing on its own, dozens of probes
	// where the fleet's figure is a handful.
	unknown := func(r outageRunResult) (n, samples int64) {
		return r.sum(func(x lettersReport) int64 { return int64(x.Unknown) }), r.sum(func(x lettersReport) int64 { return int64(x.Samples) })
	}
	onU, onS := unknown(on)
	offU, offS := unknown(off)
	if onS == 0 || offS == 0 {
		t.Fatalf("no samples of the fleet's state: %d with letters, %d without", onS, offS)
	}
	if onShare, offShare := float64(onU)/float64(onS), float64(offU)/float64(offS); onShare > 2*offShare+0.01 {
		t.Errorf("with letters the processes were FleetUnknown in %d of %d samples, without them in %d of %d: the database was up", onU, onS, offU, offS)
	}
	// The fleet's own figure: one probe per probe interval across the
	// processes, in the outage after its first second.
	fleetFigure := int((lettersDown-time.Second)/DefaultProbeEvery) + 1
	if base := max(off.probes(), fleetFigure); on.probes() > 2*base+2 {
		t.Errorf("with letters the funder got %d probes in the outage, without them %d (the fleet's figure %d)", on.probes(), off.probes(), fleetFigure)
	}

	// Every letter owed is in exactly one place.
	places := map[string]int{}
	owed := map[string]bool{}
	for _, rep := range on.reports {
		for _, id := range rep.Owed {
			owed[id] = true
		}
		if rep.Lost > 0 {
			t.Errorf("process %d: %d calls owed a letter and kept none", rep.Proc, rep.Lost)
		}
	}
	rows, err := pool.Query(ctx, `SELECT id FROM grantretry_letters`)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	nrows := 0
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		places[id]++
		nrows++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	nfiles := 0
	for _, d := range on.dirs {
		dir, err := deadletter.OpenReadOnly(d)
		if err != nil {
			t.Fatal(err)
		}
		ls, err := dir.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			places[l.ID]++
			nfiles++
		}
	}
	twice := 0
	for id, n := range places {
		if n > 1 {
			twice++
		}
		if !owed[id] {
			t.Errorf("letter %s is kept but no call reported it", id)
		}
	}
	missing := 0
	for id := range owed {
		if places[id] == 0 {
			missing++
		}
	}
	t.Logf("letters: %d owed; %d rows, %d fallback files; %d in two places, %d in none", len(owed), nrows, nfiles, twice, missing)
	if twice > 0 || missing > 0 {
		t.Errorf("%d letters are both in the database and in a fallback directory, %d in neither", twice, missing)
	}
	if len(owed) == 0 {
		t.Fatal("no letter was owed: the outage was not seen")
	}

	// Drained into the database and redelivered, each is sent once.
	for _, d := range on.dirs {
		dir, err := deadletter.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		s := NewLetters(pool, WithFallback(dir))
		_, _, err = s.Drain(ctx)
		s.Close()
		if err != nil {
			t.Fatalf("Drain %s: %v", d, err)
		}
	}
	redeliverAll(t, pool, on.f.srv.Client())
	on.f.mu.Lock()
	sent := on.f.keys
	on.f.mu.Unlock()
	var notOnce []string
	ids := map[string]string{} // key -> letter id, from the database
	if err := func() error {
		rows, err := pool.Query(ctx, `SELECT id, letter->>'idempotency_key' FROM grantretry_letters`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var id, key string
		for rows.Next() {
			if err := rows.Scan(&id, &key); err != nil {
				return err
			}
			ids[key] = id
		}
		return rows.Err()
	}(); err != nil {
		t.Fatal(err)
	}
	for key, id := range ids {
		if n := sent[key]; n != 1 {
			notOnce = append(notOnce, fmt.Sprintf("%s sent %d times", id, n))
		}
	}
	if len(ids) != len(owed) {
		t.Errorf("after draining, the database holds %d letters, want the %d owed", len(ids), len(owed))
	}
	if len(notOnce) > 0 {
		t.Errorf("%d letters not sent exactly once: %v", len(notOnce), notOnce[:min(5, len(notOnce))])
	}

}

// redeliverAll claims and redelivers every waiting letter, 8 workers at
// once.
func redeliverAll(t *testing.T, pool *pgxpool.Pool, client *http.Client) {
	s := NewLetters(pool)
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				claims, err := s.Claim(ctx, "drain-"+strconv.Itoa(w), 16)
				if err != nil {
					t.Error(err)
					return
				}
				if len(claims) == 0 {
					return
				}
				for _, c := range claims {
					if _, err := s.Redeliver(ctx, c, client, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestHelperProcessLettersOutage is one process of the outage run, when
// envLettersChild is set; without it, it does nothing.
func TestHelperProcessLettersOutage(t *testing.T) {
	spec := os.Getenv(envLettersChild)
	if spec == "" {
		t.Skip("a child process of TestFleetLettersAtTheirDefaultLimitKeepTheBreakerAndLandOnce")
	}
	var cfg lettersChild
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MinConns = 2 // as docs/fleet.md asks of a Coordinator's pool
	pcfg.MaxConns = 4 // within the fleet's connection budget (see lettersProcs)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	co := NewCoordinator(pool)
	opts := []grantretry.Option{grantretry.WithFleet(co), grantretry.WithBackoff(20*time.Millisecond, 200*time.Millisecond)}
	var letters *Letters
	if cfg.Letters {
		dir, err := deadletter.Open(cfg.Fallback)
		if err != nil {
			t.Fatal(err)
		}
		letters = NewLetters(pool, WithFallback(dir))
		opts = append(opts, grantretry.WithDeadLetter(letters))
	}
	inner := &http.Transport{MaxIdleConnsPerHost: 16}
	tp := grantretry.New(inner, opts...)
	host := co.Host(cfg.Funder, grantretry.FleetPolicy{})

	var n atomic.Int64
	call := func() grantretry.Outcome {
		req, _ := http.NewRequest(http.MethodPost, cfg.Funder+"/submit", strings.NewReader(`{}`))
		req.Header.Set(grantretry.HeaderIdempotencyKey, fmt.Sprintf("p%d-%d", cfg.Proc, n.Add(1)))
		resp, err := tp.RoundTrip(req)
		var e *grantretry.Error
		if errors.As(err, &e) {
			return e.Outcome
		}
		if err != nil {
			t.Error(err)
			return grantretry.Outcome{}
		}
		resp.Body.Close()
		out, _ := grantretry.OutcomeOf(resp)
		return out
	}
	call() // the Transport asks the fleet for the host
	for deadline := time.Now().Add(30 * time.Second); host.State() == grantretry.FleetUnknown || pool.Stat().TotalConns() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fleet's state stayed unknown, or the pool without its connections")
		}
	}
	fmt.Println("child: ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	end := lettersBefore + lettersDown + lettersAfter
	coordConns := pool.Stat().NewConnsCount()
	var letterConns int64
	if letters != nil && letters.insertPool() != pool {
		letterConns = letters.insertPool().Stat().NewConnsCount()
	}
	rep := lettersReport{Proc: cfg.Proc}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range lettersWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(w) * lettersPace / lettersWorkers)
			for time.Since(start) < end {
				out := call()
				mu.Lock()
				rep.Calls++
				switch {
				case out.DeadLetterID != "":
					rep.Owed = append(rep.Owed, out.DeadLetterID)
					var fe *FallbackError
					if errors.As(out.RecordErr, &fe) {
						rep.FellBack++
					}
				case out.Disposition == grantretry.DeadLetter || out.Disposition == grantretry.CircuitOpen:
					if letters != nil {
						rep.Lost++
					}
				}
				mu.Unlock()
				time.Sleep(lettersPace)
			}
		}()
	}
	for time.Since(start) < end {
		rep.Samples++
		if host.State() == grantretry.FleetUnknown {
			rep.Unknown++
		}
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	rep.CoordConns = pool.Stat().NewConnsCount() - coordConns
	if letters != nil && letters.insertPool() != pool {
		rep.LetterConns = letters.insertPool().Stat().NewConnsCount() - letterConns
	}
	if letters != nil {
		letters.Close() // the inserts in flight end
	}
	co.Close()
	out, _ := json.Marshal(rep)
	fmt.Printf("child: report %s\n", out)
}
