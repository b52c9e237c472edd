package grantsgov

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/grantretry/grantretry"
)

// DefaultClockSkew is the clock skew a Reconciler allows for when the
// caller gives none: how far the service's ReceivedDateTime may run behind
// the Transport's clock. A minute is far more than NTP-synchronised hosts
// drift, and far less than the time a pipeline takes to look at a refusal
// and send a corrected application under the same title.
const DefaultClockSkew = time.Minute

// ErrTitleMismatch is wrapped by a Reconciler's error when the
// SubmitApplication request's SubmissionTitle is not the call's submission
// id (grantretry.WithSubmissionID): asked by the wrong title, the service
// would say it has nothing, and the submission would be sent twice.
var ErrTitleMismatch = errors.New("grantretry: grantsgov: the SubmissionTitle is not the submission id")

// ErrListFailed is wrapped by a Reconciler's error when the service
// answers its list query with anything but 200: it did not say what it
// recorded.
var ErrListFailed = errors.New("grantretry: grantsgov: GetApplicationList failed")

// applicantAction is the start of every applicant operation's SOAPAction
// in the WSDL's binding (ApplicantWebServices-V2.0.wsdl), the service
// checking it exactly.
const applicantAction = "https://trainingws.grants.gov/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort/"

// maxListBytes bounds the list answer a Reconciler reads: an application
// is under 1 KiB of it, so a title would need over a thousand
// applications to pass it, and then the Reconciler cannot tell.
const maxListBytes = 1 << 20

// StatusRejectedWithErrors is the GrantsGovApplicationStatusType value of
// an application the service received and refused after validating it
// (GrantsCommonTypes-V1.0.xsd). A Reconciler does not count it as applied.
const StatusRejectedWithErrors = "Rejected with Errors"

// A Reconciler finds out, after an ambiguous SubmitApplication, whether
// Grants.gov recorded it: it asks GetApplicationList, filtered by the
// application's SubmissionTitle, through the caller's own client, which
// presents the S2S client certificate. Its Reconcile method is the
// grantretry.ReconcileFunc; Profile wires it. It is safe for concurrent
// use, and never changes once built.
//
// The title is the submission id: a pipeline gives each SubmitApplication
// the context of grantretry.WithSubmissionID(ctx, id) and writes the same
// id as the application's SubmissionTitle, as Kuali Coeus writes its
// proposal number there. SubmitApplication takes no id of the client's,
// so the title is the only tie between the application and the
// submission; ErrTitleMismatch guards it.
type Reconciler struct {
	client *http.Client
	skew   time.Duration
}

// NewReconciler returns a Reconciler that sends its list queries through
// client, which must present the S2S client certificate (its Transport's
// TLSClientConfig), and allows for clockSkew between the Transport's
// clock and the service's (DefaultClockSkew unless you know better). Give
// it a client of its own, not one whose Transport is the grantretry
// Transport that asks it: a failed query is retried by that Transport,
// which asks again, and an unkeyed POST is one net/http never resends
// once written. A nil client or a negative clockSkew is an error.
func NewReconciler(client *http.Client, clockSkew time.Duration) (*Reconciler, error) {
	switch {
	case client == nil:
		return nil, errors.New("grantretry: grantsgov: NewReconciler with a nil client")
	case clockSkew < 0:
		return nil, fmt.Errorf("grantretry: grantsgov: NewReconciler with a negative clock skew %v", clockSkew)
	}
	return &Reconciler{client: client, skew: clockSkew}, nil
}

