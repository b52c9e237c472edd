package deadletter

import (
	"strings"

	"github.com/grantretry/grantretry"
)

// Refused reports whether the funder's last answer to l was a refusal:
// its verdict ([grantretry.Letter].Reason) was terminal, a status in the
// terminal set or one no rule knows ("terminal:422", "unclassified:418"),
// so that the same request meets it again. A letter redelivered and
// refused keeps waiting (a person must decide: correct the work and send
// it anew, or retire the letter); the operator's tools leave it out of a
// run over every letter unless asked.
func Refused(l *grantretry.Letter) bool {
	return strings.HasPrefix(l.Reason, "terminal:") || strings.HasPrefix(l.Reason, "unclassified:")
}
