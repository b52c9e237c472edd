package deadletter

import (
	"context"
	"errors"
	"time"

	"github.com/grantretry/grantretry"
)

// ErrLate matches the error of a redelivery that was not sent because the
// letter is late (see [Late]): its work missed the closing time
// ([grantretry.WithClosingTime]) by which the funder had to have it. The
// error names the letter, its submission and the time it was due by.
// Whether a funder still takes a submission after its closing time is a
// person's question, not a retry's; [SendLate] is the explicit choice to
// send it.
var ErrLate = errors.New("grantretry: the letter is late")

// sendLateKey marks a context whose redelivery may send a late letter.
type sendLateKey struct{}

// SendLate returns a copy of ctx under which [Redeliver] (and so
// [Dir.Redeliver] and fleet.Letters.Redeliver) sends a late letter rather
// than refusing it with [ErrLate], and fleet.Letters.Claim hands late
// letters out: the operator's explicit decision that the funder takes the
// submission after its closing time (an extension granted, a portal that
// accepts late work). Give it to the redelivery of the letters the funder
// agreed to, not to a loop over all of them.
func SendLate(ctx context.Context) context.Context {
	return context.WithValue(ctx, sendLateKey{}, true)
}

// SendsLate reports whether ctx comes from [SendLate]: the explicit choice
// to send late letters.
func SendsLate(ctx context.Context) bool {
	v, _ := ctx.Value(sendLateKey{}).(bool)
	return v
}

// Late reports whether l is late at now: its call or a redelivery of it
// was late ([grantretry.Letter].Late), or its closing time
// ([grantretry.Letter].DueBy) is before now.
func Late(l *grantretry.Letter, now time.Time) bool {
	return l.Late || (!l.DueBy.IsZero() && l.DueBy.Before(now))
}

// late returns the ErrLate error of l if it is late at now and ctx does
// not send late letters, nil otherwise.
func late(ctx context.Context, l *grantretry.Letter, now time.Time) error {
	if !Late(l, now) || SendsLate(ctx) {
		return nil
	}
	return &lateError{id: l.ID, submission: l.SubmissionID, dueBy: l.DueBy}
}

// lateError is the error of a late letter; it matches ErrLate.
type lateError struct {
	id, submission string
	dueBy          time.Time
}

func (e *lateError) Error() string {
	return "grantretry: letter " + lateText(e.id, e.submission, e.dueBy) +
		": not sent: the funder must agree to take it late (SendLate)"
}

func (e *lateError) Is(target error) bool { return target == ErrLate }

// lateText says which letter is late and since when: "ID (submission S)
// was due by T", without the parts the letter does not have.
func lateText(id, submission string, dueBy time.Time) string {
	s := id
	if submission != "" {
		s += " (submission " + submission + ")"
	}
	if dueBy.IsZero() {
		return s + " is late"
	}
	return s + " was due by " + dueBy.UTC().Format(time.RFC3339)
}
