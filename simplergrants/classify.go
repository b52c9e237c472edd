package simplergrants

import (
	"encoding/json"
	"net/http"

	"github.com/grantretry/grantretry"
)

// ClassifyFault is a [grantretry.ClassifyFunc] for the Simpler Grants.gov
// REST API (api.simpler.grants.gov) and the AWS API Gateway in front of
// it. It reads the application's error JSON (ErrorResponseSchema:
// message, status_code, errors[].type), the gateway's own answers
// ({"message": ...} with no status_code) and the gateway's
// x-amzn-ErrorType header, against the package's rules, each an answer
// the API's source or AWS's documentation publishes:
//
//	aws:LimitExceededException          429, x-amzn-ErrorType          owed (the monthly quota)
//	aws:TooManyRequestsException        429, x-amzn-ErrorType          transient (10 req/s, burst 15)
//	simplergrants:gateway_forbidden     403 {"message":"Forbidden"}    terminal (no valid X-API-Key)
//	simplergrants:gateway_timeout       504 "Endpoint request timed out"  transient (29 s)
//	simplergrants:maintenance           503 scheduled maintenance      owed
//	simplergrants:already_submitted     403 not_in_progress, submit    applied
//	simplergrants:not_in_progress       403 not_in_progress, other     terminal
//	simplergrants:competition_not_open  422 competition_not_open       terminal
//	simplergrants:pending_file_upload_limit_exceeded  429              owed
//
// already_submitted needs the answer's request (resp.Request), when it
// has one, to be POST .../alpha/applications/{id}/submit: the text is
// the submit's; to any other request, not_in_progress is terminal.
//
// The first rule that matches gives the verdict, and its name is the
// Reason; no text from the body reaches it. The Transport puts the
// status's form in front: "owed:429;aws:LimitExceededException".
//
// An owed verdict's NotBefore is left zero: the Transport reads the
// answer's Retry-After (maintenance carries one, the quotas none) on its
// [grantretry.Clock] and completes it, as [grantretry.Classification.NotBefore]
// says. The applied verdict, a resent submit of an application the API
// holds as submitted or accepted, is not retryable and has Applied set:
// what it means for the call is the Transport's to decide. A 504 from the
// gateway is transient; the Transport also counts it ambiguous, since the
// API may finish the work after the gateway gave up on it.
//
// ok is false, leaving the verdict to [grantretry.ClassifyLimits] and the
// status sets, for any other answer: a status below 400, an error type or
// message no rule knows, a body that is not a JSON object (or is cut off
// at [grantretry.MaxClassifyPeek] bytes). It reads only body, of it at
// most MaxClassifyPeek bytes, never resp.Body, and changes nothing; it is
// safe for concurrent use.
func ClassifyFault(resp *http.Response, body []byte) (grantretry.Classification, bool) {
	if resp == nil || resp.StatusCode < 400 || resp.StatusCode > 599 {
		return grantretry.Classification{}, false
	}
	if len(body) > grantretry.MaxClassifyPeek {
		body = body[:grantretry.MaxClassifyPeek]
	}
	a := readAnswer(body)
	for i := range rules {
		r := &rules[i]
		if r.matches(resp, a) {
			return verdict(r), true
		}
	}
	return grantretry.Classification{}, false
}

func verdict(r *rule) grantretry.Classification {
	c := grantretry.Classification{Reason: r.name}
	switch r.kind {
	case kindTransient:
		c.Retryable = true
	case kindOwed:
		c.Owed = true
	case kindApplied:
		c.Applied = true
	}
	return c
}

// answer is what ClassifyFault reads of a body: the fields the
// application's ErrorResponseSchema and the gateway's default responses
// share or tell them apart by.
type answer struct {
	json       bool            // the body is a JSON object
	Message    string          `json:"message"`
	StatusCode json.RawMessage `json:"status_code"`
	Errors     []struct {
		Type string `json:"type"`
	} `json:"errors"`
}

func readAnswer(body []byte) answer {
	var a answer
	if json.Unmarshal(body, &a) != nil {
		return answer{}
	}
	a.json = true
	return a
}

// fromGateway reports whether the answer is the gateway's own, which
// carries a message only; every answer of the application carries its
// status_code (ErrorResponseSchema, and the application's own 403
// "Forbidden" of api/src/auth/endpoint_access_util.py:109).
func (a answer) fromGateway() bool {
	return a.Message != "" && len(a.StatusCode) == 0 && a.Errors == nil
}

func (a answer) hasType(t string) bool {
	for _, e := range a.Errors {
		if e.Type == t {
			return true
		}
	}
	return false
}
