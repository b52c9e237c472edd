package grantretry_test

import (
	"fmt"
	"net/http"

	"github.com/grantretry/grantretry"
)

// A funder's own texts, taught a line each in front of the SOAP fault
// classifier, and checked at start-up.
func ExampleClassifyRules() {
	funderRules := []grantretry.Rule{
		// The ASMX service wraps a bad argument in a Server fault: a refusal.
		{Status: 500, Contains: "System.ArgumentException",
			Verdict: grantretry.Classification{Reason: "funder:argument"}},
		// Its daily allowance: the funder takes the request tomorrow.
		{Status: 500, Contains: "daily transaction limit",
			Verdict: grantretry.Classification{Owed: true, Reason: "funder:daily_limit"}},
	}
	if err := grantretry.CheckRules(funderRules...); err != nil {
		fmt.Println(err)
		return
	}
	classify := grantretry.ClassifyFirst(grantretry.ClassifyRules(funderRules...), grantretry.ClassifySOAPFault)
	tr := grantretry.New(nil, grantretry.WithClassifier(classify))
	fmt.Println(tr.Err())

	fault := `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault>` +
		`<faultcode>soap:Server</faultcode><faultstring>Server was unable to process request. ---&gt; ` +
		`System.ArgumentException: Value does not fall within the expected range.</faultstring>` +
		`</soap:Fault></soap:Body></soap:Envelope>`
	v, _ := classify(&http.Response{StatusCode: 500}, []byte(fault))
	fmt.Printf("%s retryable=%v owed=%v\n", v.Reason, v.Retryable, v.Owed)

	// A rule an earlier one hides is refused.
	fmt.Println(grantretry.CheckRules(
		grantretry.Rule{Status: 500, Contains: "limit", Verdict: grantretry.Classification{Reason: "funder:limit"}},
		grantretry.Rule{Status: 500, Contains: "daily limit", Verdict: grantretry.Classification{Owed: true, Reason: "funder:daily"}},
	))
	// Output:
	// <nil>
	// funder:argument retryable=false owed=false
	// grantretry: invalid rule: rule 1: rule 0 ("limit" in a 500) matches every answer it does, so it is never reached
}

// The limits of the gateways in front of funders, which every Transport
// reads: an AWS API Gateway usage-plan quota is owed, not retried.
func ExampleClassifyLimits() {
	resp := &http.Response{StatusCode: 429, Header: http.Header{"X-Amzn-Errortype": {"LimitExceededException"}}}
	v, ok := grantretry.ClassifyLimits(resp, []byte(`{"message":"Limit Exceeded"}`))
	fmt.Println(v.Reason, v.Owed, ok)
	// Output: aws:LimitExceededException true true
}
