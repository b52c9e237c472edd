// Package fakes2s is a fake Grants.gov S2S endpoint that ignores
// Idempotency-Key, for measuring and testing what retries do to a funder
// that cannot deduplicate (issue 12).
//
// Grants.gov's applicant web services speak SOAP 1.1 and carry no
// idempotency header: every SubmitApplication the funder accepts creates a
// new application with a new tracking number, and GetApplicationList is how
// a client finds out, after the fact, what was recorded. This fake keeps
// exactly that property, and adds the failure that makes it matter: for a
// share of the submissions it accepts, it records the application and then
// closes the connection without answering. A client on a kept-alive
// connection sees the connection closed by the server before any response
// byte, which is precisely when net/http's Transport resends a request it
// considers replayable (one with a GetBody and an Idempotency-Key header)
// on its own, so the funder records the same submission twice.
//
// Start serves the fake on a loopback port, as plain HTTP/1.1 with
// keep-alive on, at Funder.URL. Both operations go to that one URL, a POST
// of a SOAP 1.1 envelope, and the funder tells them apart by the operation
// element in the envelope's Body, never by SOAPAction:
//
//	<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">
//	  <soap:Body>
//	    <SubmitApplicationRequest xmlns="http://apply.grants.gov/services/ApplicantWebServices-V2.0">
//	      <SubmissionID>GRANT-42</SubmissionID>
//	      <GrantApplicationXML>...</GrantApplicationXML>
//	    </SubmitApplicationRequest>
//	  </soap:Body>
//	</soap:Envelope>
//
// is answered 200 with a SubmitApplicationResponse holding the new
// GrantsGovTrackingNumber (GRANT10000001, GRANT10000002, ...) and the
// SubmissionID, or is recorded and dropped. A GetApplicationListRequest
// with a SubmissionID is answered 200 with a GetApplicationListResponse: an
// AvailableApplicationNumber, then one ApplicationInfo (its
// GrantsGovTrackingNumber, SubmissionID and a GrantsGovApplicationStatus of
// Received) per application recorded under that id, oldest first.
// SubmitEnvelope and ListEnvelope build the two requests,
// SubmitResponse builds the first answer and ParseSubmitResponse reads it,
// and Lookup sends the second query and reads its answer.
//
// The element names follow Grants.gov's where the fake needs one, but the
// documents are the fake's own, not the real schema: the real
// SubmitApplicationRequest carries the application as an attachment, and the
// real GetApplicationListRequest filters by an ApplicationFilter, on fields
// such as the SubmissionTitle a pipeline would put its own id in. The
// SubmissionID element stands in for all of that.
//
// Everything else is a SOAP 1.1 fault: a body that is not an Envelope in
// the SOAP 1.1 namespace whose Body holds exactly one of the two
// operations, in the namespace above, with a non-blank SubmissionID
// (surrounding whitespace is trimmed) is answered 500 with faultcode
// soap:Client, and nothing is recorded. It still counts: as a query if it
// names GetApplicationListRequest, as a submission otherwise. A method other than POST is answered 405, a path
// other than PortPath 404.
package fakes2s
