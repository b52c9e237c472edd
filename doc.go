// Package grantretry makes calls to funder APIs safe to retry; the README
// shows how to start, and docs/policy.md gives the policy rule by rule.
//
// It is an http.RoundTripper middleware: wrap the *http.Client a grant
// pipeline already has (or hand it to a portal SDK), and every call gets the
// policy:
//
//	client := &http.Client{Transport: grantretry.New(nil, grantretry.WithLogger(auditLogger))}
//	ctx := grantretry.WithSubmissionID(ctx, "GRANT-2026-0042")
//	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(pkg))
//	resp, err := client.Do(req)
//
// # The policy
//
// Each call is one logical call, made of one or more attempts:
//
//   - Stamping. Every attempt carries the call's X-Correlation-ID (16
//     unguessable hex digits like NewCorrelationID's, unless the caller
//     set one) and, for POST and
//     PATCH, its Idempotency-Key, derived once before the first attempt by
//     IdempotencyKey from the submission id (WithSubmissionID) and the body
//     (a body too large to replay cannot be hashed before it is sent, and
//     gets no derived key; see DefaultReplayLimit).
//     Without a submission id the key is IdempotencyKey(method+" "+url+"\n",
//     body), the URL without user info, fragment or secret query
//     parameters. A key the caller set is kept. GET, HEAD, OPTIONS, TRACE, PUT and
//     DELETE get no key; any other method is retried only if the caller set a
//     key, and POST or PATCH only if it has one.
//   - Replay. The body is sent byte for byte on every attempt: through the
//     request's GetBody, or from a buffer of at most WithReplayLimit bytes.
//     A larger body without GetBody is sent exactly once.
//   - Classification. Classify sorts each response or transport error into
//     transient (429, 5xx in the transient set, timeouts, resets, refused
//     connections, EOF mid-response) and terminal (400, 401, 403, 404, 422,
//     any unknown status, the caller's cancellation, certificate failures,
//     invalid requests). Only transient faults are retried. 1xx-3xx
//     responses are not failures and pass through untouched.
//   - Backoff. Retry n waits FullJitter(n, base, cap), and never less than a
//     Retry-After the funder sent (ParseRetryAfter).
//   - Budget. At most maxRetries retries and a deadline per call, and the
//     caller's context. A wait that would end at or after the deadline is
//     not slept: the call ends at once as DeadLetter, so a Retry-After of
//     hours cannot park a worker.
//   - Throttle. One retry token bucket per funder host, shared by every
//     call of the Transport (gRPC's retry throttling, gRFC A6): transient
//     failures drain it, successes and time refill it, and while it is
//     half empty or less no call to that host retries. A funder that is
//     down then sees one attempt per call, not five; a pipeline that makes
//     few calls has its retries back one refill period after a blip.
//   - Breaker. One circuit breaker per funder host (scheme, host, port),
//     counting transient failures only. While it is open, calls to that
//     host end at once as CircuitOpen, without sending or spending budget.
//   - Audit. Each attempt and each disposition is one structured zap line
//     (see the Msg* and Field* constants); bodies, credentials, user info
//     and query strings are never logged. WithAuditTrail also writes every
//     record to an AuditSink, synced at every disposition before RoundTrip
//     returns; a Transport whose sink has failed sends nothing more. The
//     package github.com/grantretry/grantretry/trail is such a sink: a
//     write-once file whose records are chained by SHA-256, checked by
//     trail.Verify (or "grantretry audit verify").
//   - Dead letters. With WithDeadLetter, a call that ends DeadLetter or
//     CircuitOpen is handed to a DeadLetterSink as a Letter: the request
//     byte for byte with its key and ids, without its secrets (WithRedact
//     names more). The package github.com/grantretry/grantretry/deadletter
//     keeps letters as files, a crash leaving a whole letter or none, and
//     its Redeliver sends one again under its Idempotency-Key.
//
// This package imports neither of those two: they implement its
// interfaces, so other stores can take their place.
//
// # Results
//
// RoundTrip returns err == nil whenever it obtained a response, whatever its
// status: a 422 with its body, or the last 503 of a dead-lettered call.
// OutcomeOf(resp) tells how the call ended. When no response was obtained it
// returns an *Error, whose Outcome says the same and whose Unwrap gives the
// last cause; errors.Is matches ErrCircuitOpen, ErrDeadLetter,
// ErrInvalidRequest, ErrInvalidOption, context.Canceled and
// context.DeadlineExceeded as they apply. Transport.Err reports an
// invalid option at start-up, before any call.
//
// http.Client replaces the error of a call it timed out (Client.Timeout)
// with its own, which still matches context.DeadlineExceeded but is no
// *Error; prefer a context deadline, which the budget takes into account.
// http.Client also wraps errors in *url.Error, which quotes the URL with
// its query: redact before logging it.
//
// # Attempts and net/http
//
// Outcome.Attempts counts every request on the wire, and the attempts an
// inner layer failed before sending anything (transport:not_sent), which
// reached no funder. net/http's Transport
// resends a replayable request on its own when a pooled connection fails
// after the request was written; the inner transport is given no GetBody,
// and a keyed request without a body is watched, so that resend is
// stopped and the retry is this package's own, counted and logged. One
// stays: an unkeyed GET, HEAD, OPTIONS or TRACE, which has no effect, may
// be resent uncounted. docs/exactly-once.md says what this and
// WithReconciler promise against a funder that ignores Idempotency-Key.
package grantretry
