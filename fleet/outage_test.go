package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvOutage sets how long TestDatabaseStoppedMidRun keeps the server
// down (a Go duration; default 2s; docs/fleet.md's outage runs use 10s).
const EnvOutage = "GRANTRETRY_PG_OUTAGE"

func outageLength(t *testing.T) time.Duration {
	s := os.Getenv(EnvOutage)
	if s == "" {
		return 2 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", EnvOutage, s)
	}
	return d
}

// outageRun is the calls the test's workers made, as their callers saw
// them, and the slack of the machine measured in the same run.
type outageRun struct {
	mu      sync.Mutex
	outs    []grantretry.Outcome
	slowest time.Duration
	took    []time.Duration
	work    time.Duration // the slowest control call
	late    time.Duration // the latest a timer of the trail's limit fired
}

func (r *outageRun) add(out grantretry.Outcome, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outs = append(r.outs, out)
	r.took = append(r.took, took)
	r.slowest = max(r.slowest, took)
}

func (r *outageRun) addWork(took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.work = max(r.work, took)
}

func (r *outageRun) addLate(late time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.late = max(r.late, late)
}

// bound is how long a call of attempts may take: its waits on the
// database, each cut at its limit (a disposition's commit, and per failed
// attempt two fleet questions), each ended by a timer that may fire late
// by the run's late, plus everything else a call does, which is no
// slower than the run's slowest control call. The slack is measured in
// the same run, under the same load, so a loaded machine moves the bound
// and a call that waits on the database beyond its limits still fails it.
func (r *outageRun) bound(attempts int, trailLimit time.Duration) time.Duration {
	waits := 1 + 2*attempts
	return trailLimit + time.Duration(2*attempts)*grantretry.DefaultFleetLimit + time.Duration(waits)*r.late + r.work
}

