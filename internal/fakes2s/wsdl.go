package fakes2s

import "strings"

// The names below are the WSDL's and the schemas' (ApplicantWebServices-V2.0.wsdl,
// GrantsCommonElements-V1.0.xsd, ApplicantCommonElements-V1.0.xsd,
// GrantsCommonTypes-V1.0.xsd in reference/grantsgov-s2s/).

// PortPath is the path of the applicant SOAP port, from the WSDL's
// soap:address (https://trainingws.grants.gov/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort).
const PortPath = "/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort"

// Namespaces of the WSDL and the schemas it imports. The WSDL's own schema
// and the common ones all set elementFormDefault="qualified", so every
// local element is in its schema's namespace.
const (
	// Namespace is the service's: the operations' request and response
	// elements and their own children (GrantApplicationXML,
	// ReceivedDateTime, AvailableApplicationNumber, ApplicationInfo).
	Namespace = "http://apply.grants.gov/services/ApplicantWebServices-V2.0"
	// CommonNamespace holds GrantsGovTrackingNumber, SubmissionTitle,
	// GrantsGovApplicationStatus, CFDANumber and ApplicationFilter with its
	// Filter and FilterValue.
	CommonNamespace = "http://apply.grants.gov/system/GrantsCommonElements-V1.0"
	// ApplicantNamespace holds SubmissionFilter (Type, Value) and
	// SubmissionDetails, used by GetSubmissionList.
	ApplicantNamespace = "http://apply.grants.gov/system/ApplicantCommonElements-V1.0"
)

// soapNS is the SOAP 1.1 envelope namespace.
const soapNS = "http://schemas.xmlsoap.org/soap/envelope/"

// ContentType is the media type of the SOAP 1.1 requests the helpers of
// this package build.
const ContentType = "text/xml; charset=utf-8"

// Operations the fake serves, by their WSDL names.
const (
	OpSubmitApplication  = "SubmitApplication"
	OpGetApplicationList = "GetApplicationList"
	OpGetSubmissionList  = "GetSubmissionList"
)

// actionBase is the prefix of every applicant operation's soapAction in
// the WSDL's binding.
const actionBase = "https://trainingws.grants.gov/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort/"

// Action returns the SOAPAction the WSDL's binding gives an operation:
// the port's address, a slash and the operation's name.
func Action(op string) string { return actionBase + op }

// zipAction is GetApplicationZip's soapAction: the one operation of the
// applicant binding whose action names the agency port, as the WSDL has it.
const zipAction = "https://trainingws.grants.gov/grantsws-agency/services/v2/AgencyWebServicesSoapPort/GetApplicationZip"

// operationOf returns the operation of the WSDL's binding whose
// soapAction is action, matched exactly, as Apache CXF matches it.
func operationOf(action string) (string, bool) {
	if action == zipAction {
		return "GetApplicationZip", true
	}
	name, ok := strings.CutPrefix(action, actionBase)
	if !ok {
		return "", false
	}
	switch name {
	case "SubmitApplication", "SubmitApplicationAsThirdParty", "SubmitApplicationAsThirdPartyExpanded",
		"GetApplicationList", "GetApplicationListAsThirdParty", "GetApplicationStatusDetail",
		"GetApplicationInfo", "GetApplicationInfoAsThirdParty", "AuthenticateAOR", "AuthenticateAORExpanded",
		"GetOpportunitiesExpanded", "GetOpportunityList", "GetSubmissionList", "GetSubmissionListAsThirdParty":
		return name, true
	}
	return "", false
}

// Application statuses: the enumeration of GrantsGovApplicationStatusType
// (GrantsCommonTypes-V1.0.xsd), in its order.
const (
	StatusReceiving                    = "Receiving"
	StatusReceived                     = "Received"
	StatusProcessing                   = "Processing"
	StatusValidated                    = "Validated"
	StatusRejectedWithErrors           = "Rejected with Errors"
	StatusDownloadPreparation          = "Download Preparation"
	StatusReceivedByAgency             = "Received by Agency"
	StatusAgencyTrackingNumberAssigned = "Agency Tracking Number Assigned"
)

// Statuses lists every GrantsGovApplicationStatusType value, in the
// schema's order.
func Statuses() []string {
	return []string{StatusReceiving, StatusReceived, StatusProcessing, StatusValidated,
		StatusRejectedWithErrors, StatusDownloadPreparation, StatusReceivedByAgency, StatusAgencyTrackingNumberAssigned}
}

// Filter types of GetApplicationList's ApplicationFilter/Filter
// enumeration (GrantsCommonElements-V1.0.xsd). GetSubmissionList's
// SubmissionFilter/Type (ApplicantCommonElements-V1.0.xsd) takes
// FundingOpportunityNumber, GrantsGovTrackingNumber, PackageID,
// SubmissionTitle and Status.
const (
	FilterStatus                  = "Status"
	FilterOpportunityID           = "OpportunityID"
	FilterCFDANumber              = "CFDANumber"
	FilterSubmissionTitle         = "SubmissionTitle"
	FilterGrantsGovTrackingNumber = "GrantsGovTrackingNumber"
	FilterFundingOpportunityNum   = "FundingOpportunityNumber"
	FilterPackageID               = "PackageID"
)

// applicationFilters and submissionFilters return the enumerations, in
// the schemas' order, as a validator names them in its message.
func applicationFilters() []string {
	return []string{FilterStatus, FilterOpportunityID, FilterCFDANumber, FilterSubmissionTitle, FilterGrantsGovTrackingNumber}
}

func submissionFilters() []string {
	return []string{FilterFundingOpportunityNum, FilterGrantsGovTrackingNumber, FilterPackageID, FilterSubmissionTitle, FilterStatus}
}

// maxSubmissionFilters is GetSubmissionListRequest's maxOccurs for
// SubmissionFilter.
const maxSubmissionFilters = 5
