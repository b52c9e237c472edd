package grantretry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// LetterVersion is the format version of a Letter as this package writes
// it. Version 2 added "raw" and "header_raw", which keep, byte for byte,
// the values that are not valid UTF-8 (see Letter.MarshalJSON); version 3
// added "not_before" (see Letter.NotBefore); version 4 added "due_by" and
// "late" (see Letter.DueBy). A letter of an earlier version reads as it
// always did, with the fields it lacks zero.
const LetterVersion = 4

// Letter is a dead letter: a call that ended DeadLetter or CircuitOpen,
// which is work the pipeline still owes. It holds everything needed to
// send the call again except its secrets: the headers and query parameters
// that carry credentials are left out (and named in Redacted), so the
// client that redelivers it supplies its own; likewise a body that carries
// credentials (a form, a multipart form or a JSON token request) is left
// out (see BodyOmitted). Its JSON form
// (MarshalJSON) is the durable one; the field names are stable, and every
// byte that was sent survives it. A Letter is plain data: safe to share once
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
	// Host is the request's Host when it was set to other than the URL's
	// host (a funder reached by address, or through a gateway), "" if not.
	Host string `json:"host,omitempty"`
	// Header is the caller's request header without the headers that carry
	// secrets, and without Idempotency-Key and X-Correlation-ID, which
	// have fields of their own.
	Header http.Header `json:"header,omitempty"`
	// Redacted names the headers, and RedactedQuery the query parameters,
	// left out because they carry secrets, so an operator knows what the
	// redelivering client must supply.
	Redacted      []string `json:"redacted,omitempty"`
	RedactedQuery []string `json:"redacted_query,omitempty"`
	// Body is the request body, byte for byte as it was sent (base64 in
	// JSON); BodySHA256 is its hex SHA-256 and BodyBytes its length.
	Body       []byte `json:"body,omitempty"`
	BodySHA256 string `json:"body_sha256"`
	BodyBytes  int64  `json:"body_bytes"`
	// BodyOmitted says why Body is missing from a request that had one:
	// it could not be read again, or it carries credentials (a form, a
	// multipart form or a JSON token request with client_secret, password,
	// refresh_token, assertion, ...: see docs/secrets.md), whose field
	// names the reason quotes, never their values. Such a
	// letter cannot be redelivered as it is: the client that made the call
	// makes it again with its own credentials.
	BodyOmitted string `json:"body_omitted,omitempty"`

	IdempotencyKey string `json:"idempotency_key,omitempty"`
	CorrelationID  string `json:"correlation_id"`
	SubmissionID   string `json:"submission_id,omitempty"`

	Attempts int `json:"attempts"`
	// Ambiguous says the last attempt may have been applied by the funder
	// without its answer saying so: a funder that ignores Idempotency-Key
	// must be asked whether it has the submission before the letter is
	// sent again (see WithReconciler and deadletter.Redeliver).
	Ambiguous  bool   `json:"ambiguous,omitempty"`
	LastStatus int    `json:"last_status"`          // 0 if no attempt obtained a response
	LastError  string `json:"last_error,omitempty"` // redacted, like the audit trail's
	// FirstAttempt and LastAttempt are when the first and the last attempt
	// were sent, zero if none was; Created is when the call ended. All
	// are read from the Transport's Clock.
	FirstAttempt time.Time `json:"first_attempt"`
	LastAttempt  time.Time `json:"last_attempt"`
	Created      time.Time `json:"created"`
	// NotBefore is when the funder said it will take the request, for a
	// call that ended StopOwedLater (a quota, or a Retry-After past the
	// deadline): Outcome.NotBefore. Sending it earlier only meets the
	// quota again, so deadletter.Redeliver refuses it until then. Zero
	// (and absent from the JSON) when the funder gave no time, or the work
	// is owed now.
	NotBefore time.Time `json:"not_before,omitzero"`
	// DueBy is the closing time of the call ([WithClosingTime]): when the
	// funder must have the submission. Zero (and absent from the JSON)
	// when the call had none.
	DueBy time.Time `json:"due_by,omitzero"`
	// Late says the work missed its closing time: the call was late
	// ([Outcome.Late]), or a redelivery of the letter was. A letter whose
	// DueBy has passed is late too, whatever this says;
	// deadletter.Redeliver refuses a late letter without an explicit
	// choice (deadletter.SendLate).
	Late bool `json:"late,omitempty"`
}

// DeadLetterSink receives every call that ends DeadLetter or CircuitOpen,
// before RoundTrip returns. PutDeadLetter must store the letter durably
// before it returns nil: the Transport reports the letter as kept. Its
// context is the caller's, detached from the caller's cancellation, so that
// a caller giving up never drops a letter. A sink must be safe for
// concurrent use.
//
// A sink that could not store the letter where it promised but kept it
// durably elsewhere (a fallback) returns an error with a method
// KeptAt() string naming where: the Transport then reports the error in
// Outcome.RecordErr as it reads, not as a letter lost.
type DeadLetterSink interface {
	PutDeadLetter(ctx context.Context, l *Letter) error
}

// keptElsewhere is the error of a sink that kept the letter in a place
// other than the one it promised (see DeadLetterSink).
type keptElsewhere interface{ KeptAt() string }

// keepsLetter reports whether a call that ended with d is handed to the
// dead-letter sink: the work is still owed. A terminal answer is not (the
// same request would fail again), nor a cancellation (the caller chose to
// stop and knows it).
func keepsLetter(d Disposition) bool { return d == DeadLetter || d == CircuitOpen }