// TestDatabaseStoppedMidRun stops a throwaway cluster (never the shared
// server) for EnvOutage while four workers call a funder that answers 503
// to one request in five, and restarts it. No call waits on the database
// beyond its limits, every disposition a caller saw is in the database's
// trail or the local one, and the Coordinator and the Trail rejoin.
func TestDatabaseStoppedMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts a cluster")
	}
	outage := outageLength(t)
	cl := pgtest.NewCluster(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cl.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const trailLimit = 20 * time.Millisecond
	localPath := filepath.Join(t.TempDir(), "local.jsonl")
	local, err := trail.Open(localPath, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	tr := newTrail(t, pool, WithLocalTrail(local), WithLimit(trailLimit))
	co := NewCoordinator(pool, WithReread(100*time.Millisecond))
	defer co.Close()

	var n atomic.Int64
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%5 == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer funder.Close()
	tp := grantretry.New(http.DefaultTransport, grantretry.WithFleet(co), grantretry.WithAuditTrail(tr),
		grantretry.WithClock(instantClock{}), grantretry.WithBudget(0, time.Minute))

	// The control: the same calls to the same funder, with a trail file
	// on the same disk and no database. Each worker makes one after each
	// call, so the two see the same load at the same moments.
	ctlTrail, err := trail.Open(filepath.Join(t.TempDir(), "control.jsonl"), trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ctlTrail.Close()
	ctl := grantretry.New(http.DefaultTransport, grantretry.WithAuditTrail(ctlTrail),
		grantretry.WithClock(instantClock{}), grantretry.WithBudget(0, time.Minute))

	run := &outageRun{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				start := time.Now()
				out := outageCall(t, tp, funder.URL)
				run.add(out, time.Since(start))
				start = time.Now()
				outageCall(t, ctl, funder.URL)
				run.addWork(time.Since(start))
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		timer := time.NewTimer(trailLimit)
		for {
			start := time.Now()
			timer.Reset(trailLimit)
			select {
			case <-stop:
				return
			case <-timer.C:
				run.addLate(time.Since(start) - trailLimit)
			}
		}
	}()
	key := funder.URL // the Transport's host key: http://127.0.0.1:port
	waitFor(t, "the fleet's state before the outage", func() bool { return co.Host(key, grantretry.FleetPolicy{}).State() == grantretry.FleetClosed })
	time.Sleep(500 * time.Millisecond)

	cl.Stop("fast")
	stopped := time.Now()
	waitFor(t, "the Coordinator to notice", func() bool { return co.Host(key, grantretry.FleetPolicy{}).State() == grantretry.FleetUnknown })
	time.Sleep(outage - time.Since(stopped))
	starting := time.Now()
	cl.Start()
	restarted := time.Now()
	waitFor(t, "the Coordinator to rejoin", func() bool { return co.Host(key, grantretry.FleetPolicy{}).State() == grantretry.FleetClosed })
	rejoined := time.Since(starting)
	// The Trail rejoins when its records reach the database again: it
	// tries a second after a failure, and each pooled connection the
	// restart broke fails once.
	waitFor(t, "the Trail to rejoin", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM grantretry_trail WHERE writer = $1 AND written > $2`, tr.Writer(), restarted).Scan(&n)
		return err == nil && n > 0
	})
	trailBack := time.Since(starting)
	fellBack := tr.FellBack()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("database down %v (pg_ctl start took %v); rejoined after the restart began: the Coordinator in %v, the Trail in %v",
		starting.Sub(stopped).Round(time.Millisecond), restarted.Sub(starting).Round(time.Millisecond),
		rejoined.Round(time.Millisecond), trailBack.Round(time.Millisecond))
	t.Logf("%d calls, slowest %v, p99 %v; %d records fell back to the local trail by the rejoin, %d in the second after it (commits past the limit)",
		len(run.outs), run.slowest.Round(time.Microsecond), percentile(run.took, 0.99).Round(time.Microsecond),
		fellBack, tr.FellBack()-fellBack)
	t.Logf("slack measured: the slowest control call %v, a timer of %v fired up to %v late",
		run.work.Round(time.Microsecond), trailLimit, run.late.Round(time.Microsecond))

	// No call waited on the database beyond its limits.
	closest, of := time.Duration(0), time.Duration(0)
	for i, out := range run.outs {
		bound := run.bound(out.Attempts, trailLimit)
		if float64(run.took[i])/float64(bound) > float64(closest)/float64(max(of, 1)) {
			closest, of = run.took[i], bound
		}
		if run.took[i] > bound {
			t.Errorf("call %s (%d attempts) took %v, beyond %v", out.CorrelationID, out.Attempts, run.took[i], bound)
		}
		if out.RecordErr != nil {
			t.Errorf("call %s: %v", out.CorrelationID, out.RecordErr)
		}
	}
	t.Logf("the call closest to its bound took %v of %v", closest.Round(time.Microsecond), of.Round(time.Microsecond))
	if st := co.Host(key, grantretry.FleetPolicy{}).State(); st != grantretry.FleetClosed {
		t.Errorf("the fleet's breaker is %v at the end; one failure in five must not open it", st)
	}
	if fellBack == 0 {
		t.Error("no record fell back to the local trail: the outage was not seen")
	}
	missing := missingDispositions(t, pool, localPath, run.outs)
	if len(missing) > 0 {
		t.Errorf("%d of %d dispositions the callers saw are in neither trail: %v", len(missing), len(run.outs), missing[:min(5, len(missing))])
	}
}

func outageCall(t *testing.T, tp *grantretry.Transport, url string) grantretry.Outcome {
	req, _ := http.NewRequest(http.MethodPost, url+"/submit", strings.NewReader(`{}`))
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

// missingDispositions returns the correlation ids of outs whose
// disposition record is neither in the database's trail nor in the local
// trail file; both must verify.
func missingDispositions(t *testing.T, pool *pgxpool.Pool, localPath string, outs []grantretry.Outcome) []string {
	seen := map[string]bool{}
	mark := func(msg string, fields map[string]any) {
		if msg == grantretry.MsgDisposition {
			id, _ := fields[grantretry.FieldCorrelationID].(string)
			seen[id] = true
		}
	}
	if _, err := ReadTrail(context.Background(), pool, func(r TrailRecord) error { mark(r.Msg, r.Fields); return nil }); err != nil {
		t.Fatalf("the database's trail: %v", err)
	}
	if _, err := trail.Read([]string{localPath}, func(r trail.Record) error { mark(r.Msg, r.Fields); return nil }); err != nil {
		t.Fatalf("the local trail: %v", err)
	}
	var missing []string
	for _, out := range outs {
		if !seen[out.CorrelationID] {
			missing = append(missing, out.CorrelationID)
		}
	}
	return missing
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}