// Reconcile is a grantretry.ReconcileFunc for SubmitApplication. It asks
// the port the request was posted to (q.Request.URL) for the
// applications under the request's SubmissionTitle, and answers:
//
//   - applied: the oldest application under the title that the service
//     has not Rejected with Errors and that it received no earlier than
//     the call's first attempt (q.FirstAttempt, less the clock skew; any
//     time when q.FirstAttempt is zero, as for a letter without one). The
//     response is the one SubmitApplication would have sent: a 200,
//     MTOM-framed, with that application's GrantsGovTrackingNumber and
//     ReceivedDateTime, which ParseSubmitResponse reads.
//   - not applied (nil, nil): the service answered, and holds no such
//     application. An application Rejected with Errors is a refusal, and
//     one received before the first attempt is an earlier submission's
//     under the same title, so the request may be sent again.
//   - cannot tell (nil, err): the title is unknown or is not the
//     submission id, the query failed or was answered with a fault
//     (ErrListFailed, with ClassifyFault's reason when it knows the text),
//     the answer is malformed or cut off (ErrMalformed), or an application
//     that would count has no ReceivedDateTime.
//
// The title is the request body's SubmissionTitle when the Transport
// could keep the body, checked against q.SubmissionID when there is one;
// else q.SubmissionID. A call that is no SubmitApplication and whose
// SOAPAction names an operation that only reads (GetApplicationList,
// GetSubmissionList, ...) is answered not applied: sending it again
// changes nothing.
func (r *Reconciler) Reconcile(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
	title, err := queryTitle(q)
	if errors.Is(err, ErrNoTitle) && isQuery(q.Request.Header.Get("SOAPAction")) {
		return nil, nil // a query records nothing: sending it again is harmless
	}
	if err != nil {
		return nil, err
	}
	apps, err := r.list(ctx, q.Request.URL.String(), title)
	if err != nil {
		return nil, err
	}
	var since time.Time
	if !q.FirstAttempt.IsZero() {
		since = q.FirstAttempt.Add(-r.skew)
	}
	for _, a := range apps {
		if a.title != title || a.status == StatusRejectedWithErrors {
			continue
		}
		if a.received.IsZero() {
			return nil, fmt.Errorf("%w: application %s under %q has no ReceivedDateTime", ErrMalformed, a.tracking, title)
		}
		if a.received.Before(since) {
			continue
		}
		return receiptResponse(a.tracking, a.receivedText), nil
	}
	return nil, nil
}

// isQuery reports whether a SOAPAction names one of the applicant port's
// operations that only read (GetApplicationList, GetSubmissionList,
// GetOpportunityList, AuthenticateAOR, ...).
func isQuery(action string) bool {
	op, ok := strings.CutPrefix(strings.Trim(action, `"`), applicantAction)
	return ok && (strings.HasPrefix(op, "Get") || strings.HasPrefix(op, "Authenticate"))
}

// queryTitle is the SubmissionTitle to ask about.
func queryTitle(q grantretry.ReconcileQuery) (string, error) {
	if q.Request == nil || q.Request.URL == nil {
		return "", errors.New("grantretry: grantsgov: a reconcile query without a request")
	}
	body := q.Request.Body
	if body == nil && q.Request.GetBody != nil {
		if b, err := q.Request.GetBody(); err == nil {
			body = b
			defer b.Close()
		}
	}
	if body == nil {
		if q.SubmissionID == "" {
			return "", fmt.Errorf("%w: the request's body is gone and the call has no submission id", ErrNoTitle)
		}
		return q.SubmissionID, nil
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("grantretry: grantsgov: reading the request's body again: %w", err)
	}
	title, err := SubmissionTitle(raw)
	if err != nil {
		return "", err
	}
	if q.SubmissionID != "" && title != q.SubmissionID {
		return "", fmt.Errorf("%w: SubmissionTitle %q, submission id %q", ErrTitleMismatch, title, q.SubmissionID)
	}
	return title, nil
}

// listedApp is one ApplicationInfo of a GetApplicationList answer.
type listedApp struct {
	tracking, status, title string
	received                time.Time
	receivedText            string // as the service wrote it
}

