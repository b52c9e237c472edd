package deadletter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
)

// Redeliver sends the dead letter l again through client and returns the
// answer, as client.Do does. The request is NewRedeliveryRequest's: the
// letter's method, URL, headers and body, with its Idempotency-Key and
// X-Correlation-ID, so a funder that honours the key and has already
// applied the call answers with its first result instead of applying it
// twice. A funder that ignores the key applies it again, unless it is
// asked first.
//
// reconcile asks it first, by the Transport's own rule (see
// grantretry.WithReconciler): when the letter's last attempt was ambiguous
// (l.Ambiguous) and it carries an Idempotency-Key, Redeliver asks
// reconcile before it sends anything. If the funder has the submission,
// nothing is sent and reconcile's response is returned (Reconciled reports
// it); if it does not, the letter is sent; if reconcile cannot tell,
// nothing is sent and the error matches ErrNotReconciled: ask again later.
// A nil reconcile sends nothing for such a letter: the error matches
// ErrAmbiguous. TrustKey says the funder honours the key, and sends it as
// it is. Every question carries the letter's FirstAttempt
// ([grantretry.ReconcileQuery].FirstAttempt), whoever asks it.
//
// A funder that answers the redelivery of an ambiguous letter with a
// refusal that says the work is already done (a verdict with
// [grantretry.Classification].Applied, from the Transport's classifier)
// has the letter's work: through a grantretry Transport the call ends
// Succeeded with [grantretry.StopAlreadyApplied], and the answer (or the
// reconciler's record) is returned with a nil error, its status 400 or
// more. Read grantretry.OutcomeOf, not the status, to tell whether the
// letter was delivered, as [Dir.Redeliver] and fleet.Letters.Redeliver do.
//
// What is on the record: the request's context names the letter
// (grantretry.WithLetter), so a grantretry Transport that sends it,
// with an audit trail (grantretry.WithAuditTrail), writes its attempts and
// disposition there, each line carrying the letter's ID in
// grantretry.FieldRedelivers. When client.Transport is itself a
// *grantretry.Transport, the question to reconcile is the Transport's too
// (grantretry.WithReconcileFirst): its reconcile line, and a disposition
// when the funder has the submission or cannot tell, are on the trail,
// though nothing is sent. For any other client (a plain one, or one whose
// Transport wraps a grantretry Transport) Redeliver asks reconcile itself,
// and that question and its answer are recorded nowhere but in what
// Redeliver returns; the attempts, if a grantretry Transport sends them,
// are still on its trail.
//
// The letter carries no credentials: client supplies its own, typically
// through its Transport. client may be a plain *http.Client or one whose
// Transport is a grantretry Transport, which then keeps the letter's key
// and correlation id and retries under its own policy. A nil client is
// refused (grantretry.ErrInvalidRequest) rather than replaced by a default one, which
// would send without the caller's credentials, timeouts or policy.
// Letters that cannot be sent safely are refused, sending nothing, with an
// error matching ErrBadLetter; see NewRedeliveryRequest.
//
// Pace and policy are the caller's, through client: each redelivery is
// one call under client's Transport, so its retries and deadline are that
// Transport's (grantretry.WithBudget, WithBackoff, WithBreaker and the
// other options of grantretry.New), and Redeliver sends one letter when it
// is called, at once. A caller with a backlog paces its own calls, as the
// operator's tools do with -rate, -budget and -deadline, and bounds each
// with ctx.
//
// A letter that is not due, its NotBefore (the time the funder said it
// will take the request) after the system clock's now, is refused, sending
// nothing and asking nothing, with an error matching ErrNotYet that names
// the time, unless ctx comes from SendEarly: the explicit decision to send
// that one letter early.
//
// A late letter ([Late]: it missed its closing time,
// [grantretry.Letter].DueBy) is refused the same way, with an error
// matching ErrLate that names the letter, its submission and its due time,
// unless ctx comes from SendLate: the explicit choice to send it late.
func Redeliver(ctx context.Context, client *http.Client, l *grantretry.Letter, reconcile grantretry.ReconcileFunc) (*http.Response, error) {
	req, err := NewRedeliveryRequest(ctx, l)
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, fmt.Errorf("grantretry: letter %s: nil *http.Client: %w", l.ID, grantretry.ErrInvalidRequest)
	}
	if err := late(ctx, l, time.Now()); err != nil {
		return nil, err
	}
	if err := notYet(ctx, l, time.Now()); err != nil {
		return nil, err
	}
	switch {
	case !l.Ambiguous || l.IdempotencyKey == "":
		return client.Do(req)
	case reconcile == nil:
		return nil, ambiguousError(l)
	case trustsKey(reconcile):
		return client.Do(req) // on the caller's word: the funder answers a repeated key with its first result
	}
	if _, ok := client.Transport.(*grantretry.Transport); ok {
		// The Transport asks, and puts the question on its audit trail.
		req = req.WithContext(grantretry.WithReconcileFirst(req.Context(), l, reconcile))
		resp, err := client.Do(req)
		var ge *grantretry.Error
		if errors.As(err, &ge) && ge.StopReason == grantretry.StopUnreconciled && ge.Attempts == 0 {
			return nil, fmt.Errorf("%w (letter %s): %w", ErrNotReconciled, l.ID, err)
		}
		return resp, err
	}
	resp, err := ask(ctx, reconcile, l)
	if err != nil || resp != nil {
		return resp, err
	}
	return client.Do(req)
}

