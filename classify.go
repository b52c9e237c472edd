package grantretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// Classification is the verdict on one attempt: whether a retry could help,
// and a stable reason for the audit trail.
//
// Reason takes one of these forms:
//
//	ok:<code>            a 1xx-3xx response; not a failure, never retried
//	transient:<code>     a status in the transient set (default 429, 500, 502, 503, 504)
//	terminal:<code>      a status in the terminal set (default 400, 401, 403, 404, 422)
//	unclassified:<code>  any other status; terminal, because an unknown code is
//	                     more likely a contract change than a blip
//	owed:<code>          a ClassifyFunc's Owed verdict: not refused, to be
//	                     sent again later (see Owed)
//	transport:<kind>     the transport failed before a response was obtained
//
// The transport kinds are timeout, reset, refused, eof, dns,
// lost_after_write (a kept-alive connection failed after the request was
// written, and the inner transport's own resend was stopped), not_sent (a
// layer inside the Transport failed before anything was sent: see
// ErrNotSent; it is retried, and charged to no funder), network
// (transient) and canceled, deadline, tls_cert, tls, dns_not_found,
// malformed_url, invalid_request, no_response (terminal; the last is an
// inner transport that returned neither a response nor an error).
//
// A ClassifyFunc's verdict on a status (WithClassifier, [ClassifyLimits])
// is reported as transient:<code>, terminal:<code> or owed:<code>, followed
// by ";" and its own reason when it gives one: "terminal:500;soap:Client",
// "owed:403;azure:quota".
type Classification struct {
	Retryable bool
	Reason    string
	// Owed says the funder did not refuse the request: it will take the
	// same request later (a quota, a maintenance window). An Owed verdict
	// is never retried within the call, whatever Retryable says: the call
	// ends [DeadLetter] with [StopOwedLater], charged to no breaker or
	// retry throttle, and the Transport reports the verdict with Retryable
	// false. A transient verdict whose Retry-After ends at or after the
	// call's deadline is made Owed the same way.
	Owed bool
	// NotBefore is when the funder said it will take the request, if it
	// said. For an Owed verdict the Transport reports it in
	// [Outcome.NotBefore], made no earlier than the end of the response's
	// Retry-After, read on its [Clock], and no earlier than the Clock's
	// now. Zero when the funder did not say.
	NotBefore time.Time
	// Applied says this answer, to a resend, tells that an earlier attempt
	// was applied: a duplicate the funder recognised, or a state only that
	// attempt could have brought about (Simpler Grants.gov's 403
	// "not_in_progress" for an application already submitted). An Applied
	// verdict is never retried, whatever Retryable and Owed say. Two
	// earlier attempts count: an ambiguous attempt of the same call (see
	// [WithReconciler] for which are), one a reconciler was asked about
	// included, whatever it answered; and the last attempt of an
	// ambiguous dead letter, when the call is its redelivery under
	// [WithLetter] or [WithReconcileFirst] and carries the letter's
	// Idempotency-Key. After either, the call ends [Succeeded] with
	// [StopAlreadyApplied], Outcome.NotBefore zero and nothing owed: the
	// caller gets the answer, with a nil error. A reconciler, when one is
	// configured, the call is keyed and its deadline has not passed, is
	// asked once first: the funder's record it returns is what the caller
	// gets instead; when it returns none (not applied, or it cannot tell:
	// the reconcile line says not_applied or unknown), the caller still
	// gets the funder's answer, and the call still succeeded. Otherwise
	// nothing this call sent could have been applied before: the answer
	// is a refusal, and the call ends [FailedTerminal] ([StopTerminal]). The
	// Reason is reported in the terminal form ("terminal:403;applied:...").
	// Either way the breaker and the retry throttle take the answer as
	// any refusal: an answer from a funder that is up, no failure.
	Applied bool
}

// notSentClass is the verdict on an attempt that sent nothing.
var notSentClass = Classification{Retryable: true, Reason: reasonNotSent}

// charged reports whether the verdict counts against the funder: every
// verdict but not_sent, whose failure was a layer's inside the Transport.
func (v Classification) charged() bool { return v.Reason != reasonNotSent }

// ClassifyFunc classifies a response by what its body says as well as its
// status: for funders whose refusals and outages share a status, such as
// SOAP 1.1, which sends every fault as a 500. body is at most the first
// MaxClassifyPeek bytes of the body (all of it if shorter); the function
// must not read resp.Body, which the caller still receives whole, and must
// be safe for concurrent use. ok false leaves the verdict to the status
// sets. The Reason it returns names what it read, such as "soap:Client":
// the Transport reports it after the status's own form, as in
// "terminal:500;soap:Client" or "transient:500;soap:Server".
type ClassifyFunc func(resp *http.Response, body []byte) (c Classification, ok bool)

