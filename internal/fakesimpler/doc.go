// Package fakesimpler is a fake of the Simpler Grants.gov REST API
// (api.simpler.grants.gov) and the AWS API Gateway in front of it, built
// from the API's published contract, for testing what retries do to a
// funder whose start creates a new application on every call.
//
// # Sources
//
// Each behaviour names where it comes from. Paths are of
// HHS/simpler-grants-gov at commit 32d9a126f; "OpenAPI" is its
// api/openapi.generated.yml, "AWS" is AWS's list of API Gateway's default
// gateway responses (docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html),
// which the service does not customise.
//
// The gateway, in the order it acts (gateway.go):
//
//   - X-API-Key is required: a call without one the gateway knows gets
//     403 {"message":"Forbidden"} before the API sees it
//     (infra/modules/service/api_gateway.tf:22-26, api_key_required on the
//     {proxy+} route; AWS, INVALID_API_KEY). The fake requires the key on
//     every route; which of the gateway's resources the apply routes land
//     on is a matter of API Gateway's routing the sources do not settle.
//   - The usage plan's throttle, a token bucket per key of burst_limit 15
//     refilled at rate_limit 10 a second (api_gateway.tf:674-677): past
//     it, 429 {"message":"Too Many Requests"} with x-amzn-ErrorType
//     TooManyRequestsException (AWS, THROTTLED).
//   - The usage plan's quota, 250000 requests per key per MONTH
//     (api_gateway.tf:680-683), counted per calendar month in UTC: past
//     it, 429 {"message":"Limit Exceeded"} with x-amzn-ErrorType
//     LimitExceededException and no Retry-After (AWS, QUOTA_EXCEEDED).
//     A call the throttle refused is not counted: AWS's documentation
//     does not say, and the reference does not either.
//   - The integration timeout of 29000 ms (api_gateway.tf:338): an API
//     that takes that long gets 504 {"message": "Endpoint request timed
//     out"} (AWS, INTEGRATION_TIMEOUT) while the API carries the request
//     out all the same. The fake answers the 504 at the timeout and
//     carries the request out when its work is done, after the 504 went
//     out; [API.Wait] returns once it has.
//   - A request the gateway passed on is the API's: it carries it out
//     whether or not the client still waits for the answer, as an API
//     Gateway integration does; no source says the API calls it off.
//
// The API (app.go):
//
//   - Maintenance: every call 503 with Retry-After and {"message": "API is
//     undergoing scheduled maintenance", "status_code": 503, "errors": []},
//     before authentication (api/tests/src/api/test_maintenance_mode_handler.py:21-32,
//     api/src/app.py:107-110).
//   - X-SGG-Token, the user's session (api/src/auth/api_jwt_auth.py:18):
//     a token of no user is 401, "Token session does not exist"
//     (api_jwt_auth.py:73, api/src/auth/internal_jwt_auth.py:124). The
//     fake gives a missing token the same answer; the source of a missing
//     header's text is the framework's, not the reference's.
//   - Errors are ErrorResponseSchema (OpenAPI:5184-5208): data, errors[]
//     (type, message, field, value), internal_request_id, message,
//     status_code. Successes are {"message": "Success", "data": ...,
//     "status_code": 200}; a submit's data is null (the route returns
//     ApiResponse(message="Success"), api/src/api/application_alpha/application_route.py:333,
//     whose serialised data the reference does not show).
//   - POST /alpha/applications/start (OpenAPI:634-669,
//     ApplicationStartRequestSchema OpenAPI:6850): competition_id is
//     required (api/src/api/application_alpha/application_schemas.py:23-24;
//     422 "Validation error" with a "required" issue: the text is the
//     framework's, assembled), an unknown competition is 404 "Competition
//     not found" (api/src/services/applications/create_application.py:129),
//     a closed one 422 competition_not_open (create_application.py:159),
//     application_name defaults to the opportunity number
//     (create_application.py:165-166). Every call that passes creates a new
//     application in_progress (create_application.py:169-174): there is no
//     idempotency key. It answers data.application_id
//     (ApplicationStartResponseSchema, OpenAPI:6835-6849).
//   - POST /alpha/applications/{application_id}/submit (OpenAPI:2324-2350),
//     its checks in the order api/src/services/applications/submit_application.py:31-47
//     runs them: the application (404 "Application with ID ... not found",
//     api/src/services/applications/get_application.py:78), the user's
//     access (403 "Forbidden", api/src/auth/endpoint_access_util.py:109),
//     in progress (403, "Cannot submit application. It is currently in
//     status: submitted", not_in_progress; application_validation.py:352-378),
//     the competition open (422 competition_not_open; application_validation.py:381-404).
//     The forms (validate_forms, line 47) are not checked: the fake holds
//     no forms. Then in_progress becomes submitted and submitted_at is set
//     (submit_application.py:50-51).
//   - GET /alpha/applications/{application_id} (OpenAPI:1802-1829): of
//     ApplicationGetResponseDataSchema (OpenAPI:11015-11086),
//     application_id, application_name, application_status, competition
//     (competition_id only), users (user_id only), empty application_forms
//     and application_attachments, a null organization. No submitted_at:
//     the schema carries none.
//   - POST /v1/users/{user_id}/applications (OpenAPI:1387-1426, "Internal
//     Only"), the only route that lists a user's applications with their
//     application_name: user_id must be the token's user, else 403
//     "Forbidden" (api/src/api/users/user_routes.py:334-335); pagination is
//     required (UserApplicationListRequestSchema, OpenAPI:10288-10303) with
//     page_offset from 1 and page_size 1 to 5000 (OpenAPI:10259-10287),
//     sorted by created_at, descending unless asked otherwise; filters on
//     application_status and competition_id (OpenAPI:10189-10258), none on
//     the name. Items are UserApplicationListItemSchema (OpenAPI:10136-10170),
//     and the answer is UserApplicationListResponseSchema (OpenAPI:10171-10188):
//     message, data and status_code, no pagination_info. The route hands
//     the service's pagination info to ApiResponse
//     (api/src/api/users/user_routes.py:349), and the response schema,
//     without PaginationMixinSchema (api/src/api/users/user_schemas.py:430),
//     leaves it out: a client knows it read the last page when one comes
//     back short.
//   - GET /alpha/competitions/{competition_id} (OpenAPI:1882-1914), which
//     a user's API key alone may read (jwt_or_api_user_key_multi_auth,
//     api/src/api/competition_alpha/competition_route.py:22): of
//     CompetitionAlphaSchema (OpenAPI:7293-7375), competition_id,
//     closing_date ([Competition].ClosingDate, null if none), is_open,
//     and the rest empty or null; an unknown competition is 404 "Could
//     not find Competition with ID ..." (api/src/services/competition_alpha/get_competition.py:32).
//     A competition is open until the date in US Eastern time is past its
//     closing date plus its grace period in days (has_open_date,
//     api/src/db/models/competition_models.py:104-136); the schema does
//     not carry the grace period.
//   - accepted follows submitted by the API's own processing, which the
//     reference does not show: [API.Accept] does it.
//
// # Faults
//
// [API.DropNext] and [API.DropEvery] close the connection unanswered
// after the API carried a request out; [API.SetWork] makes the API slow,
// past the integration timeout if asked, the work then finishing after
// the 504 ([API.Wait] waits for it); [API.SetMaintenance] puts it into
// maintenance; [API.SpendQuota] spends a key's quota for the month. [API.Ledger] says how many applications were started and
// how many submits each took, and what the gateway refused.
//
// Time is injected ([Config].Now and [Config].Sleep), so a test of the
// 29 s timeout or the throttle waits for nothing.
package fakesimpler
