package operator

import (
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// A letter named to a command that is late is refused with what makes it
// late, said once: its closing time when it has one, or that it was
// judged late when it has none.
func TestNotSentLateSaysWhyOnce(t *testing.T) {
	due := time.Date(2026, 3, 1, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		dueBy time.Time
		want  string
	}{
		{"with_a_closing_time", due, "letter L1 (submission S1) not sent: it was due by 2026-03-01T17:00:00Z, and is late: send it only if the funder agreed to take it late, with -late; it stays"},
		{"judged_late_without_one", time.Time{}, "letter L1 (submission S1) not sent: it is late: send it only if the funder agreed to take it late, with -late; it stays"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &grantretry.Letter{ID: "L1", SubmissionID: "S1", DueBy: tc.dueBy, Late: true}
			got := NotSentLate(l, "-late", "it stays").Error()
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
