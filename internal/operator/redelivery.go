package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// Both redelivery commands say what became of a letter in the words
// below, so that an operator reads one result one way whichever tool sent
// it.

// LetterName names l as a redelivery's lines do: its ID, and its
// submission id when it has one, which is what the pipeline and the
// funder know it by.
func LetterName(l *grantretry.Letter) string {
	if l.SubmissionID == "" {
		return "letter " + l.ID
	}
	return "letter " + l.ID + " (submission " + EscapeControl(l.SubmissionID) + ")"
}

// Answer is what the funder answered a redelivery, and how the
// redelivering Transport ended it: "answered 201 Created (succeeded after
// 1 attempt)".
func Answer(rec deadletter.Redelivery) string {
	s := "answered " + strconv.Itoa(rec.Status)
	if text := http.StatusText(rec.Status); text != "" {
		s += " " + text
	}
	if rec.Disposition != "" {
		s += fmt.Sprintf(" (%s after %s)", rec.Disposition, countNoun(rec.Attempts, "attempt"))
	}
	return s
}

// Redelivered is the line of a letter the funder now has, and says so
// when nothing was sent because the reconciler found it there, or when
// the funder answered that the letter's work was already applied.
func Redelivered(l *grantretry.Letter, rec deadletter.Redelivery) string {
	s := "redelivered " + LetterName(l) + ": " + Answer(rec)
	switch {
	case strings.HasPrefix(rec.Note, ReconciledNote):
		s += "; " + ReconciledNote
	case strings.HasPrefix(rec.Note, AppliedNote):
		s += "; " + AppliedNote
	}
	return s
}

// NotRedelivered is the line of a letter whose redelivery the funder
// answered with a refusal or a failure (400 or more); where says where the
// letter is left.
func NotRedelivered(l *grantretry.Letter, rec deadletter.Redelivery, where string) string {
	return LetterName(l) + " not redelivered: " + Answer(rec) + "; " + where
}

// DueAt is when l is due at now, as the tools show it: "now", or its
// NotBefore (the time the funder said it will take the request).
func DueAt(l *grantretry.Letter, now time.Time) string {
	if deadletter.Due(l, now) {
		return "now"
	}
	return l.NotBefore.UTC().Format(time.RFC3339)
}

// SortByDue puts the late letters first (deadletter.Late: they missed
// their closing time), then the letters due at now, each in the order they
// came (oldest first), then the others by when they are due: the order
// both tools list letters in.
func SortByDue(letters []*grantretry.Letter, now time.Time) {
	rank := func(l *grantretry.Letter) int {
		switch {
		case deadletter.Late(l, now):
			return 0
		case deadletter.Due(l, now):
			return 1
		}
		return 2
	}
	slices.SortStableFunc(letters, func(a, b *grantretry.Letter) int {
		ra, rb := rank(a), rank(b)
		if ra != rb || ra < 2 {
			return ra - rb
		}
		return a.NotBefore.Compare(b.NotBefore)
	})
}

// LateMark is l's LATE column at now, as both tools list it: "late" for a
// late letter (deadletter.Late), "-" for any other.
func LateMark(l *grantretry.Letter, now time.Time) string {
	if deadletter.Late(l, now) {
		return "late"
	}
	return "-"
}

// dueByText says when l was due: "was due by T", or "is late" for a letter
// marked late without a closing time.
func dueByText(l *grantretry.Letter) string {
	if l.DueBy.IsZero() {
		return "is late"
	}
	return "was due by " + l.DueBy.UTC().Format(time.RFC3339)
}

// Late is the line of a letter a run over every letter left because it is
// late: "late: letter ID (submission S) was due by T".
func Late(l *grantretry.Letter) string {
	return "late: " + LetterName(l) + " " + dueByText(l)
}

// NotSentLate is the error of a letter named to a command that is late
// (deadletter.ErrLate); flag names the flag that sends it anyway, where
// says where the letter is left.
func NotSentLate(l *grantretry.Letter, flag, where string) error {
	why := "it is late" // judged late, with no closing time to name
	if !l.DueBy.IsZero() {
		why = "it " + dueByText(l) + ", and is late"
	}
	return fmt.Errorf("%s not sent: %s: send it only if the funder agreed to take it late, with %s; %s",
		LetterName(l), why, flag, where)
}

// NotDue is the line of a letter a run over every letter left for later:
// "not due: letter ID (submission S) until T".
func NotDue(l *grantretry.Letter) string {
	return "not due: " + LetterName(l) + " until " + l.NotBefore.UTC().Format(time.RFC3339)
}

// NotSentNotDue is the error of a letter named to a command that is not
// due (deadletter.ErrNotYet); early names the flag that sends it anyway,
// where says where the letter is left.
func NotSentNotDue(l *grantretry.Letter, early, where string) error {
	return fmt.Errorf("%s not sent: not due until %s: the funder said it will not take it before then; give %s to send it anyway; %s",
		LetterName(l), l.NotBefore.UTC().Format(time.RFC3339), early, where)
}

// NotSentAmbiguous is the error of a letter a command did not send
// because its last attempt, or an earlier redelivery of it, may have been
// applied (deadletter.ErrAmbiguous): the command cannot ask the funder.
// why says what made it ambiguous, "" for the letter's own last attempt;
// askWith names the library call that can ask; where says where the
// letter is left.
func NotSentAmbiguous(l *grantretry.Letter, why, askWith, where string) error {
	if why == "" {
		why = "its last attempt may have been applied"
	}
	return fmt.Errorf("%s not sent: %s; ask the funder first (%s with a reconciler), or pass -trust-key if it honours Idempotency-Key; %s", LetterName(l), why, askWith, where)
}

