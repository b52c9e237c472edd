package storetest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// Backlog is the acceptance scenario both tools run: a thousand letters
// to one funder, of which 100 were refused (422), 100 are not due for an
// hour, 50 are late and 50 ambiguous with a key; the 700 others are due.
type Backlog struct {
	All, Due, Others []*grantretry.Letter
	NotBefore        time.Time // of the letters not due
}

// NewBacklog makes the backlog's letters, to url, not yet stored.
func NewBacklog(t testing.TB, url string) Backlog {
	t.Helper()
	created := time.Now().Add(-2 * time.Hour).Truncate(time.Second).UTC()
	b := Backlog{NotBefore: time.Now().Add(time.Hour).Truncate(time.Second).UTC()}
	kinds := map[string]int{}
	for i := range 1000 {
		l := Letter(fmt.Sprintf("L-%04d", i), url, created.Add(time.Duration(i)*time.Millisecond))
		kind := "plain"
		switch i % 20 {
		case 1, 11:
			kind = "refused"
			Refused(l)
		case 2, 12:
			kind = "not due"
			NotDue(l, b.NotBefore)
		case 3:
			kind = "late"
			Late(l, time.Now().Add(-time.Hour))
		case 4:
			kind = "ambiguous"
			Ambiguous(l)
		}
		kinds[kind]++
		if kind == "plain" {
			b.Due = append(b.Due, l)
		} else {
			b.Others = append(b.Others, l)
		}
		b.All = append(b.All, l)
	}
	if kinds["refused"] != 100 || kinds["not due"] != 100 || kinds["late"] != 50 || kinds["ambiguous"] != 50 || len(b.Due) != 700 {
		t.Fatalf("the backlog's kinds: %v", kinds)
	}
	return b
}

// CheckRun checks a "redeliver -all -rate RATE/s" run over the backlog
// that took took and printed stdout and stderr, against what the funder
// f got: every due letter sent once, none of the others, the summary's
// counts and lines, a line for each letter delivered, nothing on stderr,
// and the pace kept.
func (b Backlog) CheckRun(t testing.TB, f *Funder, stdout, stderr string, took time.Duration, rate int) {
	t.Helper()
	got := f.Got()
	for _, l := range b.Due {
		if got[l.IdempotencyKey] != 1 {
			t.Errorf("%s, due, was sent %d times, want once", l.ID, got[l.IdempotencyKey])
		}
	}
	for _, l := range b.Others {
		if got[l.IdempotencyKey] != 0 {
			t.Errorf("%s (%s, not before %s, due by %s, ambiguous %v) was sent", l.ID, l.Reason, l.NotBefore, l.DueBy, l.Ambiguous)
		}
	}
	if f.Requests() != len(b.Due) {
		t.Errorf("the funder got %d requests, want %d", f.Requests(), len(b.Due))
	}
	counts := SummaryCounts(t, stdout)
	want := map[string]int{"waiting": len(b.All), "selected": 700, "sent": 700, "delivered": 700,
		"left, refused": 100, "left, not due": 100, "left, late": 50, "left, ambiguous": 50}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("summary %q: %d, want %d", k, counts[k], v)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("summary counts %v, want only %v", counts, want)
	}
	summary := SummaryBlock(t, stdout)
	if !strings.Contains(summary, "  delivered: 700 (answered 201 Created: 700)\n") ||
		!strings.Contains(summary, "  left, not due: 100 (the next is due at "+b.NotBefore.Format(time.RFC3339)+")\n") {
		t.Errorf("summary:\n%s", summary)
	}
	if lines := strings.Count("\n"+stdout, "\nredelivered letter "); lines != 700 {
		t.Errorf("%d lines of letters redelivered, want 700", lines)
	}
	if stderr != "" {
		t.Errorf("stderr:\n%s", stderr)
	}
	if min := time.Duration(len(b.Due)-1) * time.Second / time.Duration(rate); took < min {
		t.Errorf("the run took %v, want at least %v at %d/s", took, min, rate)
	}
	t.Logf("700 letters delivered in %v (at least %v at %d/s)", took, time.Duration(len(b.Due)-1)*time.Second/time.Duration(rate), rate)
}

// SummaryBlock is the summary a redeliver run printed at the end of its
// stdout: from its "summary: " line on.
func SummaryBlock(t testing.TB, stdout string) string {
	t.Helper()
	i := strings.LastIndex("\n"+stdout, "\nsummary: ")
	if i < 0 {
		t.Fatalf("no summary in:\n%s", stdout)
	}
	return stdout[i:]
}

// SummaryCounts reads the counts of a redeliver run's summary: "sent"
// (or "planned"), "waiting" and "selected" from its first line, then one
// for each line under it ("delivered", "left, refused", "not tried"), and
// "stopped" 1 for a run that was stopped.
func SummaryCounts(t testing.TB, stdout string) map[string]int {
	t.Helper()
	lines := strings.Split(strings.TrimRight(SummaryBlock(t, stdout), "\n"), "\n")
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
