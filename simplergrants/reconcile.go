package simplergrants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/grantretry/grantretry"
)

// ErrCannotTell is wrapped by every error of [Reconciler.Reconcile]: it
// could not find out whether the API holds what the call asked for, and
// says why.
var ErrCannotTell = errors.New("grantretry: simplergrants: cannot tell whether the API applied the request")

// ErrNameMismatch is wrapped by Reconcile's error when a start's
// application_name is not the call's submission id
// ([grantretry.WithSubmissionID]): asked by the wrong name, the API would
// say it has nothing, and a second application would be started.
var ErrNameMismatch = errors.New("grantretry: simplergrants: the application_name is not the submission id")

// The application statuses that say a submit was applied
// (ApplicationStatus, HHS/simpler-grants-gov api/openapi.generated.yml,
// ApplicationGetResponseDataSchema; submit_application.py sets submitted,
// the API's processing accepted).
const (
	statusSubmitted = "submitted"
	statusAccepted  = "accepted"
)

// maxQueryBytes bounds an answer the Reconciler reads; maxListPages
// bounds the pages of a user's applications it reads, at listPageSize
// each (UserApplicationPaginationSchema allows 1 to 5000): past them it
// cannot tell.
const (
	maxQueryBytes = 8 << 20
	maxListPages  = 20
	listPageSize  = 500
)

