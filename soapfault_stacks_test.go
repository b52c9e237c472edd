package grantretry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// stackSample is a real answer kept in testdata/soapfaults and the verdict
// ClassifySOAPFault gives it: an empty reason means not ok. note says why,
// and names the samples whose right answer a fault code cannot give.
type stackSample struct {
	name      string
	retryable bool
	reason    string
	note      string
}

// stackSamples is every sample in testdata/soapfaults.
var stackSamples = []stackSample{
	{"grantsgov-mtom-not-found", true, "soap:Server", "Grants.gov: every fault is soap:Server; its text is grantsgov.ClassifyFault's to read"},
	{"grantsgov-plain-labelled-multipart", true, "soap:Server", "a plain envelope labelled multipart/related"},
	{"grantsgov-mtom-success-false", false, "", "a refusal that is a response, not a fault"},
	{"savon-err-no-session", false, "soap:unknown", "ERR_NO_SESSION: a code in no known set fails loud"},
	{"savon-cxf-server", true, "soap:Server", ""},
	{"savon-invalid-utf8", true, "soap:Server", "the bytes that are not UTF-8 come after the code"},
	{"savon-fault12-in-11-namespace", false, "", "SOAP 1.2 elements in a 1.1 Fault: no faultcode"},
	{"savon-service-fault", false, "", "ServiceFault is not a Fault"},
	{"savon-empty-fault", false, "", "an empty faultcode"},
	{"savon-iis-axis-html", false, "axis:no_such_operation", "found after the IIS page; Axis 1 labels \"No such operation\" Server.userException, a client error only the text tells"},
	{"savon-mm7-multipart", false, "", "a multipart response, not a fault"},
	{"netsuite-concurrent-session", true, "netsuite:exceededRequestLimitFault", "a request limit, named in the detail: retrying later is right"},
	{"netsuite-invalid-credentials", false, "netsuite:invalidCredentialsFault", "NetSuite labels a login failure Server.userException, as it does the request limit, and this fixture's faultstring is the limit's: the detail tells them apart"},
	{"nodesoap-netsuite-invalid-credentials", false, "netsuite:invalidCredentialsFault", "the same NetSuite label and detail"},
	{"nodesoap-soap12-primer-sender", false, "soap:Sender", ""},
	{"nodesoap-iso-8859-1-test-code", false, "soap:unknown", "an ISO-8859-1 declaration, and a code in no known set"},
	{"php-soapserver-sender", false, "soap:Sender", "unprefixed, as PHP writes it"},
	{"php-soapserver-version-mismatch", false, "soap:VersionMismatch", ""},
	{"mono-wsa10-action-not-supported", false, "wsa:ActionNotSupported", "a WS-Addressing code as the faultcode"},
	{"corewcf-internal-service-fault", true, "wcf:InternalServiceFault", "WCF's receiver fault"},
	{"metro-mustunderstand-12", false, "soap:MustUnderstand", "Reason before Code"},
	{"metro-receiver-action-not-supported", false, "metro:action_not_supported", "Metro labels a wrong action Receiver: a client error only the text tells"},
	{"metro-server-schema-validation", false, "xsd:validation", "Metro labels a request its schema refuses Server; the validator's cvc- code is in the detail"},
	{"salesforce-request-limit-concurrent", true, "salesforce:REQUEST_LIMIT_EXCEEDED", "Salesforce's concurrent request limit: clears in seconds"},
	{"salesforce-request-limit-total", false, "salesforce:TotalRequests", "Salesforce's rolling 24-hour limit, the same code: owed (TestSalesforceDailyLimitFaultIsOwed)"},
}

func TestSalesforceDailyLimitFaultIsOwed(t *testing.T) {
	for name, owed := range map[string]bool{"salesforce-request-limit-total": true, "salesforce-request-limit-concurrent": false} {
		h, body := readSample(t, name)
		got, ok := ClassifySOAPFault(&http.Response{StatusCode: 500, Header: h}, body)
		if !ok || got.Owed != owed || (owed && got.Retryable) {
			t.Errorf("%s: %+v, %v; want owed %v", name, got, ok, owed)
		}
	}
}

