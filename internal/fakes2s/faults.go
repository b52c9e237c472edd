package fakes2s

import (
	"fmt"
	"strings"
)

// The fault strings the fake answers with. Each is quoted from its public
// source; where the fake fills in a name or a value, the source's template
// is quoted and the filled part marked. Every fault is faultcode
// soap:Server and HTTP 500: so is every fault the sources show.
const (
	// FaultMissingCertificate is the answer to a call with no client
	// certificate. HHS/simpler-grants-gov,
	// api/src/legacy_soap_api/simpler_soap_api.py (process_simpler_request):
	//	faultstring="Missing certificate. (Authorization Failure)"
	FaultMissingCertificate = "Missing certificate. (Authorization Failure)"

	// FaultUnknownCertificate is the answer to a client certificate the
	// service has no record of (here: one the fake's CA did not issue).
	// Same file:
	//	faultstring="No tcertificate found. (Authorization Failure)"
	FaultUnknownCertificate = "No tcertificate found. (Authorization Failure)"

	// FaultExpiredCertificate is the answer to a client certificate past
	// its expiry. Same file:
	//	faultstring="Certificate is expired. (Authorization Failure)"
	FaultExpiredCertificate = "Certificate is expired. (Authorization Failure)"

	// FaultServerError is the generic server error, the fake's answer to a
	// query that fails (Options.QueryFailRate). HHS/simpler-grants-gov,
	// api/src/legacy_soap_api/legacy_soap_api_utils.py (get_soap_error_response):
	//	faultstring: str = "Server error has occurred",
	FaultServerError = "Server error has occurred"

	// FaultInvalidTrackingNumber is the schema-validation failure of a
	// GrantsGovTrackingNumber that is not GRANT and 8 digits.
	// HHS/simpler-grants-gov, api/src/legacy_soap_api/grantors/fault_messages.py
	// and api/src/legacy_soap_api/applicants/fault_messages.py, whose
	// header says "Fault messages in this file are defined to mirror fault
	// messages from the existing GG SOAP API":
	//	faultstring="Failed to validate request. cvc-pattern-valid: Value is not facet-valid with respect to pattern 'GRANT[0-9]{8}' for type 'GrantsGovTrackingNumberType'.",
	FaultInvalidTrackingNumber = "Failed to validate request. cvc-pattern-valid: Value is not facet-valid with respect to pattern 'GRANT[0-9]{8}' for type 'GrantsGovTrackingNumberType'."

	// validationPrefix starts every schema-validation fault, as in
	// FaultInvalidTrackingNumber and in grantors/fault_messages.py's
	//	faultstring="Failed to validate request. cvc-complex-type.2.4.b: The content of element is not complete. One of {https://apply.grants.gov/system/GrantsCommonElements-V1.0:GrantsGovTrackingNumber} is expected.",
	validationPrefix = "Failed to validate request. "
)

// faultActionMismatch is Apache CXF's SoapActionInInterceptor fault for a
// SOAPAction that matches no operation of the binding, or another
// operation than the Body's. The text as CXF services answer it, quoted in
// OpenLiberty/open-liberty issue 28121 ("a SOAPFault is generated with the
// message `The given SOAPAction <Header Value> does not match an
// operation`", CXF 3.5.5) and zapadi/vies-dotnet pull request 12 (the EU
// VIES service: "The given SOAPAction urn:ec.europa.eu:taxud:vies:services:checkVat
// does not match an operation."). CXF's Fault defaults to the Server code.
func faultActionMismatch(action string) string {
	return "The given SOAPAction " + action + " does not match an operation."
}

// faultInvalidFilter is the answer to a GetApplicationList filter whose
// Filter is absent or empty, which the schema allows (minOccurs 0) but
// which names no field to filter on. HHS/simpler-grants-gov,
// api/src/legacy_soap_api/grantors/schemas/get_submission_list_schemas.py:
//
//	faultstring = f"Encountered invalid filter type {filter_type}"
func faultInvalidFilter(filterType string) string {
	return "Encountered invalid filter type " + filterType
}

// The schema-validation faults below are validationPrefix followed by the
// message of Xerces, the validator CXF runs, in the form the mirror's own
// validator writes it (get_submission_list_schemas.py):
//
//	"The content of element 'ExpandedApplicationFilter' is not complete. One of "
//	'\'{"http://apply.grants.gov/system/GrantsCommonElements-V1.0":'
//	f"{value}}}' is expected."
//
// The keys (cvc-complex-type.2.4.a, .2.4.b, .2.4.d, cvc-enumeration-valid,
// cvc-minLength-valid, cvc-identity-constraint.4.1) are Xerces-J's
// (XMLSchemaMessages.properties); the element names and values are the
// request's.

// faultIncomplete: a required child is missing at the end of parent.
func faultIncomplete(parent string, expected qname) string {
	return fmt.Sprintf("%scvc-complex-type.2.4.b: The content of element '%s' is not complete. One of '%s' is expected.",
		validationPrefix, parent, expected)
}

// faultUnexpected: a child arrived where others were expected.
func faultUnexpected(found qname, expected []qname) string {
	names := make([]string, len(expected))
	for i, q := range expected {
		names[i] = q.String()
	}
	return fmt.Sprintf("%scvc-complex-type.2.4.a: Invalid content was found starting with element '%s'. One of '%s' is expected.",
		validationPrefix, found, strings.Join(names, ", "))
}

// faultNoMoreChildren: a child arrived after the last one allowed.
func faultNoMoreChildren(found qname) string {
	return fmt.Sprintf("%scvc-complex-type.2.4.d: Invalid content was found starting with element '%s'. No child element is expected at this point.",
		validationPrefix, found)
}

// faultEnumeration: a value outside an enumeration.
func faultEnumeration(value string, enum []string) string {
	return fmt.Sprintf("%scvc-enumeration-valid: Value '%s' is not facet-valid with respect to enumeration '[%s]'. It must be a value from the enumeration.",
		validationPrefix, value, strings.Join(enum, ", "))
}

// faultMinLength: an empty value where at least one character is required.
func faultMinLength(value, typ string) string {
	return fmt.Sprintf("%scvc-minLength-valid: Value '%s' with length = '%d' is not facet-valid with respect to minLength '1' for type '%s'.",
		validationPrefix, value, len(value), typ)
}

// faultDuplicate: an xsd:unique constraint broken.
func faultDuplicate(value, constraint, element string) string {
	return fmt.Sprintf("%scvc-identity-constraint.4.1: Duplicate unique value [%s] declared for identity constraint \"%s\" of element \"%s\".",
		validationPrefix, value, constraint, element)
}

// qname is an element's name as Xerces prints it: {"namespace":local}.
type qname struct{ space, local string }

func (q qname) String() string { return `{"` + q.space + `":` + q.local + `}` }