// statusSets holds the transient and terminal status codes of one Transport,
// and the verdict on every status from 100 to 599, worked out once so the
// hot path builds no reason string. It is built by New and never changes
// afterwards.
type statusSets struct {
	transient map[int]bool
	terminal  map[int]bool
	verdicts  *[600]Classification
}

func newStatusSets(transient, terminal []int) statusSets {
	s := statusSets{transient: make(map[int]bool), terminal: make(map[int]bool)}
	for _, c := range transient {
		s.transient[c] = true
	}
	for _, c := range terminal {
		s.terminal[c] = true
	}
	s.verdicts = new([600]Classification)
	for code := 100; code < len(s.verdicts); code++ {
		s.verdicts[code] = s.classifyStatus(code)
	}
	return s
}

// defaultTransient are the status codes retried unless WithStatusSets says
// otherwise.
var defaultTransient = []int{429, 500, 502, 503, 504}

// defaultTerminal are the status codes that fail at once unless
// WithStatusSets says otherwise.
var defaultTerminal = []int{400, 401, 403, 404, 422}

var defaultStatusSets = newStatusSets(defaultTransient, defaultTerminal)

// Classify decides whether a response status or a transport error is worth
// retrying, with the default status sets. A non-nil err means the transport
// failed and status is ignored. Classify is a pure function, safe for
// concurrent use; a Transport built WithStatusSets classifies with its own
// sets by the same rules.
func Classify(status int, err error) Classification {
	return defaultStatusSets.classify(status, err)
}

func (s statusSets) classify(status int, err error) Classification {
	if err != nil {
		return classifyError(err)
	}
	if status >= 100 && status < len(s.verdicts) {
		return s.verdicts[status]
	}
	return s.classifyStatus(status)
}

func (s statusSets) classifyStatus(status int) Classification {
	switch {
	case status >= 100 && status < 400:
		return Classification{Retryable: false, Reason: "ok:" + strconv.Itoa(status)}
	case s.transient[status]:
		return Classification{Retryable: true, Reason: "transient:" + strconv.Itoa(status)}
	case s.terminal[status]:
		return Classification{Retryable: false, Reason: "terminal:" + strconv.Itoa(status)}
	default:
		return Classification{Retryable: false, Reason: "unclassified:" + strconv.Itoa(status)}
	}
}

// classifyError sorts transport errors by type, never by message. Anything it
// does not recognise is transient: the request may not have reached the
// funder, and the budget bounds what a wrong guess costs.
func classifyError(err error) Classification {
	terminal := func(kind string) Classification {
		return Classification{Retryable: false, Reason: "transport:" + kind}
	}
	transient := func(kind string) Classification {
		return Classification{Retryable: true, Reason: "transport:" + kind}
	}

	// An inner layer's word that it sent nothing comes first: one that the
	// attempt timeout cut short still sent nothing.
	if errors.Is(err, ErrNotSent) {
		return notSentClass
	}
	// Our own attempt timeout comes next: it wraps context.DeadlineExceeded,
	// which would otherwise read as the caller's deadline.
	var at *attemptTimeoutError
	if errors.As(err, &at) {
		return transient("timeout")
	}
	if errors.Is(err, ErrInvalidRequest) {
		return terminal("invalid_request")
	}
	if errors.Is(err, errNoResponse) {
		return terminal("no_response")
	}
	if errors.Is(err, errResendStopped) {
		return transient("lost_after_write")
	}
	if errors.Is(err, context.Canceled) {
		return terminal("canceled")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return terminal("deadline")
	}

	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuth) ||
		errors.As(err, &hostErr) || errors.As(err, &invalidCert) {
		return terminal("tls_cert")
	}
	var recordErr tls.RecordHeaderError
	if errors.As(err, &recordErr) {
		// TLS spoken to a plain-HTTP server: a configuration error.
		return terminal("tls")
	}

	var urlErr *url.Error
	if errors.As(err, &urlErr) && urlErr.Op == "parse" {
		return terminal("malformed_url")
	}
	var escErr url.EscapeError
	var hostNameErr url.InvalidHostError
	if errors.As(err, &escErr) || errors.As(err, &hostNameErr) {
		return terminal("malformed_url")
	}

	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return terminal("dns_not_found")
		}
		return transient("dns")
	}

	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED):
		return transient("reset")
	case errors.Is(err, syscall.ECONNREFUSED):
		return transient("refused")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return transient("eof")
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return transient("timeout")
	}
	return transient("network")
}