var (
	reUUID   = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`
	reSubmit = regexp.MustCompile(`^/alpha/applications/(` + reUUID + `)/submit$`)
	reReads  = regexp.MustCompile(`^/(alpha/applications/` + reUUID + `/(submissions|audit_history)|v1/users/` + reUUID + `/applications)$`)
)

// A Reconciler finds out, after an ambiguous start or submit, whether the
// Simpler Grants.gov API applied it, by asking the API through the
// caller's own client, which carries the credentials (X-API-Key and
// X-SGG-Token) as the pipeline's does. Its Reconcile method is a
// [grantretry.ReconcileFunc]. It never changes once built and is safe for
// concurrent use.
//
// A submit is found by the application's own record; a start by its
// application_name, which must be the call's submission id: the pipeline
// starts each application with application_name set to the id it gives
// [grantretry.WithSubmissionID]. The only route that lists a user's
// applications with their names is POST /v1/users/{user_id}/applications,
// tagged "Internal Only", which takes the user's X-SGG-Token and the
// user's id: [Reconciler.ForUser] gives it.
type Reconciler struct {
	base   *url.URL
	err    error // what is wrong with the base URL or the client
	client *http.Client
	userID string
}

// NewReconciler returns a Reconciler that asks the API at baseURL
// ("https://api.simpler.grants.gov") through client. Give it a client of
// its own, not one whose Transport is the grantretry Transport that asks
// it. A baseURL that is not an absolute http or https URL, or a nil
// client, makes every Reconcile answer an error that says so.
//
// Its errors name the base URL without its user information: a password
// written into it never reaches an error, a log or a trail.
func NewReconciler(baseURL string, client *http.Client) *Reconciler {
	r := &Reconciler{client: client}
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		r.err = fmt.Errorf("grantretry: simplergrants: NewReconciler: base URL %q: %w", redactUserinfo(baseURL), err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		r.err = fmt.Errorf("grantretry: simplergrants: NewReconciler: base URL %q is not an absolute http or https URL", redactUserinfo(baseURL))
	case client == nil:
		r.err = errors.New("grantretry: simplergrants: NewReconciler with a nil client")
	default:
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawQuery, u.Fragment = "", ""
		r.base = u
	}
	return r
}

// redactUserinfo is s, a URL that may not parse, with what stands
// between the "//" of its authority (or its start, if it has none) and
// the last "@" before its path replaced by "xxxxx".
func redactUserinfo(s string) string {
	from := 0
	if i := strings.Index(s, "//"); i >= 0 {
		from = i + 2
	}
	end := len(s)
	if i := strings.IndexAny(s[from:], "/?#"); i >= 0 {
		end = from + i
	}
	at := strings.LastIndex(s[from:end], "@")
	if at < 0 {
		return s
	}
	return s[:from] + "xxxxx" + s[from+at:]
}

// ForUser returns a copy of r that reconciles a start by the
// applications of the user whose id is userID: the user the client's
// X-SGG-Token is a session of. Without it, a start is never reconciled:
// Reconcile cannot tell. On a nil *Reconciler it returns one whose
// Reconcile answers an error that says so.
func (r *Reconciler) ForUser(userID string) *Reconciler {
	if r == nil {
		return &Reconciler{err: errNilReconciler, userID: userID}
	}
	c := *r
	c.userID = userID
	return &c
}

// errNilReconciler is the error of a nil *Reconciler's Reconcile.
var errNilReconciler = errors.New("grantretry: simplergrants: a nil *Reconciler (NewReconciler builds one)")

// Reconcile is a [grantretry.ReconcileFunc] for the API's writes. It
// answers:
//
//   - for POST /alpha/applications/{id}/submit, by GET
//     /alpha/applications/{id}: applied when application_status is
//     submitted or accepted, and the response is that GET's (a 200 with the
//     application's record); not applied (nil, nil) when it is in_progress
//     and the API cannot still be at the submit (below).
//     The record carries no submission time: an application submitted is
//     submitted once, whoever submitted it.
//   - for POST /alpha/applications/start, by the user's applications
//     (POST /v1/users/{user_id}/applications, filtered by the start's
//     competition_id, newest first, page after page until one comes back
//     short: the route's answer carries no count of pages or records):
//     applied when exactly one application (by its application_id, which
//     a start landing between two pages can show twice) is named the
//     submission id, and the response is the one start would have sent,
//     a 200 with its application_id; not applied when none is and the
//     API cannot still be at the start.
//   - for a POST that only reads (a user's applications, an application's
//     submissions or audit history), not applied: sending it again changes
//     nothing.
//
// The API may still be at a write after the gateway answered 504
// ("Endpoint request timed out": the gateway stops waiting at 29 s, the
// API goes on), or after the attempt was given up unanswered (q.Err a
// timeout or a cancellation, as the Transport's attempt timeout is):
// then an application not found, or found in_progress, is no
// evidence, and Reconcile cannot tell. The Transport asks again within
// the call's budget; found, the write is reconciled. The sources give no
// time by which the API must have finished, so no wait makes "not found"
// an answer after such an attempt: the call ends in a dead letter,
// unsent a second time, when the budget runs out first.
//
// It cannot tell (an error wrapping [ErrCannotTell]) then, and when the
// request is none of those, the call has no submission id, its start's
// body cannot be read again or its application_name is another
// ([ErrNameMismatch]), no user was given ([Reconciler.ForUser]), the API
// answers anything but a 200 it can read (maintenance, a quota, the
// gateway's refusal), more than one application carries the name, or
// the user has more than 10,000 applications in the competition (the
// list is read 500 at a time, 20 pages at most). On a nil *Reconciler it
// answers an error too.
func (r *Reconciler) Reconcile(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotTell, errNilReconciler)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotTell, r.err)
	}
	if q.Request == nil || q.Request.URL == nil {
		return nil, fmt.Errorf("%w: a reconcile query without a request", ErrCannotTell)
	}
	p, ok := strings.CutPrefix(q.Request.URL.Path, r.base.Path)
	if !ok || q.Request.Method != http.MethodPost {
		return nil, fmt.Errorf("%w: %s %s is not a route of the API at %s", ErrCannotTell, q.Request.Method, q.Request.URL.Path, r.base.Redacted())
	}
	switch {
	case p == "/alpha/applications/start":
		return r.reconcileStart(ctx, q)
	case reSubmit.MatchString(p):
		return r.reconcileSubmit(ctx, q, reSubmit.FindStringSubmatch(p)[1])
	case reReads.MatchString(p):
		return nil, nil
	}
	return nil, fmt.Errorf("%w: POST %s is neither a start nor a submit", ErrCannotTell, p)
}

// mayStillWork reports whether the API may still be at the write q asks
// about: the gateway answered 504 (it gives up on the API at 29 s, and
// the API goes on, api_gateway.tf:338), or the attempt was given up
// unanswered on this side (a timeout, the Transport's attempt timeout
// among them, or a cancellation), the request perhaps still on its way
// or under way.
func mayStillWork(q grantretry.ReconcileQuery) bool {
	if q.Status == http.StatusGatewayTimeout {
		return true
	}
	if q.Status != 0 || q.Err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(q.Err, context.DeadlineExceeded) || errors.Is(q.Err, context.Canceled) ||
		(errors.As(q.Err, &ne) && ne.Timeout())
}

// stillWorking is Reconcile's error for a write not found that the API
// may still be at.
func stillWorking(q grantretry.ReconcileQuery, what string) error {
	why := "the attempt was given up unanswered"
	if q.Status != 0 {
		why = fmt.Sprintf("the gateway answered the attempt %d", q.Status)
	}
	return fmt.Errorf("%w: %s, and %s: the API may still be at it", ErrCannotTell, what, why)
}

func (r *Reconciler) reconcileSubmit(ctx context.Context, q grantretry.ReconcileQuery, id string) (*http.Response, error) {
	resp, body, err := r.ask(ctx, http.MethodGet, "/alpha/applications/"+id, nil)
	if err != nil {
		return nil, err
	}
	var got struct {
		Data struct {
			ApplicationID     string `json:"application_id"`
			ApplicationStatus string `json:"application_status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &got); err != nil || !strings.EqualFold(got.Data.ApplicationID, id) {
		return nil, fmt.Errorf("%w: the API's record of application %s does not read as one", ErrCannotTell, id)
	}
	switch got.Data.ApplicationStatus {
	case statusSubmitted, statusAccepted:
		return answerOf(resp, body), nil
	case "in_progress":
		if mayStillWork(q) {
			return nil, stillWorking(q, "application "+id+" is in_progress")
		}
		return nil, nil
	}
	return nil, fmt.Errorf("%w: application %s has status %q", ErrCannotTell, id, got.Data.ApplicationStatus)
}