// RedeliveryRecord is the record of a redelivery that got resp, with the
// redelivering Transport's outcome when it has one, and the note that a
// reconciler answered for the funder, or that the funder answered that
// the letter's work was already applied.
func RedeliveryRecord(resp *http.Response, note string) deadletter.Redelivery {
	out, ok := grantretry.OutcomeOf(resp)
	first := ""
	switch {
	case deadletter.Reconciled(resp):
		first = ReconciledNote
	case ok && out.StopReason == grantretry.StopAlreadyApplied:
		first = AppliedNote
	}
	note = strings.Join(slices.DeleteFunc([]string{first, note}, func(s string) bool { return s == "" }), "; ")
	rec := deadletter.Redelivery{Status: resp.StatusCode, Note: note}
	if ok {
		rec.Disposition, rec.Attempts = out.Disposition, out.Attempts
	}
	return rec
}

// ReconciledNote is the note of a redelivery that the reconciler answered:
// nothing was sent.
const ReconciledNote = "reconciled: the funder already has the submission; nothing was sent"

// AppliedNote is the note of a redelivery that the funder answered with
// its word that the letter's work was already applied
// (grantretry.StopAlreadyApplied): the letter is delivered, whatever the
// answer's status. fleet.Letters.Redeliver writes the same note.
const AppliedNote = "already applied: the funder answered that an earlier attempt of the letter was applied"

// ReadRules reads a JSON array of grantretry.Rule from path, as the
// tools' -rules flag takes it: at least one rule, nothing after the array,
// no field a Rule does not have, and no set that grantretry.CheckRules
// refuses. Its errors start "grantretry: rules file <path>: ", and match
// what they wrap (os.ErrNotExist, grantretry.ErrInvalidRule).
func ReadRules(path string) ([]grantretry.Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, &rulesError{path: path, err: err}
	}
	var rules []grantretry.Rule
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&rules); err != nil {
		return nil, &rulesError{path: path, err: fmt.Errorf("not a JSON array of rules: %w", err)}
	}
	switch _, err := d.Token(); {
	case rules == nil:
		return nil, &rulesError{path: path, err: errors.New("null is not a JSON array of rules")}
	case err != io.EOF:
		return nil, &rulesError{path: path, err: errors.New("more follows after the array of rules: give one array")}
	case len(rules) == 0:
		return nil, &rulesError{path: path, err: errors.New("no rule in it: give at least one, or leave -rules out")}
	}
	if err := grantretry.CheckRules(rules...); err != nil {
		return nil, &rulesError{path: path, err: err}
	}
	return rules, nil
}

// rulesError is ReadRules' error: about the file at path, and err's
// message without its own "grantretry: ".
type rulesError struct {
	path string
	err  error
}

func (e *rulesError) Error() string {
	return "grantretry: rules file " + e.path + ": " + strings.TrimPrefix(e.err.Error(), "grantretry: ")
}

func (e *rulesError) Unwrap() error { return e.err }

// errCannotAsk is CannotAsk's answer.
var errCannotAsk = errors.New("grantretry: this command cannot ask the funder whether it has the submission: redeliver from the pipeline, with its reconciler, or pass -trust-key if the funder honours Idempotency-Key")

// CannotAsk is the reconciler of a command's redelivering Transport when
// the operator did not pass -trust-key: it cannot tell. After an attempt
// that may have been applied, the Transport then sends nothing more, and
// the redelivery ends unreconciled (grantretry.StopUnreconciled), its
// letter ambiguous, instead of being sent again to a funder that may
// ignore the key.
func CannotAsk(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
	return nil, errCannotAsk
}

// Refused is the line of a letter a run over every letter left because
// the funder's last answer to it was a refusal (deadletter.Refused):
// "refused: letter ID (submission S) was last answered 422 (terminal:422);
// -include-refused sends it".
func Refused(l *grantretry.Letter) string {
	return "refused: " + LetterName(l) + " was last answered " + LastAnswer(l) + " (" + EscapeControl(l.Reason) +
		"); -include-refused sends it, or retire it"
}

// Ambiguous is the line of a letter a run over every letter left because
// its last attempt may have been applied and it carries a key:
// "ambiguous: letter ID (submission S): ...".
func Ambiguous(l *grantretry.Letter) string {
	return "ambiguous: " + LetterName(l) + ": its last attempt may have been applied; ask the funder first, or pass -trust-key if it honours Idempotency-Key"
}

// Elsewhere is the line of a letter a run over every letter left because
// it is another's (ErrElsewhere).
func Elsewhere(l *grantretry.Letter) string {
	return "another's: " + LetterName(l) + ": another process or worker holds it, or it left the waiting set since it was listed"
}

// LastAnswer is l's last answer as list shows it: its status ("503"),
// "422 refused" when the funder refused it (deadletter.Refused), its
// error without the library's "grantretry: " and cut to 40 characters,
// or "-".
func LastAnswer(l *grantretry.Letter) string {
	switch {
	case l.LastStatus != 0 && deadletter.Refused(l):
		return strconv.Itoa(l.LastStatus) + " refused"
	case l.LastStatus != 0:
		return strconv.Itoa(l.LastStatus)
	}
	msg := DropLibraryPrefix(l.LastError)
	switch {
	case msg == "":
		return "-"
	case utf8.RuneCountInString(msg) > 40:
		return EscapeControl(string([]rune(msg)[:37])) + "..."
	}
	return EscapeControl(msg)
}

// RetiredState says when a letter was retired, by whom and why: "retired
// at T by NAME: REASON".
func RetiredState(r *deadletter.Retirement) string {
	return "retired at " + showTime(r.RetiredAt) + " by " + EscapeControl(r.RetiredBy) + ": " + EscapeControl(r.Reason)
}
