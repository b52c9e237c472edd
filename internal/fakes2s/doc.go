// Package fakes2s is a fake Grants.gov S2S applicant endpoint, built from
// the service's WSDL and schemas and from the answers its public mirror
// shows, for measuring and testing what retries do to a funder that
// cannot deduplicate.
//
// Grants.gov's applicant web services speak SOAP 1.1 over mutual TLS and
// carry no idempotency key and no client-chosen submission id: every
// SubmitApplication the service accepts is a new application with a new
// tracking number, and GetApplicationList, filtered by the SubmissionTitle
// the pipeline wrote into the application's header, is how a client finds
// out after the fact what was recorded. The fake keeps that property, and
// adds the failure that makes it matter: for a share of the submissions it
// accepts, it records the application and then closes the connection
// without answering, which is when net/http resends a request it considers
// replayable on its own.
//
// # Sources
//
// Each behaviour names where it comes from. "WSDL" and "XSD" are the files
// of reference/grantsgov-s2s/ (ApplicantWebServices-V2.0.wsdl and the
// GrantsCommonElements, GrantsCommonTypes and ApplicantCommonElements
// schemas, copied from HHS/simpler-grants-gov's
// api/mock-soap-services/applicants/). "Mirror" is HHS/simpler-grants-gov's
// api/src/legacy_soap_api/, whose fault_messages.py says its texts "mirror
// fault messages from the existing GG SOAP API", and which now fronts the
// live service. "Kuali" is kuali/kc's
// coeus-impl/src/main/java/org/kuali/coeus/propdev/impl/s2s/connect/S2SConnectorServiceBase.java,
// a real S2S client. The exact fault texts, each with its file, are quoted
// in faults.go and parse.go.
//
//   - Port path, operations, namespaces, element names and their order,
//     the SOAPAction of each operation: WSDL, XSD (wsdl.go). The child
//     elements are in GrantsCommonElements-V1.0 or ApplicantCommonElements-V1.0
//     where the schemas put them.
//   - SubmitApplication answers GrantsGovTrackingNumber (GRANT and 8
//     digits, GrantsGovTrackingNumberType; issued from GRANT10000001 up)
//     and ReceivedDateTime, nothing else: WSDL.
//   - The submission title, opportunity and CFDA number are read from the
//     GrantApplicationXML by their element names (SubmissionTitle, ...):
//     the real service reads its GrantSubmissionHeader, whose form schema
//     the reference does not hold, so the fake checks no form. An
//     application that is not well-formed XML is still answered with a
//     tracking number and its status is Rejected with Errors: Grants.gov
//     validates an application after receipt (the status value is XSD's).
//   - GetApplicationList takes zero or more ApplicationFilter (Filter from
//     Status, OpportunityID, CFDANumber, SubmissionTitle,
//     GrantsGovTrackingNumber; FilterValue): XSD. Filters of one type match
//     any of their values, filters of different types must all match:
//     Kuali sends OpportunityID, CFDANumber and SubmissionTitle together to
//     find one proposal. The WSDL's xsd:unique on Filter selects nothing
//     (an unprefixed path below the request itself), so it is not enforced.
//     A filter without a Filter is refused with the mirror's "Encountered
//     invalid filter type " text.
//   - GetSubmissionList takes at most five SubmissionFilter (Type from
//     FundingOpportunityNumber, GrantsGovTrackingNumber, PackageID,
//     SubmissionTitle, Status; Value of 1 to 255 characters), no Type
//     twice: WSDL, XSD. Both lists answer AvailableApplicationNumber and
//     the applications oldest first, with GrantsGovApplicationStatus,
//     ReceivedDateTime, StatusDateTime and SubmissionTitle.
//   - Statuses are the GrantsGovApplicationStatusType values: XSD. The
//     fake records Received (or Rejected with Errors, above); SetStatus
//     moves an application on, as the service's processing does.
//   - Answers are MTOM-framed (multipart/related; type="application/xop+xml",
//     a --uuid: boundary, the envelope the root part, Content-ID
//     <root.message@cxf.apache.org>): Mirror, legacy_soap_api_utils.py
//     (mtom.go quotes it). The certificate faults and the generic server
//     error come, as in the mirror's get_soap_error_response, as a bare
//     envelope labelled multipart/related; type="application/xop+xml".
//     Envelope reads either, and takes the label as a hint.
//   - Every fault is HTTP 500, faultcode soap:Server: Mirror (every
//     FaultMessage and every fault response in legacy_soap_api). The texts:
//     schema validation "Failed to validate request. cvc-..." (Mirror's
//     texts for a tracking number off its pattern, quoted exactly; for the
//     other checks Mirror's prefix and Xerces' message keys and format, as
//     Mirror's own validator writes them); a missing, unknown or expired
//     certificate "... (Authorization Failure)" (Mirror, simpler_soap_api.py);
//     a failed query "Server error has occurred" (Mirror's generic fault).
//     Three faults come from the SOAP stack before Grants.gov's code sees
//     the request and keep Apache CXF's own codes: a body that is not XML
//     (soap:Client, "Error reading XMLStreamReader."), a SOAP 1.2 envelope
//     (soap:VersionMismatch) and a Body element the fake does not serve
//     (soap:Client, "Message part {ns}name was not recognized.  (Does it
//     exist in service WSDL?)"), from apache/cxf's
//     rt/bindings/soap/.../interceptor/Messages.properties and public CXF
//     fixtures. Mirror shows no Grants.gov text for these.
//   - SOAPAction: Apache CXF, which serves Grants.gov (Mirror's
//     Content-ID root.message@cxf.apache.org), dispatches by the action
//     when it is not empty, matched exactly against the binding after
//     unquoting, and answers "The given SOAPAction X does not match an
//     operation." (soap:Server, CXF's Fault default) for an action of no
//     operation, or of another operation than the Body's: the text as
//     OpenLiberty/open-liberty issue 28121 and zapadi/vies-dotnet pull
//     request 12 quote CXF services answering it. An empty or absent
//     action leaves dispatch to the Body, as CXF does.
//   - Mutual TLS: the service is HTTPS with a client certificate (WSDL's
//     https address; Mirror's X-Amzn-Mtls-Clientcert header). Its front
//     door, an AWS load balancer with mutual_authentication mode
//     "passthrough" (HHS/simpler-grants-gov infra/modules/service/load_balancer.tf),
//     completes the handshake without verifying the certificate and hands
//     it to the application, which answers a SOAP fault. So does the fake:
//     the handshake asks for a certificate but requires none, and a call
//     without one is answered 500 "Missing certificate. (Authorization
//     Failure)", not refused at the TLS layer; a certificate the fake's CA
//     did not issue is "No tcertificate found. (Authorization Failure)",
//     an expired one "Certificate is expired. (Authorization Failure)".
//     The CA is made at Start, in memory (crypto/x509), with the server's
//     certificate for 127.0.0.1; ClientTLS, AnonymousTLS, ExpiredTLS and
//     UnregisteredTLS give a client each case, NewTransport a Transport.
//
// The fake's own, for tests, with no source in the service: the drop (an
// accepted submission recorded, then the connection closed before a byte
// of answer; DropRate, Drop, reproducible by Seed, the title and the
// application's number under it), QueryFailRate, Latency, the counters
// (Received, Refused, Queries, Dropped, Applications and TrackingNumbers
// per title, TotalApplications, Duplicates), 405 for a method other than
// POST and 404 for a path other than PortPath. A GrantsGovTrackingNumber
// in a SubmitApplicationRequest (a corrected application) is checked
// against its pattern only. Operations of the WSDL
// other than SubmitApplication, GetApplicationList and GetSubmissionList
// are not served. No applicant operation of the WSDL has a Success
// element, so the fake sends no "Success false" answer: the mirror sends
// one, in a 500, only for the agency port's UpdateApplicationInfo.
//
// The funder never looks at Idempotency-Key. SubmitEnvelope,
// ResubmitEnvelope, ListEnvelope and SubmissionListEnvelope build
// requests; SubmitResponse builds the answer a reconciler hands its
// caller; ParseSubmitResponse reads it; Query and Lookup ask the lists.
package fakes2s