// keepLetter hands the ended call to the dead-letter sink, if there is one
// and the call owes work, and records the result in the outcome. lastErr
// is the call's last cause, nil if it returns a response.
func (c *call) keepLetter(lastErr error) {
	sink := c.t.cfg.letters
	if sink == nil || !keepsLetter(c.out.Disposition) {
		return
	}
	if m := redeliveryOf(c.req.Context()); m != nil && m.letterID != "" {
		// A redelivery still owed stays owed in the letter it sends
		// again: a second letter of the same call could be claimed and
		// sent beside the first.
		c.out.DeadLetterID = m.letterID
		return
	}
	l := c.letter(lastErr)
	if err := sink.PutDeadLetter(context.WithoutCancel(c.ctx), l); err != nil {
		var ke keptElsewhere
		if errors.As(err, &ke) && ke.KeptAt() != "" {
			c.recordFailed(fmt.Errorf("grantretry: dead letter %s: %w", l.ID, c.scrubbed(err)))
			c.out.DeadLetterID = l.ID // kept, where KeptAt says
		} else {
			c.recordFailed(fmt.Errorf("grantretry: dead letter %s not kept: %w", l.ID, c.scrubbed(err)))
		}
		c.observeRecordFailure(recordDeadLetter)
		return
	}
	c.out.DeadLetterID = l.ID
	if m := c.t.met; m != nil {
		m.deadLetters.Add(context.Background(), 1, c.hostOnly(keyDisposition.String(string(c.out.Disposition))))
	}
}

// letter builds the Letter of the ended call, with its secrets left out.
func (c *call) letter(lastErr error) *Letter {
	rd := c.t.cfg.redact
	created := c.t.clock.Now()
	l := &Letter{
		Version:        LetterVersion,
		ID:             created.UTC().Format("20060102T150405.000000000Z") + "-" + NewCorrelationID(),
		Disposition:    c.out.Disposition,
		StopReason:     c.out.StopReason,
		Reason:         c.out.Reason,
		Method:         c.req.Method,
		IdempotencyKey: c.out.IdempotencyKey,
		CorrelationID:  c.out.CorrelationID,
		SubmissionID:   c.out.SubmissionID,
		Attempts:       c.out.Attempts,
		Ambiguous:      c.out.Ambiguous,
		LastStatus:     c.out.Status,
		FirstAttempt:   c.firstSentAt(),
		LastAttempt:    c.lastSentAt(),
		Created:        created,
	}
	if c.out.StopReason == StopOwedLater {
		l.NotBefore = c.out.NotBefore
	}
	l.DueBy, _ = closingTime(c.req.Context())
	l.Late = c.out.Late
	l.URL, l.RedactedQuery = rd.url(c.req.URL)
	if c.req.Host != "" && c.req.Host != c.req.URL.Host {
		l.Host = c.req.Host
	}
	l.Header, l.Redacted = rd.header(c.req.Header)
	if lastErr != nil {
		l.LastError = c.scrub(lastErr)
	}
	c.letterBody(l)
	return l
}

// letterBody puts the request body, byte for byte, into l, or says why it
// cannot.
func (c *call) letterBody(l *Letter) {
	p := &c.p
	var body []byte
	switch {
	case p.empty():
	case !p.replayable():
		l.BodyOmitted = p.whyNotRe
	case len(p.buf) > MaxLetterBody:
		l.BodyOmitted = fmt.Sprintf("body of %d bytes is larger than MaxLetterBody (%d bytes)", len(p.buf), MaxLetterBody)
	case p.buf != nil:
		body = p.buf
	case p.getBody != nil:
		b, err := readLetterBody(p.getBody)
		if err != nil {
			l.BodyOmitted = c.scrub(err)
			break
		}
		body = b
	}
	if why := c.t.cfg.redact.bodyOmitted(c.req.Header, body); why != "" {
		l.BodyOmitted = why
	}
	if l.BodyOmitted != "" {
		l.BodyBytes = p.size
		l.BodySHA256 = p.sum
		return
	}
	sum := sha256.Sum256(body)
	l.Body, l.BodyBytes, l.BodySHA256 = body, int64(len(body)), hex.EncodeToString(sum[:])
}

// readLetterBody reads a fresh copy of the body through getBody, up to
// MaxLetterBody.
func readLetterBody(getBody func() (io.ReadCloser, error)) ([]byte, error) {
	rc, err := getBody()
	if err != nil {
		return nil, fmt.Errorf("GetBody failed: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxLetterBody+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the body through GetBody failed: %v", err)
	case len(b) > MaxLetterBody:
		return nil, fmt.Errorf("body larger than MaxLetterBody (%d bytes)", MaxLetterBody)
	}
	return b, nil
}

// credentialsOmitted is the BodyOmitted of a body with the credential
// fields names: their names, quoted, and never their values.
func credentialsOmitted(names []string) string {
	const maxNames = 8
	shown := names
	more := ""
	if len(names) > maxNames {
		shown, more = names[:maxNames], fmt.Sprintf(" and %d more", len(names)-maxNames)
	}
	quoted := make([]string, len(shown))
	for i, n := range shown {
		if len(n) > 64 {
			n = n[:64] + "..."
		}
		quoted[i] = strconv.Quote(n)
	}
	return "the body carries credentials (" + strings.Join(quoted, ", ") + more +
		"): letters are kept without credentials, so it was not kept; the client that made the call must make it again"
}
