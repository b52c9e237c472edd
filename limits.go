package grantretry

import (
	"bytes"
	"net/http"
	"strings"
	"time"
)

// ClassifyLimits is the ClassifyFunc for the limits that the platforms and
// gateways in front of funders answer with: it tells a quota, which the
// funder will take the request after (Owed), from a throttle, which clears
// in seconds (transient), where the status alone cannot. Every Transport
// applies it by default to a response of status 400 or more, after the
// WithClassifier function, if any, declines; it needs no option. Its rules,
// each a documented answer of the platform that sends it:
//
//	aws:LimitExceededException     x-amzn-ErrorType, any 4xx/5xx  owed (API Gateway usage-plan quota)
//	aws:TooManyRequestsException   x-amzn-ErrorType, any 4xx/5xx  transient (API Gateway throttle)
//	azure:quota                    403, "Quota will be replenished in"   owed until then
//	salesforce:concurrent_limit    403, "ConcurrentPerOrgLongTxn Limit exceeded"  transient
//	salesforce:REQUEST_LIMIT_EXCEEDED  403, "REQUEST_LIMIT_EXCEEDED"     owed (the rolling 24-hour limit)
//	quota:retry_after              403 with a Retry-After that parses     owed until then (Blackbaud SKY)
//
// The first rule that matches gives the verdict, and its name is the
// Reason ("owed:429;aws:LimitExceededException"). Azure API Management's
// quota says when it refills as a .NET TimeSpan ("22.14:18:12", days and
// hours:minutes:seconds): called on its own, ClassifyLimits counts it from
// the response's Date header, or from the time of reading when it has none
// that parses, and leaves NotBefore zero when the text gives no TimeSpan.
// A [Transport] counts it instead from its [Clock] ([WithClock]) when the
// answer arrived, since a funder's Date may be stale or skewed, and then
// completes it as every Owed verdict (see [Classification.NotBefore]): a
// Retry-After on the same answer that ends later wins, and a time already
// past is now. For the 403 with a Retry-After, NotBefore is left zero: the
// Transport reads the Retry-After on its Clock. A 429 or 503 with a
// Retry-After needs no rule: the Transport waits it out within the call's
// budget, and a wait past the deadline makes the call owed until then (see
// [Classification.Owed]).
//
// ok is false, leaving the verdict to the status sets, for any other
// response, and for any status outside 400 to 599. It reads body only for
// a 403 (of body, at most MaxClassifyPeek bytes), never resp.Body, and
// changes nothing; it is safe for concurrent use.
func ClassifyLimits(resp *http.Response, body []byte) (Classification, bool) {
	return classifyLimits(resp, body, time.Time{})
}

// classifyLimits is ClassifyLimits, with a quota's TimeSpan counted from
// received, the Transport's Clock when the answer arrived; zero: from the
// response's Date, or the time of reading.
func classifyLimits(resp *http.Response, body []byte, received time.Time) (Classification, bool) {
	if resp == nil || resp.StatusCode < 400 || resp.StatusCode > 599 {
		return Classification{}, false
	}
	if len(body) > MaxClassifyPeek {
		body = body[:MaxClassifyPeek]
	}
	for i := range limitRules {
		r := &limitRules[i]
		if r.matches(resp, body) {
			return r.verdict(resp, body, received), true
		}
	}
	return Classification{}, false
}

// limitKind is what a limit rule's answer means.
type limitKind uint8

const (
	limitTransient limitKind = iota // clears in seconds: retried within the budget
	limitOwed                       // a quota: owed, NotBefore unknown (or the Transport's Retry-After)
	limitTimeSpan                   // a quota whose text says, as a .NET TimeSpan, when it refills
)

// limitRule is one answer a platform or gateway gives when a limit is
// reached: a status (0: any of 400 or more), and a header value's name
// or a text in the body, or both, that tell it.
type limitRule struct {
	name     string // the reason reported
	status   int    // the status it comes with; 0: any 4xx or 5xx
	header   string // a header it carries, canonical; "" if none
	value    string // that header's value, or its start before ":"; "" if any value
	contains string // a text in the body, matched as written; "" if none
	// The header is a Retry-After, which must say when (ParseRetryAfter):
	// one that does not is no answer of the platform's.
	retryAfter bool
	kind       limitKind
	source     string // where the answer is documented
}

