package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/internal/operator/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// putMany stores letters in the fleet's table with a few writers at once,
// as a fleet's processes would have left them.
func putMany(t *testing.T, pool *pgxpool.Pool, letters []*grantretry.Letter) {
	t.Helper()
	s := fleet.NewLetters(pool, fleet.WithLimit(10*time.Second))
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, len(letters))
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(letters); i += writers {
				if err := s.PutDeadLetter(context.Background(), letters[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A backlog of 1,000 letters in the fleet's table, to a funder that has
// recovered, is delivered in one "redeliver -all -rate 200/s -concurrency
// 4" run: every letter that is due, unambiguous, unrefused and in time is
// delivered once, none of the others is sent, the summary counts them,
// the database agrees, and the run keeps the pace.
func TestDeadLetterRedeliverAllDeliversABacklogOfAThousandOnceAtItsRate(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of 1,000 letters at 200 a second")
	}
	dsn, pool := newDB(t)
	f := storetest.NewFunder(t)
	b := storetest.NewBacklog(t, f.URL+"/v1/applications")
	putMany(t, pool, b.All)

	const rate = 200
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"deadletter", "redeliver", "-pg", dsn, "-all", "-rate", fmt.Sprintf("%d/s", rate), "-concurrency", "4"}, &stdout, &stderr)
	took := time.Since(start)
	if code != exitOK {
		t.Fatalf("redeliver -all -rate: exit %d\n%s", code, stderr.String())
	}
	b.CheckRun(t, f, stdout.String(), stderr.String(), took, rate)

	var redelivered, waiting, claimed int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'redelivered'), count(*) FILTER (WHERE state = 'waiting'),
		count(*) FILTER (WHERE state = 'waiting' AND claims > 0) FROM grantretry_letters`).Scan(&redelivered, &waiting, &claimed)
	if err != nil {
		t.Fatal(err)
	}
	if redelivered != len(b.Due) || waiting != len(b.Others) || claimed != 0 {
		t.Errorf("the database holds %d redelivered, %d waiting (%d of them claimed by this run); want %d, %d (none claimed: -all leaves them unclaimed)",
			redelivered, waiting, claimed, len(b.Due), len(b.Others))
	}
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	for _, l := range []*grantretry.Letter{b.Due[0], b.Due[len(b.Due)-1]} {
		if _, rec, err := letters.Get(context.Background(), l.ID); err != nil || rec == nil || rec.Status != 201 {
			t.Errorf("%s: record %+v, %v; want redelivered, answered 201", l.ID, rec, err)
		}
	}
}
