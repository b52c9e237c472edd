package fakes2s_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

// Every refusal is a 500 with a fault, nothing is recorded, and the
// request still counts, as a query or as a submission. The texts are the
// sources' (faults.go); the framing is MTOM but for the front door's
// faults, which are bare envelopes labelled multipart/related.
func TestRefusalsAreServerFaultsWithTheRealTexts(t *testing.T) {
	const app = `<app:SubmitApplicationRequest xmlns:app="` + fakes2s.Namespace + `" xmlns:gran="` + fakes2s.CommonNamespace + `">%s</app:SubmitApplicationRequest>`
	wrap := func(body string) []byte {
		return []byte(`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>` + body + `</soap:Body></soap:Envelope>`)
	}
	submitWith := func(inner string) []byte { return wrap(strings.Replace(app, "%s", inner, 1)) }
	list := func(inner string) []byte {
		return wrap(`<app:GetApplicationListRequest xmlns:app="` + fakes2s.Namespace + `" xmlns:gran="` + fakes2s.CommonNamespace + `">` + inner + `</app:GetApplicationListRequest>`)
	}
	sub := func(typ, value string, more ...string) []byte {
		b := ""
		for _, typ := range append([]string{typ}, more...) {
			b += `<app1:SubmissionFilter><app1:Type>` + typ + `</app1:Type><app1:Value>` + value + `</app1:Value></app1:SubmissionFilter>`
		}
		return wrap(`<app:GetSubmissionListRequest xmlns:app="` + fakes2s.Namespace + `" xmlns:app1="` + fakes2s.ApplicantNamespace + `">` + b + `</app:GetSubmissionListRequest>`)
	}
	submitAction, listAction := fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.Action(fakes2s.OpGetApplicationList)
	valid := fakes2s.SubmitEnvelope("GRANT-42", "<SF424/>")
	cases := []struct {
		name   string
		tls    func(*fakes2s.Funder) *tls.Config
		action string
		body   []byte
		code   string
		text   string
		plain  bool // a bare envelope, not MTOM
		query  bool
	}{
		{"no client certificate", (*fakes2s.Funder).AnonymousTLS, submitAction, valid, "soap:Server", fakes2s.FaultMissingCertificate, true, false},
		{"certificate of another CA", (*fakes2s.Funder).UnregisteredTLS, submitAction, valid, "soap:Server", fakes2s.FaultUnknownCertificate, true, false},
		{"expired certificate", (*fakes2s.Funder).ExpiredTLS, submitAction, valid, "soap:Server", fakes2s.FaultExpiredCertificate, true, false},
		{"no client certificate, query", (*fakes2s.Funder).AnonymousTLS, listAction, fakes2s.ListEnvelope(), "soap:Server", fakes2s.FaultMissingCertificate, true, true},
		{"SOAPAction of no operation", nil, `"SubmitApplication"`, valid, "soap:Server",
			"The given SOAPAction SubmitApplication does not match an operation.", false, false},
		{"SOAPAction of another operation", nil, listAction, valid, "soap:Server",
			"The given SOAPAction " + listAction + " does not match an operation.", false, false},
		{"tracking number off its pattern", nil, submitAction, fakes2s.ResubmitEnvelope("GRANT-1", "GRANT-42", ""), "soap:Server", fakes2s.FaultInvalidTrackingNumber, false, false},
		{"no GrantApplicationXML", nil, submitAction, submitWith(""), "soap:Server",
			`Failed to validate request. cvc-complex-type.2.4.b: The content of element 'SubmitApplicationRequest' is not complete. One of '{"http://apply.grants.gov/services/ApplicantWebServices-V2.0":GrantApplicationXML}' is expected.`, false, false},
		{"a SubmissionID element", nil, submitAction, submitWith(`<app:SubmissionID>GRANT-42</app:SubmissionID><app:GrantApplicationXML/>`), "soap:Server",
			`Failed to validate request. cvc-complex-type.2.4.a: Invalid content was found starting with element '{"http://apply.grants.gov/services/ApplicantWebServices-V2.0":SubmissionID}'. One of '{"http://apply.grants.gov/system/GrantsCommonElements-V1.0":GrantsGovTrackingNumber}, {"http://apply.grants.gov/services/ApplicantWebServices-V2.0":GrantApplicationXML}' is expected.`, false, false},
		{"filter outside the enumeration", nil, listAction, list(`<gran:ApplicationFilter><gran:Filter>SubmissionID</gran:Filter><gran:FilterValue>x</gran:FilterValue></gran:ApplicationFilter>`), "soap:Server",
			"Failed to validate request. cvc-enumeration-valid: Value 'SubmissionID' is not facet-valid with respect to enumeration '[Status, OpportunityID, CFDANumber, SubmissionTitle, GrantsGovTrackingNumber]'. It must be a value from the enumeration.", false, true},
		{"filter without a Filter", nil, listAction, list(`<gran:ApplicationFilter><gran:FilterValue>x</gran:FilterValue></gran:ApplicationFilter>`), "soap:Server",
			"Encountered invalid filter type ", false, true},
		{"six submission filters", nil, fakes2s.Action(fakes2s.OpGetSubmissionList), sub("Status", "x", "SubmissionTitle", "PackageID", "GrantsGovTrackingNumber", "FundingOpportunityNumber", "Status"), "soap:Server",
			"Failed to validate request. cvc-complex-type.2.4.d: Invalid content was found starting with element '{\"http://apply.grants.gov/system/ApplicantCommonElements-V1.0\":SubmissionFilter}'. No child element is expected at this point.", false, true},
		{"a submission filter type twice", nil, "", sub("SubmissionTitle", "A", "SubmissionTitle"), "soap:Server",
			`Failed to validate request. cvc-identity-constraint.4.1: Duplicate unique value [SubmissionTitle] declared for identity constraint "SubmissionFilter-Type-Uniqueness" of element "GetSubmissionListRequest".`, false, true},
		{"an empty submission filter value", nil, "", sub("Status", ""), "soap:Server",
			"Failed to validate request. cvc-minLength-valid: Value '' with length = '0' is not facet-valid with respect to minLength '1' for type 'StringMin1Max255Type'.", false, true},
		{"not XML", nil, submitAction, []byte("SubmissionTitle=GRANT-42"), "soap:Client", "Error reading XMLStreamReader.", false, false},
		{"SOAP 1.2", nil, "", []byte(`<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body/></env:Envelope>`), "soap:VersionMismatch",
			"A SOAP 1.2 message is not valid when sent to a SOAP 1.1 only endpoint.", false, false},
		{"an operation the fake does not serve", nil, "", wrap(`<app:GetOpportunityListRequest xmlns:app="` + fakes2s.Namespace + `"/>`), "soap:Client",
			"Message part {" + fakes2s.Namespace + "}GetOpportunityListRequest was not recognized.  (Does it exist in service WSDL?)", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, fakes2s.Options{DropRate: -1})
			cfg := f.ClientTLS()
			if tc.tls != nil {
				cfg = tc.tls(f)
			}
			a := post(t, clientWith(t, cfg), f.URL(), tc.action, tc.body)
			got := fault(t, a)
			if a.status != http.StatusInternalServerError || got.Code != tc.code || got.String != tc.text {
				t.Errorf("status %d, fault %q %q\nwant 500, %q %q", a.status, got.Code, got.String, tc.code, tc.text)
			}
			if !strings.HasPrefix(a.contentType, `multipart/related; type="application/xop+xml"`) {
				t.Errorf("Content-Type %q, want multipart/related", a.contentType)
			}
			if mtom := strings.HasPrefix(string(a.body), "--uuid:"); mtom == tc.plain {
				t.Errorf("body starts %.20q: MTOM-framed %v, want %v", a.body, mtom, !tc.plain)
			}
			wantQ, wantS := 0, 1
			if tc.query {
				wantQ, wantS = 1, 0
			}
			if f.TotalApplications() != 0 || f.Refused() != 1 || f.Queries() != wantQ || f.Received() != wantS {
				t.Errorf("applications %d, refused %d, queries %d, received %d; want 0, 1, %d, %d",
					f.TotalApplications(), f.Refused(), f.Queries(), f.Received(), wantQ, wantS)
			}
		})
	}
}

