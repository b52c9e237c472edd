package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// ListOptions are the list command's flags.
type ListOptions struct {
	JSON       bool      // -json: a JSON array of the letters, without their bodies
	Bodies     bool      // with JSON, the letters' bodies too, as grantretry-fleet's -json prints them
	Submission string    // -submission: the letters of one submission only
	Now        time.Time // the time letters are judged due and late at; the zero time: now
}

// List prints the letters waiting in s, as both tools' list commands do:
// late first, then due now, then by when they are due (SortByDue), as a
// table with a footer that counts them (late, refused, ambiguous, not
// due, and when the next is due), or with JSON as a JSON array of the
// letters without their bodies (with them, if o.Bodies; "[]" when there
// are none). Letters that could not be read are not skipped silently: the
// others are listed, and the error about those is returned.
func List(ctx context.Context, w io.Writer, s Store, o ListOptions) error {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	letters, listErr := s.Waiting(ctx)
	if o.Submission != "" {
		var mine []*grantretry.Letter
		for _, l := range letters {
			if l.SubmissionID == o.Submission {
				mine = append(mine, l)
			}
		}
		letters = mine
	}
	SortByDue(letters, now)
	var err error
	if o.JSON {
		err = writeLettersJSON(w, letters, o.Bodies)
	} else {
		err = writeLetterTable(w, letters, s.Where(), now)
	}
	return errors.Join(listErr, err)
}

func writeLettersJSON(w io.Writer, letters []*grantretry.Letter, bodies bool) error {
	out := make([]grantretry.Letter, 0, len(letters))
	for _, l := range letters {
		c := *l
		if !bodies {
			c.Body = nil
		}
		out = append(out, c)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeLetterTable(w io.Writer, letters []*grantretry.Letter, where string, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(letters) > 0 {
		fmt.Fprintln(tw, "ID\tSUBMISSION\tDUE\tLATE\tAMBIGUOUS\tATTEMPTS\tLAST ANSWER\tCREATED\tMETHOD\tURL")
	}
	for _, l := range letters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", EscapeControl(l.ID), EscapeControl(dashIfEmpty(l.SubmissionID)),
			DueAt(l, now), LateMark(l, now), yesOrDash(l.Ambiguous), l.Attempts, LastAnswer(l), showTime(l.Created),
			EscapeControl(l.Method), EscapeControl(l.URL))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, ListFooter(letters, where, now))
	return err
}

func yesOrDash(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

// ListFooter is the line under the list of letters: "N letters waiting
// WHERE: L late, R refused, A ambiguous, D not due (next due at T)", the
// parts that are zero left out.
func ListFooter(letters []*grantretry.Letter, where string, now time.Time) string {
	var late, refused, ambiguous, notDue int
	var next time.Time
	for _, l := range letters {
		if deadletter.Late(l, now) {
			late++
		}
		if deadletter.Refused(l) {
			refused++
		}
		if l.Ambiguous {
			ambiguous++
		}
		if !deadletter.Due(l, now) {
			notDue++
			if next.IsZero() || l.NotBefore.Before(next) {
				next = l.NotBefore
			}
		}
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(late, "late")
	add(refused, "refused")
	add(ambiguous, "ambiguous")
	add(notDue, "not due (next due at "+showTime(next)+")")
	s := countNoun(len(letters), "letter") + " waiting " + where
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s
}

// Show prints letter id of s, as both tools' show commands do: every
// field (WriteLetter), with the record of its redelivery or of its
// retirement (who, when, why) if it left the waiting set; with body, its
// raw body and nothing else. The error matches fs.ErrNotExist when s has
// no such letter.
func Show(ctx context.Context, w io.Writer, s Store, id string, body bool) error {
	found, err := s.Find(ctx, id)
	if err != nil {
		return err
	}
	l := found.Letter
	if body {
		if l.BodyOmitted != "" {
			return fmt.Errorf("letter %s: its body was not kept (%s)", l.ID, l.BodyOmitted)
		}
		_, err := w.Write(l.Body)
		return err
	}
	return WriteFound(w, found)
}

// WriteFound prints the letter found as WriteLetter does; a retired
// letter's state is its retirement: when, by whom and why.
func WriteFound(w io.Writer, found Found) error {
	if found.Retirement == nil {
		return WriteLetter(w, found.Letter, found.Redelivery)
	}
	return writeLetter(w, found.Letter, RetiredState(found.Retirement), false)
}

// RetireFrom retires the letters ids of s with reason, as Retire does
// (its lines, its counts, its error and exit statuses), through
// s.Retire with o.
func RetireFrom(ctx context.Context, stdout, stderr io.Writer, s Store, ids []string, reason string, o deadletter.RetireOptions) error {
	return Retire(stdout, stderr, ids, reason, func(id, reason string) (*deadletter.Retirement, error) {
		return s.Retire(ctx, id, reason, o)
	})
}
