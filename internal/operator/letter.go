package operator

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// WriteLetter prints every field of l, and the record of its redelivery if
// rec is not nil, as "deadletter show" does: one field a line, the text
// escaped so that no byte of a letter drives the terminal, and the body
// as text when it is printable text of at most 4096 bytes.
func WriteLetter(w io.Writer, l *grantretry.Letter, rec *deadletter.Redelivery) error {
	return writeLetter(w, l, LetterState(rec), rec == nil)
}

// writeLetter is WriteLetter of a letter in state, which is waiting or
// not.
func writeLetter(w io.Writer, l *grantretry.Letter, state string, waiting bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// A letter's text is the caller's and the funder's: shown escaped, so
	// that no byte of it drives the terminal (a C1 control in Latin-1).
	field := func(name string, value any) {
		fmt.Fprintf(tw, "%s\t%s\n", name, EscapeControl(fmt.Sprint(value)))
	}
	field("letter", l.ID)
	field("state", state)
	field("version", l.Version)
	field("created", showTime(l.Created))
	if waiting {
		field("due", DueAt(l, time.Now()))
	} else {
		field("not before", showTime(l.NotBefore))
	}
	if !l.DueBy.IsZero() {
		field("due by", showTime(l.DueBy))
	}
	if l.Late || (waiting && deadletter.Late(l, time.Now())) {
		field("late", "yes: it missed its closing time; the funder must agree to take it late")
	}
	field("disposition", l.Disposition)
	field("stop reason", dashIfEmpty(l.StopReason))
	field("reason", dashIfEmpty(l.Reason))
	field("attempts", l.Attempts)
	if l.Ambiguous {
		field("ambiguous", "yes: the last attempt may have been applied; ask the funder before sending it again")
	}
	field("first attempt", showTime(l.FirstAttempt))
	field("last attempt", showTime(l.LastAttempt))
	field("last status", l.LastStatus)
	field("last error", dashIfEmpty(l.LastError))
	field("method", l.Method)
	field("url", l.URL)
	field("host", dashIfEmpty(l.Host))
	field("submission id", dashIfEmpty(l.SubmissionID))
	field("idempotency key", dashIfEmpty(l.IdempotencyKey))
	field("correlation id", dashIfEmpty(l.CorrelationID))
	writeHeaderLines(tw, "header", l.Header)
	field("secret headers", dashIfEmpty(strings.Join(l.Redacted, ", ")))
	field("secret query", dashIfEmpty(strings.Join(l.RedactedQuery, ", ")))
	field("body", bodySummary(l))
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeBodyText(w, l)
}

// LetterState says whether a letter waits, or when it was redelivered and
// with what answer.
func LetterState(rec *deadletter.Redelivery) string {
	if rec == nil {
		return "waiting"
	}
	s := "redelivered " + showTime(rec.Time) + ", " + Answer(*rec)
	if rec.Note != "" {
		s += "; " + rec.Note
	}
	return s
}

func writeHeaderLines(tw io.Writer, label string, h http.Header) {
	names := slices.Sorted(maps.Keys(h))
	if len(names) == 0 {
		fmt.Fprintf(tw, "%s\t-\n", label)
	}
	for _, name := range names {
		for _, v := range h[name] {
			fmt.Fprintf(tw, "%s\t%s: %s\n", label, EscapeControl(name), EscapeControl(v))
			label = ""
		}
	}
}

func bodySummary(l *grantretry.Letter) string {
	if l.BodyOmitted != "" {
		return "not kept: " + l.BodyOmitted
	}
	return fmt.Sprintf("%d bytes, sha256 %s", l.BodyBytes, dashIfEmpty(l.BodySHA256))
}

// maxShownBody bounds the body show prints as text.
const maxShownBody = 4096

func writeBodyText(w io.Writer, l *grantretry.Letter) error {
	if len(l.Body) == 0 {
		return nil
	}
	if len(l.Body) > maxShownBody || !printable(l.Body) {
		_, err := fmt.Fprintf(w, "\n(the body is not text of at most %d bytes: -body writes it out)\n", maxShownBody)
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", strings.TrimRight(string(l.Body), "\n"))
	return err
}

// printable reports whether b is UTF-8 text that is safe on a terminal:
// no control characters but tab and line ends, so no escape sequences.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

func showTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func dashIfEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
