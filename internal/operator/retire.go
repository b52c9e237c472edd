package operator

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/grantretry/grantretry/deadletter"
)

// RetireFunc retires the waiting letter id with reason, as
// deadletter.Dir.RetireWith and fleet.Letters.RetireWith do, and returns
// its record.
type RetireFunc func(id, reason string) (*deadletter.Retirement, error)

// UsageError is a retirement called wrongly: the tool reports it as its
// own usage errors (exit status 2), and nothing was retired.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// CheckRetire returns the UsageError of a retirement of ids with reason
// that must not start: no letter named, or a reason that is empty or only
// white space, which would leave no record of why.
func CheckRetire(ids []string, reason string) error {
	if len(ids) == 0 {
		return UsageError{errors.New("retire wants the ids of the letters to retire")}
	}
	if strings.TrimSpace(reason) == "" {
		return UsageError{errors.New("-reason is required: say why the letters must not be sent again, for the record")}
	}
	return nil
}

// Retire retires the letters ids (each once, however often named) with
// reason through retire, one after another, and writes a line for each:
// "retired: letter ID (submission S): REASON" to stdout, or "not retired:
// letter ID: why" to stderr; then "retired N of M letters" to stdout. A
// letter that is not retired (no such waiting letter, one being
// redelivered, one retired already) does not stop the others.
//
// It returns nil when every letter was retired (exit status 0), a
// UsageError from CheckRetire before retiring any (exit status 2), and
// otherwise an error that says how many were not retired (exit status 1).
func Retire(stdout, stderr io.Writer, ids []string, reason string, retire RetireFunc) error {
	if err := CheckRetire(ids, reason); err != nil {
		return err
	}
	ids = dedupeIDs(ids)
	retired := 0
	for _, id := range ids {
		r, err := retire(id, reason)
		if err != nil {
			fmt.Fprintf(stderr, "not retired: letter %s: %s\n", EscapeControl(id), EscapeControl(whyNotRetired(id, err)))
			continue
		}
		retired++
		name := "letter " + EscapeControl(id)
		if r != nil && r.Letter != nil {
			name = LetterName(r.Letter)
		}
		fmt.Fprintf(stdout, "retired: %s: %s\n", name, EscapeControl(reason))
	}
	fmt.Fprintf(stdout, "retired %d of %s\n", retired, countNoun(len(ids), "letter"))
	if retired < len(ids) {
		return fmt.Errorf("%d of %s not retired", len(ids)-retired, countNoun(len(ids), "letter"))
	}
	return nil
}

// whyNotRetired is err's message without what the line already says:
// everything up to "letter ID not retired: " (the library's prefixes, and
// the sentinel's text an error such as deadletter.ErrInFlight leads with),
// or, in a message without it, the library's prefixes.
func whyNotRetired(id string, err error) string {
	msg := err.Error()
	for _, lead := range []string{"letter " + id + " not retired again: ", "letter " + id + " not retired: "} {
		if _, rest, ok := strings.Cut(msg, lead); ok {
			return rest
		}
	}
	for _, prefix := range []string{"grantretry: fleet: ", "grantretry: "} {
		msg = strings.TrimPrefix(msg, prefix)
		msg = strings.ReplaceAll(msg, ": "+prefix, ": ")
	}
	return strings.TrimPrefix(msg, "letter "+id+": ")
}

func dedupeIDs(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
