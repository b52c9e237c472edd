package grantretry

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Audit messages: the first field a reader filters on.
const (
	MsgAttempt     = "grantretry.attempt"     // one per attempt, at INFO
	MsgDisposition = "grantretry.disposition" // one per call: INFO if succeeded, WARN otherwise
	MsgBreaker     = "grantretry.breaker"     // one per breaker state change, at WARN
)

// Audit field names. They are stable: an audit trail written today must be
// readable by the tools of next year.
const (
	FieldCorrelationID  = "correlation_id"
	FieldIdempotencyKey = "idempotency_key"
	FieldSubmissionID   = "submission_id"
	FieldMethod         = "method"
	FieldHost           = "host"        // host[:port] of the URL, never its user info
	FieldPath           = "path"        // escaped path, never the query
	FieldAttempt        = "attempt"     // 1 for the first attempt
	FieldStatus         = "status"      // 0 when no response was obtained
	FieldError          = "error"       // the transport error, redacted; "" when none
	FieldReason         = "reason"      // Classification.Reason of the attempt
	FieldRetryable      = "retryable"   // Classification.Retryable of the attempt
	FieldWait           = "wait"        // the wait before the next attempt, 0 when none follows
	FieldWaitSource     = "wait_source" // "backoff", "retry_after", or "" when none follows
	FieldLatency        = "latency"     // how long the attempt took, in real time even under WithClock
	FieldElapsed        = "elapsed"     // since the call's first attempt
	FieldDisposition    = "disposition"
	FieldAttempts       = "attempts"
	FieldStopReason     = "stop_reason"
	FieldPayloadSHA256  = "payload_sha256" // hex SHA-256 of the request body; "" when not read
	FieldPayloadBytes   = "payload_bytes"  // body length, -1 when not read
	FieldNotReplayable  = "not_replayable" // why the body could not be replayed; "" when it could
	FieldBreaker        = "breaker"        // on breaker lines: the breaker's host, as scheme://host:port
	FieldBreakerFrom    = "from"
	FieldBreakerTo      = "to"
)

// attemptRecord is what one attempt line says.
type attemptRecord struct {
	n          int
	status     int
	err        error
	verdict    Classification
	wait       time.Duration
	waitSource string
	latency    time.Duration
	elapsed    time.Duration
}

// callFields are the fields every line of one call shares.
func (c *call) callFields(extra int) []zapcore.Field {
	u := c.req.URL
	fs := make([]zapcore.Field, 0, 6+extra)
	return append(fs,
		zap.String(FieldCorrelationID, c.out.CorrelationID),
		zap.String(FieldIdempotencyKey, c.out.IdempotencyKey),
		zap.String(FieldSubmissionID, c.out.SubmissionID),
		zap.String(FieldMethod, c.req.Method),
		zap.String(FieldHost, hostOf(u)),
		zap.String(FieldPath, pathOf(u)),
	)
}

func (c *call) logAttempt(a attemptRecord) {
	ce := c.t.log.Check(zap.InfoLevel, MsgAttempt)
	if ce == nil {
		return
	}
	errText := ""
	if a.err != nil {
		errText = redactError(a.err, c.req)
	}
	ce.Write(append(c.callFields(9),
		zap.Int(FieldAttempt, a.n),
		zap.Int(FieldStatus, a.status),
		zap.String(FieldError, errText),
		zap.String(FieldReason, a.verdict.Reason),
		zap.Bool(FieldRetryable, a.verdict.Retryable),
		zap.Duration(FieldWait, a.wait),
		zap.String(FieldWaitSource, a.waitSource),
		zap.Duration(FieldLatency, a.latency),
		zap.Duration(FieldElapsed, a.elapsed),
	)...)
}

func (c *call) logDisposition(cause error) {
	level := zap.WarnLevel
	if c.out.Disposition == Succeeded {
		level = zap.InfoLevel
	}
	ce := c.t.log.Check(level, MsgDisposition)
	if ce == nil {
		return
	}
	errText := ""
	if cause != nil {
		errText = redactError(cause, c.req)
	}
	sum, size, whyNot := c.p.sum, c.p.size, c.p.whyNotRe
	ce.Write(append(c.callFields(10),
		zap.String(FieldDisposition, string(c.out.Disposition)),
		zap.Int(FieldAttempts, c.out.Attempts),
		zap.String(FieldStopReason, c.out.StopReason),
		zap.Int(FieldStatus, c.out.Status),
		zap.String(FieldReason, c.out.Reason),
		zap.String(FieldError, errText),
		zap.String(FieldPayloadSHA256, sum),
		zap.Int64(FieldPayloadBytes, size),
		zap.String(FieldNotReplayable, whyNot),
		zap.Duration(FieldElapsed, c.out.Elapsed),
	)...)
}

// logBreakerChanges writes the state changes the host's breaker queued. It
// runs with no lock held.
func (t *Transport) logBreakerChanges(hb *hostBreaker) {
	for _, ch := range hb.takeChanges() {
		if ce := t.log.Check(zap.WarnLevel, MsgBreaker); ce != nil {
			ce.Write(
				zap.String(FieldBreaker, hb.host),
				zap.String(FieldBreakerFrom, breakerState(ch.from)),
				zap.String(FieldBreakerTo, breakerState(ch.to)),
			)
		}
	}
}

func breakerState(s gobreaker.State) string {
	switch s {
	case gobreaker.StateClosed:
		return "closed"
	case gobreaker.StateHalfOpen:
		return "half_open"
	case gobreaker.StateOpen:
		return "open"
	}
	return s.String()
}

func hostOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Host
}

func pathOf(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.EscapedPath()
}

// redactedURL is the URL as the audit trail and error messages show it:
// scheme, host and path, never user info, query or fragment.
func redactedURL(u *url.URL) string {
	if u == nil {
		return "<nil URL>"
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// minSecretLen is the shortest query value or password scrubbed out of an
// error message on its own; shorter ones cannot hold a credential, and
// scrubbing them would mangle the message.
const minSecretLen = 4

// redactError is err's message with the request's secrets removed: its
// query (whole and value by value), its user info, and any user name or
// password in it. Error types of other packages may quote the URL; this does
// not trust them not to.
func redactError(err error, r *http.Request) string {
	msg := err.Error()
	if r == nil || r.URL == nil {
		return msg
	}
	u := r.URL
	var secrets []string
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				// as decoded, and as another layer may have re-encoded it
				secrets = append(secrets, v, url.QueryEscape(v), url.PathEscape(v))
			}
		}
	}
	if u.User != nil {
		secrets = append(secrets, u.User.String(), u.User.Username())
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			msg = strings.ReplaceAll(msg, s, "REDACTED")
		}
	}
	return msg
}