// limitRules is ClassifyLimits' table, in the order it is tried: the more
// exact text before the one that shares words with it. It is never
// written after initialisation.
var limitRules = []limitRule{
	{
		name: "aws:LimitExceededException", header: "X-Amzn-Errortype", value: "LimitExceededException", kind: limitOwed,
		source: "AWS API Gateway, gateway response QUOTA_EXCEEDED (429 {\"message\":\"Limit Exceeded\"}): docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html; repost.aws/knowledge-center/api-gateway-429-limit",
	},
	{
		name: "aws:TooManyRequestsException", header: "X-Amzn-Errortype", value: "TooManyRequestsException", kind: limitTransient,
		source: "AWS API Gateway, gateway response THROTTLED (429 {\"message\":\"Too Many Requests\"}): docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html",
	},
	{
		name: "azure:quota", status: http.StatusForbidden, contains: azureQuotaText, kind: limitTimeSpan,
		source: "Azure API Management quota and quota-by-key policies, 403 with a Retry-After (learn.microsoft.com/en-us/azure/api-management/quota-policy); the body \"Out of call volume quota. Quota will be replenished in 00:08:24.\" as cnblogs.com/lulight/p/15991057.html quotes a whole answer",
	},
	{
		name: "salesforce:concurrent_limit", status: http.StatusForbidden, contains: "ConcurrentPerOrgLongTxn Limit exceeded", kind: limitTransient,
		source: "Salesforce REST API, the concurrent long-running request limit (403 [{\"message\":\"ConcurrentPerOrgLongTxn Limit exceeded.\",\"errorCode\":\"REQUEST_LIMIT_EXCEEDED\"}]): Salesforce Developer Limits and Allocations Quick Reference",
	},
	{
		name: "salesforce:REQUEST_LIMIT_EXCEEDED", status: http.StatusForbidden, contains: "REQUEST_LIMIT_EXCEEDED", kind: limitOwed,
		source: "Salesforce REST API, the rolling 24-hour API request limit (403 [{\"message\":\"TotalRequests Limit exceeded.\",\"errorCode\":\"REQUEST_LIMIT_EXCEEDED\"}]): Salesforce REST API Developer Guide, Status Codes and Error Responses",
	},
	{
		name: "quota:retry_after", status: http.StatusForbidden, header: "Retry-After", retryAfter: true, kind: limitOwed,
		source: "Blackbaud SKY API's daily quota (community.blackbaud.com/discussion/75819), enforced by the Azure API Management in front of it, whose quota answer is a 403 with a Retry-After (learn.microsoft.com/en-us/azure/api-management/quota-policy)",
	},
}

// azureQuotaText opens the TimeSpan in Azure API Management's quota answer.
const azureQuotaText = "Quota will be replenished in "

// limitsReadBody reports whether a rule of ClassifyLimits reads the body
// of a response of the given status: a Transport with no classifier of its
// own reads the body of no other.
func limitsReadBody(status int) bool {
	return status == http.StatusForbidden
}

func (r *limitRule) matches(resp *http.Response, body []byte) bool {
	if r.status != 0 && resp.StatusCode != r.status {
		return false
	}
	if r.header != "" {
		vs := resp.Header[r.header]
		if len(vs) == 0 {
			return false
		}
		if r.retryAfter {
			if _, ok := retryAfter(resp.Header, time.Time{}); !ok {
				return false
			}
		}
		if r.value != "" {
			v := strings.TrimSpace(vs[0])
			if v != r.value && !strings.HasPrefix(v, r.value+":") {
				return false
			}
		}
	}
	return r.contains == "" || bytes.Contains(body, []byte(r.contains))
}

func (r *limitRule) verdict(resp *http.Response, body []byte, received time.Time) Classification {
	switch r.kind {
	case limitTransient:
		return Classification{Retryable: true, Reason: r.name}
	case limitTimeSpan:
		c := Classification{Owed: true, Reason: r.name}
		_, after, _ := bytes.Cut(body, []byte(r.contains))
		if d, ok := parseTimeSpan(after); ok {
			if received.IsZero() {
				received = responseTime(resp)
			}
			c.NotBefore = received.Add(d)
		}
		return c
	}
	return Classification{Owed: true, Reason: r.name}
}

// responseTime is when resp was sent by its Date header, or now when it
// has none that parses.
func responseTime(resp *http.Response) time.Time {
	if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		return t
	}
	return time.Now()
}

// maxTimeSpanDays keeps a TimeSpan within time.Duration: about 292 years.
const maxTimeSpanDays = 106_000

// parseTimeSpan reads a .NET TimeSpan in its constant ("c") format at the
// start of b: [d.]hh:mm:ss[.fffffff], hours below 24, minutes and seconds
// below 60. A negative span, or anything else, gives false.
func parseTimeSpan(b []byte) (time.Duration, bool) {
	num := func() (int64, bool) {
		n, i := int64(0), 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && i < 9; i++ {
			n = n*10 + int64(b[i]-'0')
		}
		b = b[i:]
		return n, i > 0
	}
	sep := func(c byte) bool {
		if len(b) > 0 && b[0] == c {
			b = b[1:]
			return true
		}
		return false
	}
	first, ok := num()
	if !ok {
		return 0, false
	}
	var days, hours int64
	if sep('.') {
		days = first
		if hours, ok = num(); !ok {
			return 0, false
		}
	} else {
		hours = first
	}
	if !sep(':') {
		return 0, false
	}
	mins, ok := num()
	if !ok || !sep(':') {
		return 0, false
	}
	secs, ok := num()
	if !ok || hours > 23 || mins > 59 || secs > 59 || days > maxTimeSpanDays {
		return 0, false
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(hours)*time.Hour +
		time.Duration(mins)*time.Minute + time.Duration(secs)*time.Second
	if len(b) > 1 && b[0] == '.' && b[1] >= '0' && b[1] <= '9' {
		// Fractions of a second: a wait is rounded up, never down.
		d += time.Second
	}
	return d, true
}
