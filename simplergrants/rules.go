package simplergrants

import (
	"net/http"
	"regexp"
	"strings"
)

// verdictKind is what a rule's answer means.
type verdictKind uint8

const (
	kindTerminal  verdictKind = iota // a refusal the same request meets again
	kindTransient                    // clears in seconds: retried within the budget
	kindOwed                         // not refused: the API takes the request later
	kindApplied                      // an earlier copy of the request was applied
)

// A rule is one answer the API, or the gateway in front of it, is
// published to give. A response matches when its status is status (0:
// any of 400 or more) and, as given: its header carries value, the error
// type is one of its body's errors[].type, its message starts with
// message (is message, for the gateway's), its body is the gateway's own
// (a JSON object with a message and no status_code) or the application's
// (with a status_code), and, for a submit-only rule, the request it
// answers (resp.Request, when there is one) is a submit.
type rule struct {
	name    string // the reason reported
	status  int    // 0: any 4xx or 5xx
	header  string // a header it carries, canonical; "" if none
	value   string // that header's value, or its start before ":"
	errType string // an errors[].type of the application's error JSON
	message string // the start of the body's message
	gateway bool   // the body is the gateway's {"message": ...}, not the application's
	submit  bool   // the answer is to POST .../applications/{id}/submit, when resp.Request says
	kind    verdictKind
	source  string // where the answer is published, file and line
}

// srcAPI is the repository and commit every file below is read from.
const srcAPI = "HHS/simpler-grants-gov@32d9a126f "

// srcAWS is AWS's list of API Gateway's gateway responses, their status
// and default body; api.simpler.grants.gov customises none.
const srcAWS = "docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html"

// rules is ClassifyFault's table, in the order it is tried: the gateway's
// answers first (it answers before the application sees the request),
// and for one error type, the more exact match first. ClassifyFault's
// documentation and docs/simplergrants.md list it row for row. It is
// never written after initialisation.
var rules = []rule{
	{
		name: "aws:LimitExceededException", status: http.StatusTooManyRequests, header: "X-Amzn-Errortype", value: "LimitExceededException", kind: kindOwed,
		source: srcAPI + "infra/modules/service/api_gateway.tf:680-683 (quota_settings: 250000 per MONTH); " + srcAWS + " (QUOTA_EXCEEDED, 429 {\"message\":\"Limit Exceeded\"}, no Retry-After)",
	},
	{
		name: "aws:TooManyRequestsException", status: http.StatusTooManyRequests, header: "X-Amzn-Errortype", value: "TooManyRequestsException", kind: kindTransient,
		source: srcAPI + "infra/modules/service/api_gateway.tf:674-677 (throttle_settings: rate_limit 10, burst_limit 15); " + srcAWS + " (THROTTLED, 429 {\"message\":\"Too Many Requests\"})",
	},
	{
		name: "simplergrants:gateway_forbidden", status: http.StatusForbidden, message: "Forbidden", gateway: true, kind: kindTerminal,
		source: srcAPI + "infra/modules/service/api_gateway.tf:24-26 (api_key_required on every proxied route); " + srcAWS + " (INVALID_API_KEY, 403 {\"message\":\"Forbidden\"})",
	},
	{
		name: "simplergrants:gateway_timeout", status: http.StatusGatewayTimeout, message: "Endpoint request timed out", gateway: true, kind: kindTransient,
		source: srcAPI + "infra/modules/service/api_gateway.tf:338 (timeout_milliseconds = 29000); " + srcAWS + " (INTEGRATION_TIMEOUT, 504 {\"message\":\"Endpoint request timed out\"})",
	},
	{
		name: "simplergrants:maintenance", status: http.StatusServiceUnavailable, message: "API is undergoing scheduled maintenance", kind: kindOwed,
		source: srcAPI + "api/tests/src/api/test_maintenance_mode_handler.py:21-32 (503, Retry-After, the body); api/src/app.py:107-110 (before authentication)",
	},
	{
		name: "simplergrants:already_submitted", status: http.StatusForbidden, errType: "not_in_progress", message: "Cannot submit application.", submit: true, kind: kindApplied,
		source: srcAPI + "api/src/services/applications/application_validation.py:352-378 (validate_application_in_progress: 403, \"Cannot submit application. It is currently in status: ...\"), run first by api/src/services/applications/submit_application.py:45, the service of POST /alpha/applications/{application_id}/submit (api/src/api/application_alpha/application_route.py:309)",
	},
	{
		name: "simplergrants:not_in_progress", status: http.StatusForbidden, errType: "not_in_progress", kind: kindTerminal,
		source: srcAPI + "api/src/services/applications/application_validation.py:352-378 (any other action on an application not in progress); api/src/validation/validation_constants.py:36",
	},
	{
		name: "simplergrants:competition_not_open", status: http.StatusUnprocessableEntity, errType: "competition_not_open", kind: kindTerminal,
		source: srcAPI + "api/src/services/applications/application_validation.py:381-404 (validate_competition_open: 422), run by submit_application.py:46 and create_application.py:159; api/src/validation/validation_constants.py:39",
	},
	{
		name: "simplergrants:pending_file_upload_limit_exceeded", status: http.StatusTooManyRequests, errType: "pending_file_upload_limit_exceeded", kind: kindOwed,
		source: srcAPI + "api/src/services/files/create_presigned_upload.py:185-207 (429, no Retry-After, a count over a window of hours); api/src/validation/validation_constants.py:61",
	},
}

// matches reports whether r matches resp, whose body reads as a.
func (r *rule) matches(resp *http.Response, a answer) bool {
	if r.status != 0 && resp.StatusCode != r.status {
		return false
	}
	if r.header != "" {
		v := strings.TrimSpace(resp.Header.Get(r.header))
		if v != r.value && !strings.HasPrefix(v, r.value+":") {
			return false
		}
	}
	if r.submit && resp.Request != nil && !isSubmit(resp.Request) {
		return false
	}
	if r.errType == "" && r.message == "" {
		return true
	}
	if !a.json || (r.gateway && !a.fromGateway()) || (!r.gateway && a.fromGateway()) {
		return false
	}
	if r.errType != "" && !a.hasType(r.errType) {
		return false
	}
	if r.gateway {
		return a.Message == r.message
	}
	return strings.HasPrefix(a.Message, r.message)
}

// reSubmitPath is a submit's path, under any base path.
var reSubmitPath = regexp.MustCompile(`/alpha/applications/` + reUUID + `/submit$`)

// isSubmit reports whether req is POST .../applications/{id}/submit.
func isSubmit(req *http.Request) bool {
	return req.Method == http.MethodPost && req.URL != nil && reSubmitPath.MatchString(req.URL.Path)
}
