package deadletter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grantretry/grantretry"
)

// ErrNotYet matches the error of a redelivery that was not sent because
// the letter is not due: its NotBefore ([grantretry.Letter].NotBefore), the
// time the funder said it will take the request, is still ahead. The error
// names that time. Sending earlier only meets the funder's quota again;
// [SendEarly] overrides it for one redelivery.
var ErrNotYet = errors.New("grantretry: the letter is not due yet")

// sendEarlyKey marks a context whose redelivery may send a letter before
// its NotBefore.
type sendEarlyKey struct{}

// SendEarly returns a copy of ctx under which [Redeliver] (and so
// [Dir.Redeliver] and fleet.Letters.Redeliver) sends a letter that is not
// yet due, rather than refusing it with [ErrNotYet]: the operator's
// explicit decision, for one letter, that the funder will take it before
// the time it gave (a quota raised, a window ended early). Give it to the
// redelivery of that letter, not to a loop over many.
func SendEarly(ctx context.Context) context.Context {
	return context.WithValue(ctx, sendEarlyKey{}, true)
}

func sendsEarly(ctx context.Context) bool {
	v, _ := ctx.Value(sendEarlyKey{}).(bool)
	return v
}

// Due reports whether l may be redelivered at now: it has no NotBefore, or
// its NotBefore is not after now.
func Due(l *grantretry.Letter, now time.Time) bool {
	return l.NotBefore.IsZero() || !l.NotBefore.After(now)
}

// notYet returns the ErrNotYet error of l if it is not due at now and
// ctx does not send early, nil otherwise.
func notYet(ctx context.Context, l *grantretry.Letter, now time.Time) error {
	if Due(l, now) || sendsEarly(ctx) {
		return nil
	}
	return &notYetError{id: l.ID, until: l.NotBefore, in: l.NotBefore.Sub(now)}
}

// notYetError is the error of a letter not yet due; it matches ErrNotYet.
type notYetError struct {
	id    string
	until time.Time
	in    time.Duration
}

func (e *notYetError) Error() string {
	return fmt.Sprintf("grantretry: letter %s not sent: not due until %s (in %s): the funder said it will not take it before then",
		e.id, e.until.UTC().Format(time.RFC3339), e.in.Round(time.Second))
}

func (e *notYetError) Is(target error) bool { return target == ErrNotYet }
