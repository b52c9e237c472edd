package grantretry

import (
	"context"
	"net/http"
	"time"
)

// LetterVersion is the format version of a Letter as this package writes
// it.
const LetterVersion = 1

// Letter is a dead letter: a call that ended DeadLetter or CircuitOpen,
// which is work the pipeline still owes. It holds everything needed to
// send the call again except its secrets: the headers and query parameters
// that carry credentials are left out (and named in Redacted), so the
// client that redelivers it supplies its own. Its JSON form is the durable one; the
// field names are stable. A Letter is plain data: safe to share once
// written, not for concurrent writes.
type Letter struct {
	Version int `json:"version"`
	// ID names the letter: the UTC time it was written and a random
	// suffix, safe as a file name and sortable by time.
	ID          string      `json:"id"`
	Disposition Disposition `json:"disposition"`
	StopReason  string      `json:"stop_reason"`
	Reason      string      `json:"reason"` // the verdict on the last attempt, "" if none was made

	Method string `json:"method"`
	// URL is the request's URL without user info or fragment, and without
	// the query parameters that carry secrets.
	URL string `json:"url"`
	// Header is the caller's request header without the headers that carry
	// secrets, and without Idempotency-Key and X-Correlation-ID, which
	// have fields of their own.
	Header http.Header `json:"header,omitempty"`
	// Redacted names the headers and query parameters left out because
	// they carry secrets, so an operator knows what the redelivering
	// client must supply.
	Redacted []string `json:"redacted,omitempty"`
	// Body is the request body, byte for byte as it was sent (base64 in
	// JSON); BodySHA256 is its hex SHA-256 and BodyBytes its length.
	Body       []byte `json:"body,omitempty"`
	BodySHA256 string `json:"body_sha256"`
	BodyBytes  int64  `json:"body_bytes"`
	// BodyOmitted says why Body is missing from a request that had one (it
	// could not be read again); such a letter cannot be redelivered.
	BodyOmitted string `json:"body_omitted,omitempty"`

	IdempotencyKey string `json:"idempotency_key,omitempty"`
	CorrelationID  string `json:"correlation_id"`
	SubmissionID   string `json:"submission_id,omitempty"`

	Attempts   int    `json:"attempts"`
	LastStatus int    `json:"last_status"`          // 0 if no attempt obtained a response
	LastError  string `json:"last_error,omitempty"` // redacted, like the audit trail's
	// FirstAttempt and LastAttempt are when the first and the last attempt
	// were sent, zero if none was; Created is when the call ended. All
	// are read from the Transport's Clock.
	FirstAttempt time.Time `json:"first_attempt"`
	LastAttempt  time.Time `json:"last_attempt"`
	Created      time.Time `json:"created"`
}

// DeadLetterSink receives every call that ends DeadLetter or CircuitOpen,
// before RoundTrip returns. PutDeadLetter must store the letter durably
// before it returns nil: the Transport reports the letter as kept. Its
// context is the caller's, detached from the caller's cancellation, so that
// a caller giving up never drops a letter. A sink must be safe for
// concurrent use.
type DeadLetterSink interface {
	PutDeadLetter(ctx context.Context, l *Letter) error
}