// ErrAmbiguous matches the error of a redelivery that was not sent
// because the letter's last attempt may have been applied
// ([grantretry.Letter].Ambiguous) and no [grantretry.ReconcileFunc] was
// given to ask the funder whether it was.
var ErrAmbiguous = errors.New("grantretry: the letter's last attempt may have been applied, and the funder was not asked whether it was")

// TrustKey is the [grantretry.ReconcileFunc] of a caller who vouches that
// the funder honours Idempotency-Key: it answers a repeated key with its
// first result rather than applying the call again. Given to [Redeliver]
// (or fleet.Letters.Redeliver) for an ambiguous letter, it sends the
// letter as it is, asking nothing; asked as a reconciler, it says the
// funder does not have the submission, so the request is sent again. Give
// it only for such a funder: one that ignores the key applies the letter
// twice.
func TrustKey(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
	return nil, nil
}

// trustsKey reports whether reconcile is TrustKey itself: then there is
// nobody to ask, and no question to put on a trail.
func trustsKey(reconcile grantretry.ReconcileFunc) bool {
	return reflect.ValueOf(reconcile).Pointer() == reflect.ValueOf(TrustKey).Pointer()
}

// ErrNotReconciled matches the error of a redelivery that was not sent
// because the reconciler could not tell whether the funder already has the
// letter's submission.
var ErrNotReconciled = errors.New("grantretry: the funder could not be asked whether it has the submission, so it was not sent")

// reconciledKey marks the request of a response that a reconciler gave.
type reconciledKey struct{}

// Reconciled reports whether resp, returned by Redeliver, is the
// reconciler's answer that the funder already has the submission: nothing
// was sent.
func Reconciled(resp *http.Response) bool {
	if resp == nil || resp.Request == nil {
		return false
	}
	if resp.Request.Context().Value(reconciledKey{}) != nil {
		return true
	}
	o, ok := grantretry.OutcomeOf(resp)
	return ok && o.StopReason == grantretry.StopReconciled && o.Attempts == 0
}

// Delivered reports whether resp, returned by Redeliver with a nil error,
// says the funder has the letter's work: an answer of 1xx-3xx, the
// reconciler's record (Reconciled), or an answer that the redelivering
// grantretry Transport ended [grantretry.Succeeded] whatever its status,
// as it ends one that says an ambiguous letter was already applied
// ([grantretry.StopAlreadyApplied]). Such a letter is delivered: record
// it with Dir.MarkRedelivered. Any other answer is a refusal or a
// failure, and the letter is still owed.
func Delivered(resp *http.Response) bool {
	if resp == nil {
		return false
	}
	if resp.StatusCode < 400 || Reconciled(resp) {
		return true
	}
	o, ok := grantretry.OutcomeOf(resp)
	return ok && o.Disposition == grantretry.Succeeded
}

// ask asks reconcile about l's last attempt: the funder's response if it
// has the submission, nil if it does not.
func ask(ctx context.Context, reconcile grantretry.ReconcileFunc, l *grantretry.Letter) (*http.Response, error) {
	req, err := NewRedeliveryRequest(ctx, l)
	if err != nil {
		return nil, err
	}
	var lastErr error
	if l.LastError != "" {
		lastErr = errors.New(l.LastError)
	}
	resp, err := reconcile(ctx, grantretry.ReconcileQuery{
		Request:        req,
		SubmissionID:   l.SubmissionID,
		IdempotencyKey: l.IdempotencyKey,
		CorrelationID:  l.CorrelationID,
		Attempt:        l.Attempts,
		Status:         l.LastStatus,
		Err:            lastErr,
		FirstAttempt:   l.FirstAttempt,
	})
	switch {
	case err != nil:
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("%w (letter %s): %w", ErrNotReconciled, l.ID, err)
	case resp == nil:
		return nil, nil
	}
	resp.Request = req.WithContext(context.WithValue(req.Context(), reconciledKey{}, true))
	return resp, nil
}

