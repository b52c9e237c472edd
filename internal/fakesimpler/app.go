package fakesimpler

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

var (
	reUUID        = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`
	reApplication = regexp.MustCompile(`^/alpha/applications/(` + reUUID + `)$`)
	reSubmit      = regexp.MustCompile(`^/alpha/applications/(` + reUUID + `)/submit$`)
	reUserApps    = regexp.MustCompile(`^/v1/users/(` + reUUID + `)/applications$`)
	reCompetition = regexp.MustCompile(`^/alpha/competitions/(` + reUUID + `)$`)
	reOnlyUUID    = regexp.MustCompile(`^` + reUUID + `$`)
)

// serveAPI is the application behind the gateway.
func (a *API) serveAPI(r *http.Request, body []byte) *answer {
	a.mu.Lock()
	inMaint, retryAfter := a.inMaint, a.maintenance
	if inMaint {
		a.ledger.InMaint++
	}
	a.mu.Unlock()
	if inMaint {
		ans := jsonAnswer(http.StatusServiceUnavailable, `{"message": "API is undergoing scheduled maintenance", "status_code": 503, "errors": []}`)
		ans.header.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
		return ans
	}
	route, id := "", ""
	switch p := r.URL.Path; {
	case p == "/alpha/applications/start" && r.Method == http.MethodPost:
		route = "start"
	case reSubmit.MatchString(p) && r.Method == http.MethodPost:
		route, id = "submit", reSubmit.FindStringSubmatch(p)[1]
	case reApplication.MatchString(p) && r.Method == http.MethodGet:
		route, id = "get", reApplication.FindStringSubmatch(p)[1]
	case reUserApps.MatchString(p) && r.Method == http.MethodPost:
		route, id = "list", reUserApps.FindStringSubmatch(p)[1]
	case reCompetition.MatchString(p) && r.Method == http.MethodGet:
		// A user's API key or session will do (jwt_or_api_user_key_multi_auth,
		// competition_route.py:22), and the gateway has checked the key.
		return a.competition(strings.ToLower(reCompetition.FindStringSubmatch(p)[1]))
	default:
		return errorAnswer(http.StatusNotFound, "Not Found")
	}
	user, ok := a.cfg.Users[r.Header.Get("X-SGG-Token")]
	if !ok || r.Header.Get("X-SGG-Token") == "" {
		return errorAnswer(http.StatusUnauthorized, "Token session does not exist")
	}
	switch route {
	case "start":
		return a.start(user, body)
	case "submit":
		return a.submit(user, strings.ToLower(id))
	case "get":
		return a.get(user, strings.ToLower(id))
	default:
		return a.list(user, strings.ToLower(id), body)
	}
}

// issue is one of ErrorResponseSchema's errors (ValidationIssueSchema).
type issue struct {
	Type    string  `json:"type"`
	Message string  `json:"message"`
	Field   *string `json:"field"`
	Value   any     `json:"value"`
}

func errorAnswer(status int, message string, issues ...issue) *answer {
	if issues == nil {
		issues = []issue{}
	}
	b, _ := json.Marshal(map[string]any{
		"data": map[string]any{}, "errors": issues, "internal_request_id": newUUID(),
		"message": message, "status_code": status,
	})
	return jsonAnswer(status, string(b))
}

func success(data any) *answer {
	b, _ := json.Marshal(map[string]any{"message": "Success", "data": data, "status_code": http.StatusOK})
	return jsonAnswer(http.StatusOK, string(b))
}

func jsonAnswer(status int, body string) *answer {
	return &answer{status: status, header: http.Header{"Content-Type": {"application/json"}}, body: []byte(body)}
}

func (a *API) start(user string, body []byte) *answer {
	var req struct {
		CompetitionID   *string `json:"competition_id"`
		ApplicationName *string `json:"application_name"`
	}
	field := "competition_id"
	if json.Unmarshal(body, &req) != nil || req.CompetitionID == nil {
		return errorAnswer(http.StatusUnprocessableEntity, "Validation error",
			issue{Type: "required", Message: "Missing data for required field.", Field: &field})
	}
	if !reOnlyUUID.MatchString(*req.CompetitionID) {
		return errorAnswer(http.StatusUnprocessableEntity, "Validation error",
			issue{Type: "invalid_uuid", Message: "Not a valid UUID.", Field: &field, Value: *req.CompetitionID})
	}
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.competitions[strings.ToLower(*req.CompetitionID)]
	if !ok {
		return errorAnswer(http.StatusNotFound, "Competition not found")
	}
	if closed(c, now) {
		return notOpen("start")
	}
	name := c.OpportunityNumber
	if req.ApplicationName != nil {
		name = *req.ApplicationName
	}
	app := &Application{ID: newUUID(), CompetitionID: c.ID, Name: name, Status: StatusInProgress, UserID: user, CreatedAt: now}
	a.apps[app.ID] = app
	a.order = append(a.order, app.ID)
	a.ledger.Started++
	ans := success(map[string]any{"application_id": app.ID})
	ans.applied = true
	return ans
}

// closed reports whether c is closed at now: by has_open_date
// (api/src/db/models/competition_models.py:104-136), once the date in US
// Eastern time is past its closing date plus its grace period in days,
// or at Closes.
func closed(c Competition, now time.Time) bool {
	if c.ClosingDate != "" {
		last, err := time.Parse(time.DateOnly, c.ClosingDate)
		if err == nil {
			last = last.AddDate(0, 0, max(c.GracePeriod, 0))
			if now.In(eastern).Format(time.DateOnly) > last.Format(time.DateOnly) {
				return true
			}
		}
	}
	return !c.Closes.IsZero() && !now.Before(c.Closes)
}

// competition answers GET /alpha/competitions/{competition_id}
// (OpenAPI:1882-1914): CompetitionAlphaSchema (OpenAPI:7293-7375) of
// what the fake knows, 404 "Could not find Competition with ID ..."
// (api/src/services/competition_alpha/get_competition.py:32) for one it
// does not. grace_period is not in the schema.
func (a *API) competition(id string) *answer {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.competitions[id]
	if !ok {
		return errorAnswer(http.StatusNotFound, "Could not find Competition with ID "+id)
	}
	var closing any
	if c.ClosingDate != "" {
		closing = c.ClosingDate
	}
	return success(map[string]any{
		"competition_id": c.ID, "competition_title": nil, "opening_date": nil, "closing_date": closing,
		"competition_forms": []any{}, "competition_instructions": []any{}, "contact_info": nil,
		"opportunity_assistance_listing": nil, "open_to_applicants": []any{},
		"is_open": !closed(c, now), "is_simpler_grants_enabled": true,
	})
}

func notOpen(action string) *answer {
	return errorAnswer(http.StatusUnprocessableEntity, "Cannot "+action+" application - competition is not open",
		issue{Type: "competition_not_open", Message: "Competition is not open for application"})
}

// application finds id for user: 404 if there is none, 403 if it is not
// the user's. a.mu must be held.
func (a *API) application(user, id string) (*Application, *answer) {
	app, ok := a.apps[id]
	if !ok {
		return nil, errorAnswer(http.StatusNotFound, "Application with ID "+id+" not found")
	}
	if app.UserID != user {
		return nil, errorAnswer(http.StatusForbidden, "Forbidden")
	}
	return app, nil
}

// submit runs the checks in the order submit_application.py runs them.
func (a *API) submit(user, id string) *answer {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	app, refused := a.application(user, id)
	if refused != nil {
		return refused
	}
	if app.Status != StatusInProgress {
		return errorAnswer(http.StatusForbidden, "Cannot submit application. It is currently in status: "+app.Status,
			issue{Type: "not_in_progress", Message: "Cannot submit application, not currently in progress"})
	}
	if closed(a.competitions[app.CompetitionID], now) {
		return notOpen("submit")
	}
	app.Status = StatusSubmitted
	app.SubmittedAt = now
	a.ledger.Submitted[app.ID]++
	ans := success(nil)
	ans.applied = true
	return ans
}

func (a *API) get(user, id string) *answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	app, refused := a.application(user, id)
	if refused != nil {
		return refused
	}
	return success(map[string]any{
		"application_id":          app.ID,
		"application_name":        app.Name,
		"application_status":      app.Status,
		"competition":             map[string]any{"competition_id": app.CompetitionID},
		"application_forms":       []any{},
		"application_attachments": []any{},
		"organization":            nil,
		"users":                   []any{map[string]any{"user_id": app.UserID}},
	})
}

// listRequest is UserApplicationListRequestSchema, of it what the fake
// reads.
type listRequest struct {
	Filters *struct {
		ApplicationStatus *struct {
			OneOf []string `json:"one_of"`
		} `json:"application_status"`
		CompetitionID *struct {
			OneOf []string `json:"one_of"`
		} `json:"competition_id"`
	} `json:"filters"`
	Pagination *struct {
		PageOffset int `json:"page_offset"`
		PageSize   int `json:"page_size"`
		SortOrder  []struct {
			OrderBy       string `json:"order_by"`
			SortDirection string `json:"sort_direction"`
		} `json:"sort_order"`
	} `json:"pagination"`
}

func (a *API) list(user, userID string, body []byte) *answer {
	if userID != strings.ToLower(user) {
		return errorAnswer(http.StatusForbidden, "Forbidden")
	}
	var req listRequest
	field := "pagination"
	if json.Unmarshal(body, &req) != nil || req.Pagination == nil {
		return errorAnswer(http.StatusUnprocessableEntity, "Validation error",
			issue{Type: "required", Message: "Missing data for required field.", Field: &field})
	}
	p := req.Pagination
	if p.PageOffset < 1 || p.PageSize < 1 || p.PageSize > 5000 {
		return errorAnswer(http.StatusUnprocessableEntity, "Validation error",
			issue{Type: "min_or_max", Message: "page_offset must be at least 1, page_size 1 to 5000.", Field: &field})
	}
	ascending := len(p.SortOrder) > 0 && p.SortOrder[0].SortDirection == "ascending"
	a.mu.Lock()
	var apps []Application
	for _, id := range a.order {
		app := a.apps[id]
		if app.UserID != user || !req.matches(app) {
			continue
		}
		apps = append(apps, *app)
	}
	a.mu.Unlock()
	sort.SliceStable(apps, func(i, j int) bool {
		if ascending {
			return apps[i].CreatedAt.Before(apps[j].CreatedAt)
		}
		return apps[i].CreatedAt.After(apps[j].CreatedAt)
	})
	total := len(apps)
	from := min((p.PageOffset-1)*p.PageSize, total)
	to := min(from+p.PageSize, total)
	items := make([]map[string]any, 0, to-from)
	for _, app := range apps[from:to] {
		items = append(items, map[string]any{
			"application_id": app.ID, "application_name": app.Name, "application_status": app.Status,
			"organization": nil, "competition": map[string]any{"competition_id": app.CompetitionID},
		})
	}
	// The route hands the service's pagination info to a response schema
	// without it (UserApplicationListResponseSchema: message, data,
	// status_code), which leaves it out of the answer.
	return success(items)
}

func (req *listRequest) matches(app *Application) bool {
	f := req.Filters
	if f == nil {
		return true
	}
	if f.ApplicationStatus != nil && !contains(f.ApplicationStatus.OneOf, app.Status) {
		return false
	}
	if f.CompetitionID != nil && !contains(f.CompetitionID.OneOf, app.CompetitionID) {
		return false
	}
	return true
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if strings.EqualFold(x, v) {
			return true
		}
	}
	return false
}

// String names an application in a test's failure.
func (app Application) String() string {
	return fmt.Sprintf("%s %q %s", app.ID, app.Name, app.Status)
}