func (r *Reconciler) reconcileStart(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
	if q.SubmissionID == "" {
		return nil, fmt.Errorf("%w: a start without a submission id (grantretry.WithSubmissionID) cannot be found by its name", ErrCannotTell)
	}
	competition, err := startBody(q)
	if err != nil {
		return nil, err
	}
	if r.userID == "" {
		return nil, fmt.Errorf("%w: no user to list the applications of (Reconciler.ForUser)", ErrCannotTell)
	}
	var found []string
	seen := make(map[string]bool)
	for page := 1; ; page++ {
		if page > maxListPages {
			return nil, fmt.Errorf("%w: the user has more than %d applications", ErrCannotTell, maxListPages*listPageSize)
		}
		ids, n, err := r.listPage(ctx, competition, q.SubmissionID, page)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if key := strings.ToLower(id); !seen[key] {
				seen[key] = true
				found = append(found, id)
			}
		}
		if n < listPageSize {
			break // a short page is the last
		}
	}
	switch len(found) {
	case 0:
		if mayStillWork(q) {
			return nil, stillWorking(q, "no application is named "+strconv.Quote(q.SubmissionID))
		}
		return nil, nil
	case 1:
		b, _ := json.Marshal(map[string]any{"message": "Success", "data": map[string]any{"application_id": found[0]}, "status_code": http.StatusOK})
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/json"}},
			Body:          io.NopCloser(bytes.NewReader(b)),
			ContentLength: int64(len(b)),
		}, nil
	}
	return nil, fmt.Errorf("%w: %d applications are named %q: %s", ErrCannotTell, len(found), q.SubmissionID, strings.Join(found, ", "))
}

