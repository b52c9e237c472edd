// Package grantretry makes calls to funder APIs safe to retry. It is an
// http.RoundTripper middleware: wrap the *http.Client a grant pipeline
// already has (or hand it to a portal SDK), and every call gets an
// Idempotency-Key and a correlation id, retries of transient faults only,
// with full-jitter backoff within a budget, a per-host retry throttle and
// circuit breaker, and one audit line per attempt:
//
//	client := &http.Client{Transport: grantretry.New(nil, grantretry.WithLogger(auditLogger))}
//	ctx := grantretry.WithSubmissionID(ctx, "GRANT-2026-0042")
//	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(pkg))
//	resp, err := client.Do(req)
//
// RoundTrip returns err == nil whenever it obtained a response, whatever
// its status; OutcomeOf(resp) tells how the call ended (Succeeded,
// DeadLetter, CircuitOpen, ...), and so does the *Error returned when no
// response came. Transport.RoundTrip states the policy rule by rule; the
// options (With*, ForHost) change it, each with its default (Default*).
//
// Two packages beside it keep what a call leaves: trail, a hash-chained
// audit trail file (an AuditSink, see WithAuditTrail), and deadletter, a
// directory of dead letters to redeliver (a DeadLetterSink, see
// WithDeadLetter). This package imports neither, so other stores can take
// their place; the fleet module shares breakers and throttles through
// PostgreSQL (WithFleet).
//
// The guides are in the repository's docs/ directory:
//
//   - docs/policy.md: each decision of the policy, and the file it lives in
//   - docs/options.md: every option and its default
//   - docs/outcomes.md: dispositions, stop reasons and errors
//   - docs/exactly-once.md: what the keys and WithReconciler promise
//   - docs/choosing-budgets.md: budgets and backoff, from the storm simulator
//   - docs/audit-trail.md and docs/dead-letters.md: the trail and the letters
//   - docs/telemetry.md, docs/fleet.md, docs/grantsgov.md: metrics and
//     traces, fleet mode, Grants.gov S2S
package grantretry
