package operator

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Summary is what a redeliver run did, as both tools print it at its end
// (and when a signal stops it): how many letters were waiting, selected
// and sent, what the funder answered, what is left and why.
type Summary struct {
	DryRun   bool // the run planned its letters and sent nothing
	Waiting  int  // letters waiting in the store when the run listed them
	Selected int  // letters the run chose to send: named, or chosen by -all or -submission
	Sent     int  // letters handed to the redelivering client (planned, in a dry run)

	Delivered      int            // the funder has them
	DeliveredBy    map[string]int // by answer: "answered 201 Created", "reconciled", "already applied", "answered 201 Created, not recorded"
	NotRecorded    int            // of those delivered, the funder has them but they could not be recorded as redelivered
	NotDelivered   int            // sent, and not delivered
	NotDeliveredBy map[string]int // by answer: "answered 503 Service Unavailable", "no answer"
	NotSent        int            // named letters refused, letters that could not be read, and letters that cannot be sent
	NotSentBy      map[string]int // by why: "not due", "late", "ambiguous", "no such letter", "could not be read", "cannot be sent"

	LeftRefused   int       // -all's selection left them: the funder refused them
	LeftNotDue    int       // not due yet
	NextDue       time.Time // when the first of those is due
	LeftLate      int       // late
	LeftAmbiguous int       // ambiguous, with a key
	LeftElsewhere int       // another process or worker holds them, or they left since listed

	NotTried int    // selected and not begun: the run stopped, or their host's breaker was open
	Stopped  string // what stopped the run ("interrupt (SIGINT)"); "" if it ran to its end
}

func (s *Summary) addDelivered(why string) {
	s.Delivered++
	s.DeliveredBy = addTo(s.DeliveredBy, why)
}

func (s *Summary) addNotDelivered(why string) {
	s.NotDelivered++
	s.NotDeliveredBy = addTo(s.NotDeliveredBy, why)
}

func (s *Summary) addNotSent(why string) {
	s.NotSent++
	s.NotSentBy = addTo(s.NotSentBy, why)
}

func addTo(m map[string]int, key string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[key]++
	return m
}

// Failed reports whether the run fails (exit status 1): a letter sent was
// not delivered, or delivered and not recorded, a named letter was not
// sent, a letter could not be read or sent, or the run was stopped.
func (s *Summary) Failed() bool {
	return s.NotDelivered > 0 || s.NotRecorded > 0 || s.NotSent > 0 || s.Stopped != "" || s.NotTried > 0
}

// Write prints the summary: its first line, then one line for each count
// that is not zero, "delivered:" always (but in a dry run, which delivers
// nothing).
func (s *Summary) Write(w io.Writer) error {
	var b strings.Builder
	verb := "sent"
	if s.DryRun {
		verb = "planned"
	}
	fmt.Fprintf(&b, "summary: %s waiting, %d selected, %d %s\n", countNoun(s.Waiting, "letter"), s.Selected, s.Sent, verb)
	line := func(n int, what, why string) {
		if n == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s: %d", what, n)
		if why != "" {
			fmt.Fprintf(&b, " (%s)", why)
		}
		b.WriteByte('\n')
	}
	if !s.DryRun {
		fmt.Fprintf(&b, "  delivered: %d", s.Delivered)
		if s.Delivered > 0 {
			fmt.Fprintf(&b, " (%s)", breakdown(s.DeliveredBy))
		}
		b.WriteByte('\n')
		line(s.NotDelivered, "not delivered", breakdown(s.NotDeliveredBy))
	}
	line(s.NotSent, "not sent", breakdown(s.NotSentBy))
	line(s.LeftRefused, "left, refused", "the funder refused them; -include-refused sends them, or retire them")
	next := ""
	if !s.NextDue.IsZero() {
		next = "the next is due at " + s.NextDue.UTC().Format(time.RFC3339)
	}
	line(s.LeftNotDue, "left, not due", next)
	line(s.LeftLate, "left, late", "they missed their closing time; -late sends them if the funder agreed")
	line(s.LeftAmbiguous, "left, ambiguous", "ask the funder first, or -trust-key if it honours Idempotency-Key")
	line(s.LeftElsewhere, "left, another's", "another process or worker holds them, or they left since listed")
	line(s.NotTried, "not tried", "")
	if s.Stopped != "" {
		fmt.Fprintf(&b, "  stopped: %s; the letters not tried stay waiting\n", s.Stopped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// breakdown is "answered 201 Created: 680; reconciled: 10": the most
// first, then by name.
func breakdown(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, "; ")
}