// NewRedeliveryRequest returns the request Redeliver sends for l: its
// method, URL, header and body (a bytes.Reader, so GetBody is set and every
// retry sends the same bytes), Idempotency-Key set to l.IdempotencyKey and
// X-Correlation-ID to l.CorrelationID when they are not empty, and ctx
// carrying l.SubmissionID (grantretry.WithSubmissionID) when it is not empty,
// the letter ([grantretry.WithLetter]: its ID, its FirstAttempt, and
// whether it is ambiguous, so that a grantretry Transport takes an answer
// that says the request was already applied as the letter's success,
// [grantretry.StopAlreadyApplied]), and its DueBy, when it has one
// ([grantretry.WithClosingTime]), so that a redelivery that ends owed
// again is judged late as the call was. The letter is not modified.
//
// It refuses, with an error matching ErrBadLetter, a letter that is nil,
// malformed (see Dir.PutDeadLetter), of an unsupported version, without
// its body (BodyOmitted), whose body does not match its SHA-256, whose URL
// is not an absolute http or https URL, with a control character in a
// header, key, correlation id or submission id, or whose method is not
// idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and which has no
// Idempotency-Key, since sending it again could apply it twice.
func NewRedeliveryRequest(ctx context.Context, l *grantretry.Letter) (*http.Request, error) {
	if err := checkRedeliverable(l); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("grantretry: letter %s: nil context: %w", l.ID, grantretry.ErrInvalidRequest)
	}
	if l.SubmissionID != "" {
		ctx = grantretry.WithSubmissionID(ctx, l.SubmissionID)
	}
	ctx = grantretry.WithLetter(ctx, l)
	if !l.DueBy.IsZero() {
		ctx = grantretry.WithClosingTime(ctx, l.DueBy)
	}
	req, err := http.NewRequestWithContext(ctx, l.Method, l.URL, bytes.NewReader(l.Body))
	if err != nil {
		return nil, badLetter(l.ID, "%v", err)
	}
	req.Header = redeliveryHeader(l)
	if l.Host != "" {
		req.Host = l.Host
	}
	return req, nil
}

// redeliveryHeader is a copy of the letter's header with the letter's own
// key and correlation id, and no other spelling of either.
func redeliveryHeader(l *grantretry.Letter) http.Header {
	h := make(http.Header, len(l.Header)+2)
	for name, vs := range l.Header {
		switch http.CanonicalHeaderKey(name) {
		case grantretry.HeaderIdempotencyKey, grantretry.HeaderCorrelationID:
			continue
		}
		h[name] = append([]string(nil), vs...)
	}
	if l.IdempotencyKey != "" {
		h.Set(grantretry.HeaderIdempotencyKey, l.IdempotencyKey)
	}
	if l.CorrelationID != "" {
		h.Set(grantretry.HeaderCorrelationID, l.CorrelationID)
	}
	return h
}

// checkRedeliverable refuses a letter that cannot be sent again safely.
func checkRedeliverable(l *grantretry.Letter) error {
	if err := validateLetter(l); err != nil {
		return err
	}
	if l.BodyOmitted != "" {
		return badLetter(l.ID, "its body was not kept (%s): there is nothing to send", l.BodyOmitted)
	}
	if !idempotentMethod(l.Method) && l.IdempotencyKey == "" {
		return badLetter(l.ID, "%s without an Idempotency-Key: sending it again could apply it twice", l.Method)
	}
	if err := checkLetterURL(l); err != nil {
		return err
	}
	return checkLetterFields(l)
}

func checkLetterURL(l *grantretry.Letter) error {
	u, err := url.Parse(l.URL)
	if err != nil {
		return badLetter(l.ID, "url: %v", errors.Unwrap(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badLetter(l.ID, "url is not an absolute http or https URL")
	}
	return nil
}

// checkLetterFields refuses what would split a header or be refused by a
// Transport: control characters, and a submission id it would not accept.
func checkLetterFields(l *grantretry.Letter) error {
	if hasControl(l.IdempotencyKey) || hasControl(l.CorrelationID) || hasControl(l.Host) || strings.ContainsAny(l.Host, " /") {
		return badLetter(l.ID, "control character in the idempotency key or correlation id, or an invalid host")
	}
	if l.SubmissionID != "" {
		if !validSubmissionID(l.SubmissionID) {
			return badLetter(l.ID, "submission id is not 1 to %d bytes without control characters", grantretry.MaxSubmissionIDLen)
		}
	}
	for name, vs := range l.Header {
		if name == "" || strings.ContainsAny(name, " :") || hasControl(name) {
			return badLetter(l.ID, "invalid header name %q", name)
		}
		for _, v := range vs {
			if hasControl(v) {
				return badLetter(l.ID, "control character in header %s", name)
			}
		}
	}
	return nil
}
