package grantretry

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Rule is one answer a funder is known to give, and what it means: a
// pipeline team's way to teach grantretry the texts of its funder, a line
// each, as
//
//	grantretry.Rule{Status: 500, Contains: "System.ArgumentException",
//		Verdict: grantretry.Classification{Reason: "asmx:argument"}}
//
// A response matches when its status is Status (0: any status of 400 or
// more) and its body contains Contains, byte for byte, case and all, as
// the body is sent: within the first MaxClassifyPeek bytes, and in XML
// with its escapes (an ampersand is "&amp;"). An empty Contains matches
// any body of that Status. Verdict is what a match means: Retryable for an
// outage that passes, Owed for a limit the funder will take the request
// after, neither for a refusal; Reason names the rule in the audit trail
// ("terminal:500;asmx:argument"). See CheckRules for what a valid rule is.
type Rule struct {
	Status   int
	Contains string
	Verdict  Classification
}

// ClassifyRules returns a ClassifyFunc that gives a response the Verdict
// of the first of rules it matches, and declines (ok false) when it
// matches none, leaving the verdict to the next function of a
// ClassifyFirst, then to ClassifyLimits and the status sets:
//
//	grantretry.WithClassifier(grantretry.ClassifyFirst(
//		grantretry.ClassifyRules(myFunderRules...), grantretry.ClassifySOAPFault))
//
// The rules are checked once, here, and CheckRules returns what is wrong
// with them. A set that CheckRules refuses is not used at all: the
// function it returns then answers every response of 400 or more with the
// verdict ClassifyLimits or, failing it, Classify's default status sets
// give, and the reason "rules:invalid" ("transient:503;rules:invalid"), so
// that the mistake shows on every attempt's audit line and in every
// Outcome instead of passing silently. Call CheckRules at start-up, or in
// a test, to fail on it before anything is sent. rules is copied; the
// function is safe for concurrent use.
func ClassifyRules(rules ...Rule) ClassifyFunc {
	if CheckRules(rules...) != nil {
		return classifyInvalid("rules:invalid")
	}
	rs := append([]Rule(nil), rules...)
	return func(resp *http.Response, body []byte) (Classification, bool) {
		if resp == nil || resp.StatusCode < 400 {
			return Classification{}, false
		}
		if len(body) > MaxClassifyPeek {
			body = body[:MaxClassifyPeek]
		}
		for i := range rs {
			r := &rs[i]
			if (r.Status == 0 || r.Status == resp.StatusCode) && bytes.Contains(body, []byte(r.Contains)) {
				return r.Verdict, true
			}
		}
		return Classification{}, false
	}
}

// ErrInvalidRule matches the error CheckRules returns for a rule set it
// refuses.
var ErrInvalidRule = errors.New("grantretry: invalid rule")

// CheckRules reports what is wrong with rules, nil if nothing is: every
// rule must be able to match something, and must not match everything.
// It refuses a rule with
//
//   - neither a Status nor a Contains (it would match every answer);
//   - a Status outside 400 to 999 (no other is ever classified);
//   - a Verdict without a Reason, or whose Reason is not a short name of
//     printable ASCII without spaces or ";" (the audit trail shows it);
//   - a Verdict both Owed and Retryable (say which), or with a NotBefore
//     (a fixed time in a rule is a time that passes: the Transport reads
//     a Retry-After for an Owed verdict);
//
// and a rule that an earlier rule hides: one of the same or any status
// whose Contains is found in its own, so that it can never be reached.
// The error matches ErrInvalidRule and names every rule at fault by its
// index, on one line.
func CheckRules(rules ...Rule) error {
	var errs []error
	bad := func(i int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("rule %d: "+format, append([]any{i}, args...)...))
	}
	for i, r := range rules {
		switch {
		case r.Status == 0 && r.Contains == "":
			bad(i, "neither a Status nor a Contains: it would match every answer")
		case r.Status != 0 && (r.Status < 400 || r.Status > 999):
			bad(i, "Status %d is not a 4xx, 5xx or 6xx-9xx: it is never classified", r.Status)
		case !validRuleReason(r.Verdict.Reason):
			bad(i, "Verdict.Reason %q is not a short name (printable ASCII, no spaces or \";\", at most %d bytes)", r.Verdict.Reason, maxRuleReason)
		case r.Verdict.Owed && r.Verdict.Retryable:
			bad(i, "Verdict is both Owed and Retryable: say which")
		case !r.Verdict.NotBefore.IsZero():
			bad(i, "Verdict has a NotBefore: a fixed time in a rule passes; an Owed verdict's comes from the answer's Retry-After")
		default:
			for j, e := range rules[:i] {
				if (e.Status == 0 || e.Status == r.Status) && strings.Contains(r.Contains, e.Contains) &&
					!(e.Status == 0 && e.Contains == "") {
					bad(i, "rule %d (%s) matches every answer it does, so it is never reached", j, ruleName(e))
					break
				}
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", ErrInvalidRule, strings.Join(msgs, "; "))
}

// maxRuleReason bounds a rule's Reason.
const maxRuleReason = 64

func validRuleReason(s string) bool {
	if s == "" || len(s) > maxRuleReason {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == ';' {
			return false
		}
	}
	return true
}

// ruleName names a rule in an error.
func ruleName(r Rule) string {
	switch {
	case r.Status == 0:
		return fmt.Sprintf("%q in any status", r.Contains)
	case r.Contains == "":
		return fmt.Sprintf("any %d", r.Status)
	}
	return fmt.Sprintf("%q in a %d", r.Contains, r.Status)
}

// ClassifyFirst returns a ClassifyFunc that asks fns in order and gives
// the verdict of the first that answers (ok true); it declines when all
// of them decline. A nil among fns is a mistake that would otherwise
// pass silently: the function then answers every response of 400 or more
// as ClassifyRules does for invalid rules, with the reason
// "classify_first:nil". It is safe for concurrent use when fns are.
func ClassifyFirst(fns ...ClassifyFunc) ClassifyFunc {
	for _, fn := range fns {
		if fn == nil {
			return classifyInvalid("classify_first:nil")
		}
	}
	fs := append([]ClassifyFunc(nil), fns...)
	return func(resp *http.Response, body []byte) (Classification, bool) {
		for _, fn := range fs {
			if c, ok := fn(resp, body); ok {
				return c, true
			}
		}
		return Classification{}, false
	}
}

// classifyInvalid is the ClassifyFunc of a classifier built wrongly: the
// verdict ClassifyLimits or the default status sets give, with reason
// named on it, so that every answer shows the mistake.
func classifyInvalid(reason string) ClassifyFunc {
	return func(resp *http.Response, body []byte) (Classification, bool) {
		if resp == nil || resp.StatusCode < 400 {
			return Classification{}, false
		}
		if c, ok := ClassifyLimits(resp, body); ok {
			c.Reason += ";" + reason
			return c, true
		}
		st := Classify(resp.StatusCode, nil)
		return Classification{Retryable: st.Retryable, Reason: reason}, true
	}
}