// A request shaped by the WSDL, with its SOAPAction quoted as a CXF
// client sends it, or with none, is accepted.
func TestWSDLShapedRequestIsAccepted(t *testing.T) {
	for _, action := range []string{`"` + fakes2s.Action(fakes2s.OpSubmitApplication) + `"`, fakes2s.Action(fakes2s.OpSubmitApplication), ""} {
		f := start(t, fakes2s.Options{DropRate: -1})
		a := post(t, newClient(t, f), f.URL(), action, fakes2s.ResubmitEnvelope("GRANT10000000", "GRANT-42", "<SF424/>"))
		if a.status != http.StatusOK || f.Applications("GRANT-42") != 1 {
			t.Errorf("SOAPAction %q: status %d, %d applications; want 200, 1: %s", action, a.status, f.Applications("GRANT-42"), a.body)
		}
	}
}

// A client that does not trust the fake's CA fails the handshake: the
// server's certificate is the throwaway CA's, not a public one.
func TestServerCertificateIsTheThrowawayCAs(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(f.URL(), fakes2s.ContentType, strings.NewReader(string(fakes2s.SubmitEnvelope("GRANT-42", ""))))
	if err == nil {
		resp.Body.Close()
		t.Fatal("a client without the fake's CA was answered")
	}
	if f.Received() != 0 {
		t.Errorf("received %d, want 0", f.Received())
	}
}
