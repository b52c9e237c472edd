package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/internal/operator/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// summaryBlock is the summary a redeliver run printed at the end of its
// stdout: from its "summary: " line on.
func summaryBlock(t *testing.T, stdout string) string {
	t.Helper()
	i := strings.LastIndex("\n"+stdout, "\nsummary: ")
	if i < 0 {
		t.Fatalf("no summary in:\n%s", stdout)
	}
	return stdout[i:]
}

// summaryCounts reads the counts of a redeliver run's summary: "sent"
// (or "planned"), "waiting" and "selected" from its first line, then one
// for each line under it ("delivered", "left, refused", "not tried").
func summaryCounts(t *testing.T, stdout string) map[string]int {
	t.Helper()
	lines := strings.Split(strings.TrimRight(summaryBlock(t, stdout), "\n"), "\n")
	first := regexp.MustCompile(`^summary: (\d+) letters? waiting, (\d+) selected, (\d+) (sent|planned)$`).FindStringSubmatch(lines[0])
	if first == nil {
		t.Fatalf("summary's first line %q", lines[0])
	}
	counts := map[string]int{}
	for i, name := range []string{"waiting", "selected", first[4]} {
		counts[name], _ = strconv.Atoi(first[i+1])
	}
	line := regexp.MustCompile(`^  ([a-z ,']+): (\d+)( \(.*\))?$`)
	for _, l := range lines[1:] {
		m := line.FindStringSubmatch(l)
		if m == nil {
			if strings.HasPrefix(l, "  stopped: ") {
				counts["stopped"] = 1
				continue
			}
			t.Fatalf("summary line %q", l)
		}
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	return counts
}

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
	const n, rate = 1000, 200
	created := time.Now().Add(-2 * time.Hour).Truncate(time.Second).UTC()
	notBefore := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	var all, due, others []*grantretry.Letter
	kinds := map[string]int{}
	for i := range n {
		l := storetest.Letter(fmt.Sprintf("L-%04d", i), f.URL+"/v1/applications", created.Add(time.Duration(i)*time.Millisecond))
		kind := "plain"
		switch i % 20 {
		case 1, 11:
			kind = "refused"
			storetest.Refused(l)
		case 2, 12:
			kind = "not due"
			storetest.NotDue(l, notBefore)
		case 3:
			kind = "late"
			storetest.Late(l, time.Now().Add(-time.Hour))
		case 4:
			kind = "ambiguous"
			storetest.Ambiguous(l)
		}
		kinds[kind]++
		if kind == "plain" {
			due = append(due, l)
		} else {
			others = append(others, l)
		}
		all = append(all, l)
	}
	if kinds["refused"] != 100 || kinds["not due"] != 100 || kinds["late"] != 50 || kinds["ambiguous"] != 50 || len(due) != 700 {
		t.Fatalf("the backlog's kinds: %v", kinds)
	}
	putMany(t, pool, all)

	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"deadletter", "redeliver", "-pg", dsn, "-all", "-rate", fmt.Sprintf("%d/s", rate), "-concurrency", "4"}, &stdout, &stderr)
	took := time.Since(start)
	if code != exitOK {
		t.Fatalf("redeliver -all -rate: exit %d\n%s", code, stderr.String())
	}
	got := f.Got()
	for _, l := range due {
		if got[l.IdempotencyKey] != 1 {
			t.Errorf("%s, due, was sent %d times, want once", l.ID, got[l.IdempotencyKey])
		}
	}
	for _, l := range others {
		if got[l.IdempotencyKey] != 0 {
			t.Errorf("%s (%s, not before %s, due by %s, ambiguous %v) was sent", l.ID, l.Reason, l.NotBefore, l.DueBy, l.Ambiguous)
		}
	}
	if f.Requests() != len(due) {
		t.Errorf("the funder got %d requests, want %d", f.Requests(), len(due))
	}
	counts := summaryCounts(t, stdout.String())
	want := map[string]int{"waiting": n, "selected": 700, "sent": 700, "delivered": 700,
		"left, refused": 100, "left, not due": 100, "left, late": 50, "left, ambiguous": 50}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("summary %q: %d, want %d", k, counts[k], v)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("summary counts %v, want only %v", counts, want)
	}
	summary := summaryBlock(t, stdout.String())
	if !strings.Contains(summary, "  delivered: 700 (answered 201 Created: 700)\n") ||
		!strings.Contains(summary, "  left, not due: 100 (the next is due at "+notBefore.Format(time.RFC3339)+")\n") {
		t.Errorf("summary:\n%s", summary)
	}
	if lines := strings.Count("\n"+stdout.String(), "\nredelivered letter "); lines != 700 {
		t.Errorf("%d lines of letters redelivered, want 700", lines)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if min := time.Duration(len(due)-1) * time.Second / rate; took < min {
		t.Errorf("the run took %v, want at least %v at %d/s", took, min, rate)
	}
	t.Logf("700 letters delivered in %v (at least %v at %d/s)", took, time.Duration(len(due)-1)*time.Second/rate, rate)

	var redelivered, waiting, claimed int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'redelivered'), count(*) FILTER (WHERE state = 'waiting'),
		count(*) FILTER (WHERE state = 'waiting' AND claims > 0) FROM grantretry_letters`).Scan(&redelivered, &waiting, &claimed)
	if err != nil {
		t.Fatal(err)
	}
	if redelivered != len(due) || waiting != len(others) || claimed != 0 {
		t.Errorf("the database holds %d redelivered, %d waiting (%d of them claimed by this run); want %d, %d (none claimed: -all leaves them unclaimed)",
			redelivered, waiting, claimed, len(due), len(others))
	}
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	for _, l := range []*grantretry.Letter{due[0], due[len(due)-1]} {
		if _, rec, err := letters.Get(context.Background(), l.ID); err != nil || rec == nil || rec.Status != 201 {
			t.Errorf("%s: record %+v, %v; want redelivered, answered 201", l.ID, rec, err)
		}
	}
}