// TestClassifySOAPFaultRealStacks: every real answer kept in
// testdata/soapfaults gets its verdict, through its own headers, and
// every sample there is in the table.
func TestClassifySOAPFaultRealStacks(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range stackSamples {
		seen[s.name] = true
		header, body := readSample(t, s.name)
		c := soapCase{name: s.name, body: string(body), retryable: s.retryable, reason: s.reason}
		c.checkWith(t, &http.Response{StatusCode: 500, Header: header})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "soapfaults", "*.body"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".body"); !seen[name] {
			t.Errorf("sample %s has no verdict in stackSamples", name)
		}
	}
}

// owedSOAPReasons are the reasons of ClassifySOAPFault's Owed verdicts.
var owedSOAPReasons = map[string]bool{"salesforce:TotalRequests": true}

// checkWith is check with resp given to the classifier, which must read
// neither resp.Body nor change body.
func (c soapCase) checkWith(t *testing.T, resp *http.Response) {
	t.Helper()
	resp.Body = untouchableBody{t}
	body := []byte(c.body)
	orig := bytes.Clone(body)
	got, ok := ClassifySOAPFault(resp, body)
	want := Classification{Retryable: c.retryable, Reason: c.reason, Owed: owedSOAPReasons[c.reason]}
	if ok != (c.reason != "") || got != want {
		t.Errorf("%s: ClassifySOAPFault = %+v, %v; want %+v, %v", c.name, got, ok, want, c.reason != "")
	}
	if !bytes.Equal(body, orig) {
		t.Errorf("%s: ClassifySOAPFault changed the body", c.name)
	}
}

// TestClassifySOAPFaultFramings: real faults as stacks and proxies frame
// them (MTOM, gzip and deflate, Latin-1 charsets, an HTML page in front)
// get the verdict their plain form gets.
func TestClassifySOAPFaultFramings(t *testing.T) {
	_, php := readSample(t, "php-soapserver-sender")
	_, cxf := readSample(t, "savon-cxf-server")
	_, netsuite := readSample(t, "netsuite-invalid-credentials")
	_, wcf := readSample(t, "corewcf-internal-service-fault")
	_, metro := readSample(t, "metro-mustunderstand-12")
	latin1 := strings.Replace(string(cxf), "Fault occurred while processing.", "Donn\xe9es refus\xe9es", 1)
	html := `<!DOCTYPE html><html><head><title>500 - Internal server error.</title></head><body><h2>500 - Internal server error.</h2></body></html>` + "\r\n"
	for _, c := range []struct {
		soapCase
		header http.Header
	}{
		{soapCase{"PHP's Sender, MTOM", mtom(string(php), "%PDF-1.4"), false, "soap:Sender"}, hdr("Content-Type", mtomType)},
		{soapCase{"PHP's Sender, MTOM labelled text/xml", mtom(string(php), "%PDF-1.4"), false, "soap:Sender"}, hdr("Content-Type", "text/xml; charset=utf-8")},
		{soapCase{"CXF's Server, MTOM, no headers", "\r\n" + mtom(string(cxf), ""), true, "soap:Server"}, http.Header{}},
		{soapCase{"Metro's MustUnderstand, gzip", string(gzipped(string(metro))), false, "soap:MustUnderstand"}, hdr("Content-Encoding", "gzip")},
		{soapCase{"PHP's Sender, gzip with no header", string(gzipped(string(php))), false, "soap:Sender"}, http.Header{}},
		{soapCase{"WCF's InternalServiceFault, deflate", string(zlibbed(string(wcf))), true, "wcf:InternalServiceFault"}, hdr("Content-Encoding", "deflate")},
		{soapCase{"PHP's Sender, raw deflate", string(deflated(string(php))), false, "soap:Sender"}, hdr("Content-Encoding", "deflate")},
		{soapCase{"CXF's Server, gzip, MTOM", string(gzipped(mtom(string(cxf), "\x00\x01"))), true, "soap:Server"}, hdr("Content-Encoding", "gzip", "Content-Type", mtomType)},
		{soapCase{"ISO-8859-1 declared, Latin-1 text", `<?xml version="1.0" encoding="ISO-8859-1"?>` + latin1, true, "soap:Server"}, http.Header{}},
		{soapCase{"windows-1252 in the Content-Type", latin1, true, "soap:Server"}, hdr("Content-Type", "text/xml; charset=windows-1252")},
		{soapCase{"NetSuite's fault after an IIS page", html + string(netsuite), false, "netsuite:invalidCredentialsFault"}, hdr("Content-Type", "text/html")},
		{soapCase{"PHP's Sender after an HTML page, gzip", string(gzipped(html + string(php))), false, "soap:Sender"}, hdr("Content-Encoding", "gzip", "Content-Type", "text/html")},
	} {
		c.checkWith(t, &http.Response{StatusCode: 500, Header: c.header})
	}
}