// startBody reads the start's body again, for its competition_id, and
// checks its application_name. A body the Transport could not keep
// cannot be checked: the start may have been named otherwise, and
// looked for by the submission id it would not be found.
func startBody(q grantretry.ReconcileQuery) (competition string, err error) {
	body := q.Request.Body
	if body == nil && q.Request.GetBody != nil {
		b, err := q.Request.GetBody()
		if err != nil {
			return "", fmt.Errorf("%w: reading the start's body again: %w", ErrCannotTell, err)
		}
		body = b
	}
	if body == nil {
		return "", fmt.Errorf("%w: the start's body is gone: its application_name cannot be checked", ErrCannotTell)
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, maxQueryBytes))
	if err != nil {
		return "", fmt.Errorf("%w: reading the start's body again: %w", ErrCannotTell, err)
	}
	var start struct {
		CompetitionID   string  `json:"competition_id"`
		ApplicationName *string `json:"application_name"`
	}
	if err := json.Unmarshal(raw, &start); err != nil {
		return "", fmt.Errorf("%w: the start's body is not its JSON: %w", ErrCannotTell, err)
	}
	if start.ApplicationName == nil || *start.ApplicationName != q.SubmissionID {
		name := "none"
		if start.ApplicationName != nil {
			name = strconv.Quote(*start.ApplicationName)
		}
		return "", fmt.Errorf("%w: %w: application_name %s, submission id %q", ErrCannotTell, ErrNameMismatch, name, q.SubmissionID)
	}
	return start.CompetitionID, nil
}

// listPage reads one page of the user's applications, newest first, and
// returns the ids of those named name, and how many applications the
// page holds. The answer is UserApplicationListResponseSchema (message,
// data, status_code): the route hands the service's pagination_info to
// a response schema without PaginationMixinSchema, which leaves it out
// (HHS/simpler-grants-gov@32d9a126f api/src/api/users/user_routes.py:349,
// user_schemas.py:430; openapi.generated.yml:10171-10188).
func (r *Reconciler) listPage(ctx context.Context, competition, name string, page int) ([]string, int, error) {
	req := map[string]any{"pagination": map[string]any{
		"page_offset": page, "page_size": listPageSize,
		"sort_order": []any{map[string]any{"order_by": "created_at", "sort_direction": "descending"}},
	}}
	if competition != "" {
		req["filters"] = map[string]any{"competition_id": map[string]any{"one_of": []string{competition}}}
	}
	b, _ := json.Marshal(req)
	_, body, err := r.ask(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(r.userID)+"/applications", b)
	if err != nil {
		return nil, 0, err
	}
	var got struct {
		Data *[]struct {
			ApplicationID   string  `json:"application_id"`
			ApplicationName *string `json:"application_name"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Data == nil || len(*got.Data) > listPageSize {
		return nil, 0, fmt.Errorf("%w: the user's applications do not read as a list of at most %d", ErrCannotTell, listPageSize)
	}
	var ids []string
	for _, a := range *got.Data {
		if a.ApplicationName != nil && *a.ApplicationName == name {
			if a.ApplicationID == "" {
				return nil, 0, fmt.Errorf("%w: an application named %q has no application_id", ErrCannotTell, name)
			}
			ids = append(ids, a.ApplicationID)
		}
	}
	return ids, len(*got.Data), nil
}

// ask sends one query to the API and reads its answer, which must be a
// 200.
func (r *Reconciler) ask(ctx context.Context, method, path string, body []byte) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	u := *r.base
	u.Path += path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s %s: %w", ErrCannotTell, method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s %s: %w", ErrCannotTell, method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxQueryBytes+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("%w: %s %s: reading the answer: %w", ErrCannotTell, method, path, err)
	case len(raw) > maxQueryBytes:
		return nil, nil, fmt.Errorf("%w: %s %s: the answer is over %d bytes", ErrCannotTell, method, path, maxQueryBytes)
	case resp.StatusCode != http.StatusOK:
		why := ""
		if c, ok := ClassifyFault(resp, raw); ok {
			why = " (" + c.Reason + ")"
		}
		return nil, nil, fmt.Errorf("%w: %s %s answered %d%s", ErrCannotTell, method, path, resp.StatusCode, why)
	}
	return resp, raw, nil
}

// answerOf is resp with its body, already read, to read again.
func answerOf(resp *http.Response, body []byte) *http.Response {
	c := *resp
	c.Header = resp.Header.Clone()
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	c.Header.Del("Content-Length")
	c.Request = nil
	return &c
}