// list sends GetApplicationList filtered by title to url.
func (r *Reconciler) list(ctx context.Context, url, title string) ([]listedApp, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(listRequest(title)))
	if err != nil {
		return nil, fmt.Errorf("grantretry: grantsgov: GetApplicationList: %w", err)
	}
	req.Header.Set("Content-Type", "text/xml; charset=utf-8")
	req.Header.Set("SOAPAction", `"`+applicantAction+"GetApplicationList"+`"`)
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("grantretry: grantsgov: GetApplicationList: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("grantretry: grantsgov: GetApplicationList: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		reason := "a body it does not read"
		if v, ok := ClassifyFault(resp, body); ok {
			reason = v.Reason
		}
		return nil, fmt.Errorf("%w: status %d, %s", ErrListFailed, resp.StatusCode, reason)
	}
	if len(body) > maxListBytes {
		return nil, fmt.Errorf("%w: a GetApplicationList answer over %d bytes", ErrMalformed, maxListBytes)
	}
	return parseApplicationList(body)
}

// listRequest is a GetApplicationListRequest with one ApplicationFilter,
// SubmissionTitle, the filter Kuali Coeus asks by.
func listRequest(title string) []byte {
	var b bytes.Buffer
	b.WriteString(`<soap:Envelope xmlns:soap="` + soap11Envelope + `"><soap:Body>`)
	b.WriteString(`<app:GetApplicationListRequest xmlns:app="` + servicesNS + `" xmlns:gran="` + commonNS + `">`)
	b.WriteString(`<gran:ApplicationFilter>`)
	writeElement(&b, "gran:Filter", "SubmissionTitle")
	writeElement(&b, "gran:FilterValue", title)
	b.WriteString(`</gran:ApplicationFilter></app:GetApplicationListRequest></soap:Body></soap:Envelope>`)
	return b.Bytes()
}

// applicationList is the shape of GetApplicationListResponse.
type applicationList struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		List *struct {
			Available *int `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 AvailableApplicationNumber"`
			Infos     []struct {
				TrackingNumber string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovTrackingNumber"`
				Status         string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 GrantsGovApplicationStatus"`
				Title          string `xml:"http://apply.grants.gov/system/GrantsCommonElements-V1.0 SubmissionTitle"`
				Received       string `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 ReceivedDateTime"`
			} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 ApplicationInfo"`
		} `xml:"http://apply.grants.gov/services/ApplicantWebServices-V2.0 GetApplicationListResponse"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

// parseApplicationList reads a GetApplicationList answer. The count must
// match the list, so an answer cut short is an error, never a shorter
// list.
func parseApplicationList(body []byte) ([]listedApp, error) {
	env, ok := soapEnvelope(nil, body)
	if !ok {
		return nil, fmt.Errorf("%w: not a SOAP envelope, framed or bare", ErrMalformed)
	}
	var l applicationList
	if err := xml.Unmarshal(env, &l); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if l.Body.List == nil {
		return nil, fmt.Errorf("%w: no GetApplicationListResponse", ErrMalformed)
	}
	infos := l.Body.List.Infos
	if n := l.Body.List.Available; n == nil || *n != len(infos) {
		return nil, fmt.Errorf("%w: AvailableApplicationNumber does not count the %d applications that follow", ErrMalformed, len(infos))
	}
	apps := make([]listedApp, 0, len(infos))
	for _, e := range infos {
		a := listedApp{
			tracking: strings.TrimSpace(e.TrackingNumber), status: strings.TrimSpace(e.Status),
			title: strings.TrimSpace(e.Title), receivedText: strings.TrimSpace(e.Received),
		}
		if !isTrackingNumber(a.tracking) || a.status == "" {
			return nil, fmt.Errorf("%w: an application without a tracking number or a status", ErrMalformed)
		}
		if a.receivedText != "" {
			t, err := time.Parse(time.RFC3339Nano, a.receivedText)
			if err != nil {
				return nil, fmt.Errorf("%w: ReceivedDateTime: %w", ErrMalformed, err)
			}
			a.received = t
		}
		apps = append(apps, a)
	}
	return apps, nil
}