// TestClassifySOAPFaultRealStacksThroughTheTransport: real faults, framed
// as stacks send them, over a real server: a terminal one is tried once,
// a transient one retried, and the caller reads every body byte for byte.
func TestClassifySOAPFaultRealStacksThroughTheTransport(t *testing.T) {
	type answer struct {
		header http.Header
		body   []byte
	}
	_, php := readSample(t, "php-soapserver-sender")
	ggHeader, gg := readSample(t, "grantsgov-mtom-not-found")
	_, iis := readSample(t, "savon-iis-axis-html")
	cases := []struct {
		name     string
		answer   answer
		attempts int
		reason   string
	}{
		{"PHP's Sender, gzip", answer{hdr("Content-Type", "text/xml; charset=utf-8", "Content-Encoding", "gzip"), gzipped(string(php))}, 1, "terminal:500;soap:Sender"},
		{"Grants.gov's MTOM soap:Server", answer{ggHeader, gg}, 3, "transient:500;soap:Server"},
		{"an IIS page with an Axis fault", answer{hdr("Content-Type", "text/html"), iis}, 1, "terminal:500;axis:no_such_operation"},
		{"an unknown code, ISO-8859-1", answer{hdr("Content-Type", "text/xml; charset=ISO-8859-1"), []byte(env11("<soap:Fault><faultcode>INVALID_LOGIN</faultcode><faultstring>Donn\xe9es</faultstring></soap:Fault>"))}, 1, "terminal:500;soap:unknown"},
	}
	for _, c := range cases {
		var mu sync.Mutex
		served := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			served++
			mu.Unlock()
			for k, v := range c.answer.header {
				w.Header()[k] = v
			}
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(c.answer.body)
		}))
		tr := New(&http.Transport{DisableCompression: true}, WithClock(newFakeClock()), WithClassifier(ClassifySOAPFault), WithBudget(2, time.Hour), WithoutBreaker())
		ctx := WithSubmissionID(context.Background(), "GRANT-"+c.name)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("<submit/>"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, c.answer.body) {
			t.Errorf("%s: the caller read %d bytes (%v), not the %d sent", c.name, len(got), err, len(c.answer.body))
		}
		if o := mustOutcome(t, resp); o.Attempts != c.attempts || o.Reason != c.reason {
			t.Errorf("%s: %d attempts, %q; want %d, %q", c.name, o.Attempts, o.Reason, c.attempts, c.reason)
		}
		mu.Lock()
		if served != c.attempts {
			t.Errorf("%s: the funder saw %d requests, want %d", c.name, served, c.attempts)
		}
		mu.Unlock()
		tr.CloseIdleConnections()
		srv.Close()
	}
}

// TestSOAPFaultSamplesHaveSources: every sample names where it comes from.
func TestSOAPFaultSamplesHaveSources(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "soapfaults", "*.source"))
	if len(files) < len(stackSamples) {
		t.Errorf("%d source notes for %d samples", len(files), len(stackSamples))
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("repository: ")) && !bytes.Contains(b, []byte("url: https://")) {
			t.Errorf("%s names no repository or URL", f)
		}
		if bytes.Contains(b, []byte("repository: ")) && !bytes.Contains(b, []byte("commit: ")) {
			t.Errorf("%s names a repository but no commit", f)
		}
	}
}

