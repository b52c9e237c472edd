package grantsgov

import "strings"

// A rule reads one text Grants.gov is publicly known to send: a fault
// string, or the ErrorMessage of a response whose Success is false. The
// first rule whose match the text contains gives the verdict; the rules
// that name a cause more exactly come before the ones that share words
// with them ("Certificate is expired. (Authorization Failure)" is a
// certificate's, not any authorization's).
type rule struct {
	name      string // the reason reported, "grantsgov:" and the cause
	match     string // a part of the text, matched as written
	retryable bool
	source    string // where the text is published
}

// The public source of every text: HHS/simpler-grants-gov, whose code
// says its fault texts mirror the live service's.
const (
	srcMirror = "HHS/simpler-grants-gov api/src/legacy_soap_api/"
)

// rules is the table docs/grantsgov.md documents, row for row. It is never
// written after initialisation.
var rules = []rule{
	{"grantsgov:certificate", "Missing certificate.", false, srcMirror + "simpler_soap_api.py (SOAPClientMissingCertificate)"},
	{"grantsgov:certificate", "No tcertificate found.", false, srcMirror + "simpler_soap_api.py (SOAPClientTcertificateNotFound)"},
	{"grantsgov:certificate", "Certificate is expired.", false, srcMirror + "simpler_soap_api.py (SOAPClientCertificateIsExpired)"},
	{"grantsgov:certificate", "Client certificate not configured for Simpler SOAP.", false, srcMirror + "legacy_soap_api_proxy.py (SOAPClientCertificateNotConfigured: a valid certificate the Simpler SOAP proxy is not set up for; HHS/simpler-grants-gov#9646, #9666)"},
	{"grantsgov:validation", "Failed to validate request.", false, srcMirror + "grantors/fault_messages.py, applicants/fault_messages.py"},
	{"grantsgov:validation", "cvc-", false, srcMirror + "grantors/fault_messages.py (the XML Schema validator's error codes)"},
	{"grantsgov:retrieved", "has already been retrieved", false, srcMirror + "grantors/fault_messages.py (ConfirmDeliveryAlreadyRetrieved)"},
	{"grantsgov:status", "Expected an Application status of", false, srcMirror + "grantors/services/confirm_application_delivery_response.py"},
	{"grantsgov:not_found", "Grant Application not found for tracking number", false, srcMirror + "legacy_soap_api_utils.py, grantors/services/get_application_zip_response.py"},
	{"grantsgov:filter", "At least one filter is required", false, srcMirror + "applicants/fault_messages.py (OpportunityListRequestInvalidParams)"},
	{"grantsgov:filter", "Encountered invalid filter type", false, srcMirror + "grantors/schemas/get_submission_list_schemas.py"},
	{"grantsgov:authorization", "(Authorization Failure)", false, srcMirror + "grantors/fault_messages.py, legacy_soap_api_utils.py, grantors/services/update_application_info_response.py"},
	{"grantsgov:authorization", "Authorization error", false, srcMirror + "legacy_soap_api_utils.py (get_auth_error_response)"},
	{"grantsgov:action", "does not match an operation", false, "apache/cxf SoapActionInInterceptor, the SOAP stack that serves the service (text quoted in OpenLiberty/open-liberty#28121, zapadi/vies-dotnet#12)"},
	{"grantsgov:server", "Server error has occurred", true, srcMirror + "legacy_soap_api_utils.py (get_soap_error_response), simpler_soap_api.py"},
}

// reasonUnknown is the reason for a fault or a refusal whose text no rule
// knows.
const reasonUnknown = "grantsgov:unknown"

// matchRule finds the rule for text.
func matchRule(text string) (rule, bool) {
	for _, r := range rules {
		if strings.Contains(text, r.match) {
			return r, true
		}
	}
	return rule{}, false
}

// verdictOf picks the rule for a set of texts: a refusal in any of them
// wins, since the same request will meet it again; then an outage.
func verdictOf(texts []string) (rule, bool) {
	var best rule
	found := false
	for _, t := range texts {
		r, ok := matchRule(t)
		if !ok {
			continue
		}
		if !r.retryable {
			return r, true
		}
		if !found {
			best, found = r, true
		}
	}
	return best, found
}
