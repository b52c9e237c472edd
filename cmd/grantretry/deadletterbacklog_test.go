package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// summaryCounts reads the counts of a redeliver run's summary: "sent"
// (or "planned"), "waiting" and "selected" from its first line, then one
// for each line under it ("delivered", "left, refused", "not tried").
func summaryCounts(t *testing.T, stdout string) map[string]int {
	t.Helper()
	_, summary, ok := strings.Cut(stdout, "\nsummary: ")
	if !ok {
		t.Fatalf("no summary in:\n%s", stdout)
	}
	lines := strings.Split(strings.TrimRight(summary, "\n"), "\n")
	first := regexp.MustCompile(`^(\d+) letters? waiting, (\d+) selected, (\d+) (sent|planned)$`).FindStringSubmatch(lines[0])
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

// A backlog of 1,000 letters, to a funder that has recovered, is
// delivered in one "redeliver -all -rate 200/s" run: every letter that is
// due, unambiguous, unrefused and in time is delivered once, none of the
// others is sent, the summary counts them, and the run keeps the pace.
func TestDeadLetterRedeliverAllDeliversABacklogOfAThousandOnceAtItsRate(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of 1,000 letters at 200 a second")
	}
	f := storetest.NewFunder(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n, rate = 1000, 200
	created := time.Now().Add(-2 * time.Hour).Truncate(time.Second).UTC()
	notBefore := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	var due, others []*grantretry.Letter
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
		if err := d.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	if kinds["refused"] != 100 || kinds["not due"] != 100 || kinds["late"] != 50 || kinds["ambiguous"] != 50 || len(due) != 700 {
		t.Fatalf("the backlog's kinds: %v", kinds)
	}

	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"deadletter", "redeliver", dir, "-all", "-rate", fmt.Sprintf("%d/s", rate), "-trail", path}, &stdout, &stderr)
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
			t.Errorf("%s (%s, %s) was sent", l.ID, l.Reason, l.NotBefore)
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
	if !strings.Contains(stdout.String(), "  delivered: 700 (answered 201 Created: 700)\n") ||
		!strings.Contains(stdout.String(), "  left, not due: 100 (the next is due at "+notBefore.Format(time.RFC3339)+")\n") {
		t.Errorf("summary:\n%s", stdout.String()[strings.Index(stdout.String(), "summary: "):])
	}
	if lines := strings.Count(stdout.String(), "\nredelivered letter "); lines+1 < 700 {
		t.Errorf("%d lines of letters redelivered, want 700", lines)
	}
	if min := time.Duration(len(due)-1) * time.Second / rate; took < min {
		t.Errorf("the run took %v, want at least %v at %d/s", took, min, rate)
	}
	t.Logf("700 letters delivered in %v (at least %v at %d/s)", took, time.Duration(len(due)-1)*time.Second/rate, rate)
	waiting, err := d.List()
	if err != nil || len(waiting) != len(others) {
		t.Errorf("%d letters waiting (%v), want the %d left", len(waiting), err, len(others))
	}
}