// TestClassifySOAPFaultServerTexts: a Server or Receiver fault is read to
// the Fault's end tag, where a NetSuite detail, then a stack's fixed text
// for a request it cannot dispatch, turn it terminal; until that end tag
// the verdict is not known, so a body cut before it is not ok.
func TestClassifySOAPFaultServerTexts(t *testing.T) {
	netsuite := func(faultstring, ns, elem string) string {
		return env11(`<soap:Fault><faultcode>soap:Server.userException</faultcode><faultstring>` + faultstring +
			`</faultstring><detail><f:` + elem + ` xmlns:f="` + ns + `"><f:code>X</f:code></f:` + elem + `></detail></soap:Fault>`)
	}
	const nsFaults = "urn:faults_2019_2.platform.webservices.netsuite.com"
	axis := env11(`<soap:Fault><faultcode>soap:Server</faultcode><faultstring>No such operation 'submit'</faultstring></soap:Fault>`)
	for _, c := range []soapCase{
		{"Axis's text under Server", axis, false, "axis:no_such_operation"},
		{"Axis's text under Client stays Client", env11(`<soap:Fault><faultcode>soap:Client</faultcode><faultstring>No such operation 'submit'</faultstring></soap:Fault>`), false, "soap:Client"},
		{"CXF's SOAPAction text, unprefixed Server", env11(`<soap:Fault><faultcode>Server</faultcode><faultstring>The given SOAPAction urn:x does not match an operation.</faultstring></soap:Fault>`), false, "cxf:action_mismatch"},
		{"Metro's text in SOAP 1.2, Reason before Code", env12(`<env:Fault><env:Reason><env:Text xml:lang="en">com.sun.xml.ws.addressing.model.ActionNotSupportedException</env:Text></env:Reason><env:Code><env:Value>env:Receiver</env:Value></env:Code></env:Fault>`), false, "metro:action_not_supported"},
		{"only the first Reason Text counts", env12(`<env:Fault><env:Code><env:Value>env:Receiver</env:Value></env:Code><env:Reason><env:Text xml:lang="en">busy</env:Text><env:Text xml:lang="fr">ActionNotSupportedException</env:Text></env:Reason></env:Fault>`), true, "soap:Receiver"},
		{"a rule's text only in the detail", env11(`<soap:Fault><faultcode>soap:Server</faultcode><faultstring>busy</faultstring><detail>No such operation</detail></soap:Fault>`), true, "soap:Server"},
		{"a rule's text past the text kept", env11(`<soap:Fault><faultcode>soap:Server</faultcode><faultstring>` + strings.Repeat("x", maxSOAPFaultText) + `No such operation</faultstring></soap:Fault>`), true, "soap:Server"},
		{"NetSuite's detail wins over the text", netsuite("No such operation", nsFaults, "exceededConcurrentRequestLimitFault"), true, "netsuite:exceededConcurrentRequestLimitFault"},
		{"NetSuite's login refusal", netsuite("busy", nsFaults, "invalidSessionFault"), false, "netsuite:invalidSessionFault"},
		{"NetSuite's unexpected error", netsuite("busy", nsFaults, "unexpectedErrorFault"), true, "netsuite:unexpectedErrorFault"},
		{"a NetSuite element it does not know", netsuite("busy", nsFaults, "asyncFault"), true, "soap:Server"},
		{"NetSuite's names in another namespace", netsuite("busy", "urn:faults_2019_2.platform.webservices.example.com", "invalidCredentialsFault"), true, "soap:Server"},
		{"malformed after the text: what was read decides", env11(`<soap:Fault><faultcode>soap:Server</faultcode><faultstring>No such operation</faultstring><detail></wrong></detail></soap:Fault>`), false, "axis:no_such_operation"},
		{"cut before the Fault's end", strings.TrimSuffix(axis, `</soap:Fault></soap:Body></soap:Envelope>`), false, ""},
		{"cut inside the text", axis[:strings.Index(axis, "No such")+2], false, ""},
	} {
		c.checkWith(t, &http.Response{StatusCode: 500, Header: http.Header{}})
	}
}
