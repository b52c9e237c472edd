package deadletter

import (
	"net/http"

	"github.com/grantretry/grantretry"
)

// The rules below are the root package's, for the requests a Transport
// sends; a letter must meet them to be redelivered through one.
// TestRedeliveryRulesAgreeWithTheTransport holds them together.

// idempotentMethod reports whether RFC 9110 section 9.2.2 makes the method
// safe to repeat without a key.
func idempotentMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// validSubmissionID reports whether a Transport accepts id from
// grantretry.WithSubmissionID: 1 to grantretry.MaxSubmissionIDLen bytes,
// without control characters.
func validSubmissionID(id string) bool {
	return id != "" && len(id) <= grantretry.MaxSubmissionIDLen && !hasControl(id)
}

// hasControl reports whether s holds an ASCII control character other than
// horizontal tab: CR and LF among them, which would split a header.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}
