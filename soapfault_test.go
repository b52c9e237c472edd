package grantretry

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"
)

var _ ClassifyFunc = ClassifySOAPFault

// soapCase is one body and the verdict ClassifySOAPFault must give it: an
// empty reason means not ok.
type soapCase struct {
	name      string
	body      string
	retryable bool
	reason    string
}

func (c soapCase) check(t *testing.T) {
	t.Helper()
	got, ok := ClassifySOAPFault(nil, []byte(c.body))
	want := Classification{Retryable: c.retryable, Reason: c.reason}
	if ok != (c.reason != "") || got != want {
		t.Errorf("%s: ClassifySOAPFault = %+v, %v; want %+v, %v", c.name, got, ok, want, c.reason != "")
	}
}

const soapNS = `xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"`

// env11 is a SOAP 1.1 Envelope, soap prefix, around inner as its Body.
func env11(inner string) string {
	return `<soap:Envelope ` + soapNS + `><soap:Body>` + inner + `</soap:Body></soap:Envelope>`
}

// fault11 is a SOAP 1.1 fault with code as its faultcode's content.
func fault11(code string) string {
	return env11(`<soap:Fault><faultcode>` + code + `</faultcode><faultstring>refused</faultstring></soap:Fault>`)
}

// env12 is a SOAP 1.2 Envelope, env prefix, around inner as its Body.
func env12(inner string) string {
	return `<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body>` + inner + `</env:Body></env:Envelope>`
}

// fault12 is a SOAP 1.2 fault with value as its Code/Value's content.
func fault12(value string) string {
	return env12(`<env:Fault><env:Code><env:Value>` + value + `</env:Value></env:Code>` +
		`<env:Reason><env:Text xml:lang="en">refused</env:Text></env:Reason></env:Fault>`)
}

// Shaped like Grants.gov S2S faults (SOAP 1.1, soap prefix, the detail in
// the service's own namespace); the texts and codes are illustrative.
const (
	grantsGovClientFault = `<?xml version="1.0" encoding="UTF-8"?>
<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">
   <soap:Body>
      <soap:Fault>
         <faultcode>soap:Client</faultcode>
         <faultstring>Application failed validation: the SF424 form is missing required field ApplicantName</faultstring>
         <detail>
            <ns2:ErrorDetails xmlns:ns2="http://apply.grants.gov/system/GrantsCommonElements-V1.0">
               <ns2:Code>ValidationError</ns2:Code>
               <ns2:Message>cvc-complex-type.2.4.b: The content of element 'SF424_4_0' is not complete.</ns2:Message>
            </ns2:ErrorDetails>
         </detail>
      </soap:Fault>
   </soap:Body>
</soap:Envelope>`
	grantsGovServerFault = `<?xml version="1.0" encoding="UTF-8"?>
<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">
   <soap:Body>
      <soap:Fault>
         <faultcode>soap:Server</faultcode>
         <faultstring>Unable to process the request at this time. Please try again later.</faultstring>
         <detail>
            <ns2:ErrorDetails xmlns:ns2="http://apply.grants.gov/system/GrantsCommonElements-V1.0">
               <ns2:Code>SystemError</ns2:Code>
               <ns2:Message>Database connection unavailable</ns2:Message>
            </ns2:ErrorDetails>
         </detail>
      </soap:Fault>
   </soap:Body>
</soap:Envelope>`
	// The SOAP 1.2 primer's fault, with a funder's subcode.
	soap12SenderFault = `<?xml version="1.0" ?>
<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"
              xmlns:m="http://www.example.org/timeouts"
              xmlns:xml="http://www.w3.org/XML/1998/namespace">
 <env:Body>
  <env:Fault>
   <env:Code>
     <env:Value>env:Sender</env:Value>
     <env:Subcode>
      <env:Value>m:MessageTimeout</env:Value>
     </env:Subcode>
   </env:Code>
   <env:Reason>
     <env:Text xml:lang="en">Sender Timeout</env:Text>
   </env:Reason>
   <env:Detail>
     <m:MaxTime>P5M</m:MaxTime>
   </env:Detail>
  </env:Fault>
 </env:Body>
</env:Envelope>`
	soap12ReceiverFault = `<?xml version="1.0" ?>
<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope">
 <env:Header/>
 <env:Body>
  <env:Fault>
   <env:Code>
     <env:Value>env:Receiver</env:Value>
     <env:Subcode><env:Value xmlns:f="urn:funder">f:Overloaded</env:Value></env:Subcode>
   </env:Code>
   <env:Reason><env:Text xml:lang="en">Service temporarily unavailable</env:Text></env:Reason>
  </env:Fault>
 </env:Body>
</env:Envelope>`
)

// TestClassifySOAPFault: the codes each version defines, how they are
// named, and what is not a SOAP fault.
func TestClassifySOAPFault(t *testing.T) {
	for _, c := range soapSemanticCases() {
		c.check(t)
	}
}

func soapSemanticCases() []soapCase {
	return []soapCase{
		{"1.1 Client", fault11("soap:Client"), false, "soap:Client"},
		{"1.1 Server", fault11("soap:Server"), true, "soap:Server"},
		{"1.1 VersionMismatch", fault11("soap:VersionMismatch"), false, "soap:VersionMismatch"},
		{"1.1 MustUnderstand", fault11("soap:MustUnderstand"), false, "soap:MustUnderstand"},
		{"1.1 dotted subcode counts by its first part", fault11("soap:Client.Authentication"), false, "soap:Client"},
		{"1.1 dotted Server", fault11("soap:Server.Database.Down"), true, "soap:Server"},
		{"1.1 unknown code in the envelope namespace: fail loud", fault11("soap:Busy"), false, "soap:unknown"},
		{"1.1 code names are case-sensitive", fault11("soap:client"), false, "soap:unknown"},
		{"1.1 a funder's own code: fail loud", strings.Replace(fault11("f:Client"), "<faultcode>", `<faultcode xmlns:f="urn:funder">`, 1), false, "soap:unknown"},
		{"1.1 unprefixed Client, no default namespace", fault11("Client"), false, "soap:Client"},
		{"1.1 unprefixed Server", fault11("Server"), true, "soap:Server"},
		{"1.1 unprefixed Sender, as PHP writes it", fault11("Sender"), false, "soap:Sender"},
		{"1.1 unprefixed Receiver", fault11("Receiver"), true, "soap:Receiver"},
		{"1.1 unprefixed dotted Server, as Axis writes it", fault11("Server.userException"), true, "soap:Server"},
		{"1.1 unprefixed MustUnderstand", fault11("MustUnderstand"), false, "soap:MustUnderstand"},
		{"1.1 unprefixed code of a funder's own: fail loud", fault11("INVALID_LOGIN"), false, "soap:unknown"},
		{"1.1 unprefixed names are case-sensitive", fault11("server"), false, "soap:unknown"},
		{"1.1 a number as the code", fault11("42"), false, "soap:unknown"},
		{"1.1 WS-Addressing 1.0 code", strings.Replace(fault11("wsa:InvalidAddressingHeader"), "<faultcode>", `<faultcode xmlns:wsa="http://www.w3.org/2005/08/addressing">`, 1), false, "wsa:InvalidAddressingHeader"},
		{"1.1 WS-Addressing 2004/08 code", strings.Replace(fault11("wsa:ActionNotSupported"), "<faultcode>", `<faultcode xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing">`, 1), false, "wsa:ActionNotSupported"},
		{"1.1 WCF's addressing-none code", strings.Replace(fault11("a:ActionNotSupported"), "<faultcode>", `<faultcode xmlns:a="http://schemas.microsoft.com/ws/2005/05/addressing/none">`, 1), false, "wsa:ActionNotSupported"},
		{"1.1 WS-Addressing EndpointUnavailable", strings.Replace(fault11("wsa:EndpointUnavailable"), "<faultcode>", `<faultcode xmlns:wsa="http://www.w3.org/2005/08/addressing">`, 1), true, "wsa:EndpointUnavailable"},
		{"1.1 WS-Addressing name it does not define", strings.Replace(fault11("wsa:Busy"), "<faultcode>", `<faultcode xmlns:wsa="http://www.w3.org/2005/08/addressing">`, 1), false, "wsa:unknown"},
		{"1.1 WCF's InternalServiceFault", strings.Replace(fault11("a:InternalServiceFault"), "<faultcode>", `<faultcode xmlns:a="http://schemas.microsoft.com/net/2005/12/windowscommunicationfoundation/dispatcher">`, 1), true, "wcf:InternalServiceFault"},
		{"1.1 WCF's DeserializationFailed", strings.Replace(fault11("a:DeserializationFailed"), "<faultcode>", `<faultcode xmlns:a="http://schemas.microsoft.com/net/2005/12/windowscommunicationfoundation/dispatcher">`, 1), false, "wcf:DeserializationFailed"},
		{"1.1 WCF's SessionTerminated: fail loud", strings.Replace(fault11("a:SessionTerminated"), "<faultcode>", `<faultcode xmlns:a="http://schemas.microsoft.com/net/2005/12/windowscommunicationfoundation/dispatcher">`, 1), false, "soap:unknown"},
		{"1.1 whitespace-only code", fault11(" \n "), false, ""},
		{"1.1 empty code", fault11(""), false, ""},
		{"1.1 self-closing faultcode", env11(`<soap:Fault><faultcode/></soap:Fault>`), false, ""},
		{"1.1 code with an empty prefix", fault11(":Client"), false, ""},
		{"1.1 code with two colons", fault11("soap:Client:x"), false, ""},
		{"1.1 a 1.1 name in the SOAP 1.2 namespace", strings.Replace(fault11("e:Client"), "<faultcode>", `<faultcode xmlns:e="http://www.w3.org/2003/05/soap-envelope">`, 1), false, "soap:unknown"},
		{"1.1 a 1.2 code, by its own namespace", strings.Replace(fault11("e:Receiver"), "<faultcode>", `<faultcode xmlns:e="http://www.w3.org/2003/05/soap-envelope">`, 1), true, "soap:Receiver"},
		{"1.1 faultcode qualified in the envelope namespace", env11(`<soap:Fault><soap:faultcode>soap:Server</soap:faultcode></soap:Fault>`), true, "soap:Server"},
		{"1.1 faultcode in a funder's namespace", env11(`<soap:Fault><f:faultcode xmlns:f="urn:funder">soap:Client</f:faultcode></soap:Fault>`), false, ""},
		{"1.1 faultstring before faultcode", env11(`<soap:Fault><faultstring>x</faultstring><faultcode>soap:Server</faultcode></soap:Fault>`), true, "soap:Server"},
		{"1.1 a Header before the Body", `<soap:Envelope ` + soapNS + `><soap:Header><h:Auth xmlns:h="urn:h">t</h:Auth></soap:Header><soap:Body><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault></soap:Body></soap:Envelope>`, false, "soap:Client"},
		{"1.1 first code wins", env11(`<soap:Fault><faultcode>soap:Client</faultcode><faultcode>soap:Server</faultcode></soap:Fault>`), false, "soap:Client"},
		{"1.1 comment inside the code", fault11("soap:<!-- x -->Client"), false, "soap:Client"},
		{"1.1 element inside the code", fault11("soap:<b>Client</b>"), false, ""},
		{"1.1 XML declaration and byte-order mark", "\xef\xbb\xbf" + `<?xml version="1.0" encoding="utf-8"?>` + "\n" + fault11("soap:Client"), false, "soap:Client"},
		{"1.1 character references in the code", fault11("soap&#58;Cl&#105;ent"), false, "soap:Client"},

		{"1.2 Sender", fault12("env:Sender"), false, "soap:Sender"},
		{"1.2 Receiver", fault12("env:Receiver"), true, "soap:Receiver"},
		{"1.2 VersionMismatch", fault12("env:VersionMismatch"), false, "soap:VersionMismatch"},
		{"1.2 MustUnderstand", fault12("env:MustUnderstand"), false, "soap:MustUnderstand"},
		{"1.2 DataEncodingUnknown", fault12("env:DataEncodingUnknown"), false, "soap:DataEncodingUnknown"},
		{"1.2 has no dotted subcodes", fault12("env:Sender.Auth"), false, "soap:unknown"},
		{"1.2 the 1.1 names are not 1.2 codes", fault12("env:Client"), false, "soap:unknown"},
		{"1.2 unprefixed Sender", env12(`<env:Fault><env:Code><env:Value>Sender</env:Value></env:Code></env:Fault>`), false, "soap:Sender"},
		{"1.2 a WS-Addressing subcode under Sender", env12(`<env:Fault><env:Code><env:Value>env:Sender</env:Value><env:Subcode><env:Value xmlns:wsa="http://www.w3.org/2005/08/addressing">wsa:ActionNotSupported</env:Value></env:Subcode></env:Code></env:Fault>`), false, "soap:Sender"},
		{"1.2 subcode does not change the verdict", env12(`<env:Fault><env:Code><env:Value>env:Receiver</env:Value><env:Subcode><env:Value>env:Sender</env:Value></env:Subcode></env:Code></env:Fault>`), true, "soap:Receiver"},
		{"1.2 Value outside Code", env12(`<env:Fault><env:Value>env:Sender</env:Value></env:Fault>`), false, ""},
		{"1.2 unqualified Code and Value", env12(`<env:Fault><Code><Value>env:Sender</Value></Code></env:Fault>`), false, ""},
		{"1.2 a 1.1 faultcode in a 1.2 Fault", env12(`<env:Fault><faultcode>env:Sender</faultcode></env:Fault>`), false, ""},
		{"1.1 Envelope, 1.2 Body", `<soap:Envelope ` + soapNS + ` xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault></env:Body></soap:Envelope>`, false, ""},

		{"empty body", "", false, ""},
		{"whitespace", " \r\n\t", false, ""},
		{"JSON", `{"faultcode":"soap:Client"}`, false, ""},
		{"plain text", "Service Unavailable", false, ""},
		{"HTML error page", `<!DOCTYPE html><html><body><h1>500</h1><p>soap:Client</p></body></html>`, false, ""},
		{"text before the envelope, as a proxy page puts it", "oops" + fault11("soap:Client"), false, "soap:Client"},
		{"an Envelope without a Fault", env11(`<m:SubmitApplicationResponse xmlns:m="urn:m"><m:ok/></m:SubmitApplicationResponse>`), false, ""},
		{"an Envelope with an empty Body", env11(""), false, ""},
		{"an Envelope without a Body", `<soap:Envelope ` + soapNS + `><soap:Header/></soap:Envelope>`, false, ""},
		{"a Fault in the Header", `<soap:Envelope ` + soapNS + `><soap:Header><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault></soap:Header><soap:Body/></soap:Envelope>`, false, ""},
		{"a Body entry before the Fault", env11(`<m:r xmlns:m="urn:m"/><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault>`), false, ""},
		{"comments and whitespace before the Fault", env11("\n <!-- fault follows -->\n" + `<soap:Fault><faultcode>soap:Server</faultcode></soap:Fault>`), true, "soap:Server"},
		{"a Fault nested in a Body entry", env11(`<m:r xmlns:m="urn:m"><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault></m:r>`), false, ""},
		{"a Fault as the root", `<soap:Fault ` + soapNS + `><faultcode>soap:Client</faultcode></soap:Fault>`, false, ""},
		{"an Envelope inside another element", `<w>` + fault11("soap:Client") + `</w>`, false, "soap:Client"},
		{"a Fault without a code", env11(`<soap:Fault><faultstring>x</faultstring></soap:Fault>`), false, ""},
		{"malformed before the code", env11(`<soap:Fault><faultstring>x</faultstrin><faultcode>soap:Client</faultcode></soap:Fault>`), false, ""},
		{"malformed after the code", fault11("soap:Client") + "<<<", false, "soap:Client"},
		{"cut inside the code", upTo(fault11("soap:Client"), "soap:Cli"), false, ""},
		{"cut inside the code's end tag", upTo(fault11("soap:Client"), "</faultc"), false, ""},
		{"cut just after the code's end tag", upTo(fault11("soap:Client"), "</faultcode>"), false, "soap:Client"},
		{"not UTF-8", fault11("soap:Client\xff"), false, ""},
	}
}

// TestClassifySOAPFaultRealWorld: faults shaped like the ones funders send.
func TestClassifySOAPFaultRealWorld(t *testing.T) {
	for _, c := range []soapCase{
		{"Grants.gov-like validation fault", grantsGovClientFault, false, "soap:Client"},
		{"Grants.gov-like server fault", grantsGovServerFault, true, "soap:Server"},
		{"SOAP 1.2 env:Sender", soap12SenderFault, false, "soap:Sender"},
		{"SOAP 1.2 env:Receiver", soap12ReceiverFault, true, "soap:Receiver"},
	} {
		c.check(t)
	}
}

// TestClassifySOAPFaultIgnoresTheResponse: funders mislabel faults, so a
// Content-Type that does not match the body neither helps nor hurts, and
// resp may be nil.
func TestClassifySOAPFaultIgnoresTheResponse(t *testing.T) {
	for _, ct := range []string{"", "text/xml; charset=utf-8", "application/soap+xml", "text/html", "application/json"} {
		for _, resp := range []*http.Response{nil, {StatusCode: 500, Header: http.Header{"Content-Type": {ct}}}} {
			got, ok := ClassifySOAPFault(resp, []byte(grantsGovServerFault))
			if !ok || got != (Classification{Retryable: true, Reason: "soap:Server"}) {
				t.Errorf("Content-Type %q, resp %v: %+v, %v", ct, resp != nil, got, ok)
			}
		}
	}
}

// TestClassifySOAPFaultHostile: hostile XML is bounded, expands nothing and
// fetches nothing; namespaces are scoped as XML scopes them.
func TestClassifySOAPFaultHostile(t *testing.T) {
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write([]byte(`<!ENTITY code "soap:Server">`))
	}))
	defer srv.Close()
	secret := filepath.Join(t.TempDir(), "code.txt")
	if err := os.WriteFile(secret, []byte("soap:Server"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range soapHostileCases(srv.URL+"/evil.dtd", secret) {
		c.check(t)
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the parser fetched an external entity or DTD %d times", n)
	}
}

// billionLaughs is a DOCTYPE declaring lol9, which would expand to 3 GB,
// before doc.
func billionLaughs(doc string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?>` + "\n" + `<!DOCTYPE soap:Envelope [` + "\n" + ` <!ENTITY lol "lol">` + "\n")
	prev := "lol"
	for i := 1; i <= 9; i++ {
		name := "lol" + string(rune('0'+i))
		b.WriteString(` <!ENTITY ` + name + ` "` + strings.Repeat("&"+prev+";", 10) + `">` + "\n")
		prev = name
	}
	b.WriteString("]>\n" + doc)
	return b.String()
}

// A SOAP 1.1 fault split around a faultstring: padTo(faultHead, faultTail,
// n) puts the code's end tag wherever a test needs it.
const (
	faultHead = `<soap:Envelope ` + soapNS + `><soap:Body><soap:Fault><faultstring>`
	faultTail = `</faultstring><faultcode>soap:Client</faultcode></soap:Fault></soap:Body></soap:Envelope>`
)

// padTo pads head with text so that tail starts at index at.
func padTo(head, tail string, at int) string {
	return head + strings.Repeat("x", at-len(head)) + tail
}

// peek is what a Transport shows a ClassifyFunc of a document longer than
// MaxClassifyPeek.
func peek(doc string) string {
	if len(doc) <= MaxClassifyPeek {
		panic("peek: the document fits whole")
	}
	return doc[:MaxClassifyPeek]
}

// withPrefix renames the soap prefix in a document from env11 or fault11.
func withPrefix(doc, prefix string) string {
	doc = strings.ReplaceAll(doc, "soap:", prefix+":")
	return strings.ReplaceAll(doc, "xmlns:soap=", "xmlns:"+prefix+"=")
}

// upTo is s up to and including the first sep.
func upTo(s, sep string) string {
	return s[:strings.Index(s, sep)+len(sep)]
}

func soapHostileCases(dtdURL, secretPath string) []soapCase {
	deep := func(n int) string { return strings.Repeat("<a>", n) + strings.Repeat("</a>", n) }
	headerThenFault := func(header string) string {
		return `<soap:Envelope ` + soapNS + `><soap:Header>` + header + `</soap:Header><soap:Body><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault></soap:Body></soap:Envelope>`
	}
	long := strings.Repeat("y", 70<<10)
	utf16le := func(s string) string {
		b := []byte{0xff, 0xfe}
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u), byte(u>>8))
		}
		return string(b)
	}
	return []soapCase{
		{"billion laughs in the code", billionLaughs(fault11("&lol9;")), false, ""},
		{"billion laughs in the faultstring, before the code", billionLaughs(env11(`<soap:Fault><faultstring>&lol9;</faultstring><faultcode>soap:Server</faultcode></soap:Fault>`)), false, ""},
		{"billion laughs declared, never referenced", billionLaughs(fault11("soap:Client")), false, "soap:Client"},
		{"an entity declared as the code", `<!DOCTYPE x [<!ENTITY c "soap:Server">]>` + fault11("&c;"), false, ""},
		{"deep nesting, 10,000 levels", deep(10000), false, ""},
		{"deep nesting, 10,000 levels in the Header", headerThenFault(deep(10000)), false, ""},
		{"nesting 32 deep", headerThenFault(deep(30)), false, "soap:Client"},
		{"nesting 33 deep", headerThenFault(deep(31)), false, ""},
		{"a 60 KiB faultstring before the code", env11(`<soap:Fault><faultstring>` + strings.Repeat("z", 60<<10) + `</faultstring><faultcode>soap:Server</faultcode></soap:Fault>`), true, "soap:Server"},
		{"a 60 KiB faultcode", fault11(strings.Repeat("Client", 10<<10)), false, ""},
		{"a 257-byte faultcode", fault11("soap:Client" + strings.Repeat(" ", 257-len("soap:Client"))), false, ""},
		{"a 256-byte faultcode, mostly whitespace", fault11(strings.Repeat(" ", 128) + "soap:Client" + strings.Repeat("\n", 128-len("soap:Client"))), false, "soap:Client"},
		{"split at the peek limit, the code before it", peek(env11(`<soap:Fault><faultcode>soap:Client</faultcode><faultstring>` + long + `</faultstring></soap:Fault>`)), false, "soap:Client"},
		{"split at the peek limit, the code after it", peek(env11(`<soap:Fault><faultstring>` + long + `</faultstring><faultcode>soap:Client</faultcode></soap:Fault>`)), false, ""},
		{"split at the peek limit, inside the code's end tag", peek(padTo(faultHead, faultTail, MaxClassifyPeek-len(`</faultstring><faultcode>soap:Client</fault`))), false, ""},
		{"split at the peek limit, just after the code's end tag", peek(padTo(faultHead, faultTail, MaxClassifyPeek-len(`</faultstring><faultcode>soap:Client</faultcode>`))), false, "soap:Client"},
		{"an external entity as the code", `<!DOCTYPE soap:Envelope [<!ENTITY x SYSTEM "` + dtdURL + `">]>` + fault11("&x;"), false, ""},
		{"a file entity as the code", `<!DOCTYPE soap:Envelope [<!ENTITY x SYSTEM "file://` + secretPath + `">]>` + fault11("&x;"), false, ""},
		{"a SYSTEM DOCTYPE, not fetched, ignored", `<!DOCTYPE soap:Envelope SYSTEM "` + dtdURL + `">` + fault11("soap:Client"), false, "soap:Client"},
		{"a parameter entity from a SYSTEM DTD", `<!DOCTYPE soap:Envelope [<!ENTITY % p SYSTEM "` + dtdURL + `"> %p;]>` + fault11("&code;"), false, ""},
		{"the right names in the wrong namespace", strings.ReplaceAll(fault11("soap:Client"), "schemas.xmlsoap.org", "schemas.example.org"), false, ""},
		{"SOAP-ENV prefix", withPrefix(fault11("SOAP-ENV:Server"), "SOAP-ENV"), true, "soap:Server"},
		{"the prefix named Client", withPrefix(fault11("Client:Server"), "Client"), true, "soap:Server"},
		{"the prefix named xsi", withPrefix(fault11("xsi:Client"), "xsi"), false, "soap:Client"},
		{"a one-letter prefix", withPrefix(fault11("s:Client"), "s"), false, "soap:Client"},
		{"the xml prefix for the code", fault11("xml:Client"), false, ""},
		{"the xmlns prefix for the code", fault11("xmlns:Client"), false, ""},
		{"the xmlns prefix declared as SOAP's", strings.Replace(fault11("xmlns:Client"), "<faultcode>", `<faultcode xmlns:xmlns="http://schemas.xmlsoap.org/soap/envelope/">`, 1), false, ""},
		{"a default-namespace document", `<Envelope xmlns="http://schemas.xmlsoap.org/soap/envelope/"><Body><Fault><faultcode>Client</faultcode></Fault></Body></Envelope>`, false, "soap:Client"},
		{"a default-namespace document, prefixed code", `<Envelope xmlns="http://schemas.xmlsoap.org/soap/envelope/" xmlns:e="http://schemas.xmlsoap.org/soap/envelope/"><Body><Fault><faultcode>e:Server</faultcode></Fault></Body></Envelope>`, true, "soap:Server"},
		{"a default-namespace 1.2 document", `<Envelope xmlns="http://www.w3.org/2003/05/soap-envelope"><Body><Fault><Code><Value>Receiver</Value></Code></Fault></Body></Envelope>`, true, "soap:Receiver"},
		{"the default namespace undeclared for the code", `<Envelope xmlns="http://schemas.xmlsoap.org/soap/envelope/"><Body><Fault><faultcode xmlns="">Server</faultcode></Fault></Body></Envelope>`, true, "soap:Server"},
		{"CDATA as the code", fault11("<![CDATA[soap:Client]]>"), false, "soap:Client"},
		{"CDATA as half the code", fault11("soap:<![CDATA[Server]]>"), true, "soap:Server"},
		{"CDATA hiding markup", fault11("<![CDATA[<faultcode>soap:Client</faultcode>]]>"), false, ""},
		{"whitespace around the code", fault11("\n\t  soap:Server \r\n"), true, "soap:Server"},
		{"whitespace inside the code", fault11("soap: Server"), false, ""},
		{"an undeclared prefix", fault11("soapenv:Client"), false, ""},
		{"the prefix rebound to a funder's namespace on faultcode", strings.Replace(fault11("soap:Server"), "<faultcode>", `<faultcode xmlns:soap="urn:funder">`, 1), false, "soap:unknown"},
		{"a funder's prefix rebound to SOAP on the Fault", strings.Replace(strings.Replace(fault11("f:Client"), "<soap:Fault>", `<soap:Fault xmlns:f="http://schemas.xmlsoap.org/soap/envelope/">`, 1), "<soap:Envelope ", `<soap:Envelope xmlns:f="urn:funder" `, 1), false, "soap:Client"},
		{"a declaration on a closed sibling is out of scope", env11(`<soap:Fault><faultstring xmlns:e="http://schemas.xmlsoap.org/soap/envelope/">x</faultstring><faultcode>e:Client</faultcode></soap:Fault>`), false, ""},
		{"a declaration on the code's own element", env11(`<soap:Fault><faultcode xmlns:e="http://schemas.xmlsoap.org/soap/envelope/">e:Server</faultcode></soap:Fault>`), true, "soap:Server"},
		{"UTF-16 with a byte-order mark", utf16le(`<?xml version="1.0" encoding="UTF-16"?>` + fault11("soap:Client")), false, ""},
		{"UTF-8 bytes declaring UTF-16", `<?xml version="1.0" encoding="UTF-16"?>` + fault11("soap:Client"), false, ""},
		{"ISO-8859-1 declared", `<?xml version="1.0" encoding="ISO-8859-1"?>` + fault11("soap:Client"), false, "soap:Client"},
		{"ISO-8859-1 declared, Latin-1 text before the code", `<?xml version="1.0" encoding="ISO-8859-1"?>` + env11("<soap:Fault><faultstring>refus\xe9</faultstring><faultcode>soap:Client</faultcode></soap:Fault>"), false, "soap:Client"},
		{"Shift_JIS declared", `<?xml version="1.0" encoding="Shift_JIS"?>` + fault11("soap:Client"), false, ""},
	}
}

// TestClassifySOAPFaultBillionLaughsExpandsNothing: if the entities were
// expanded, lol9 alone would be 3 GB.
func TestClassifySOAPFaultBillionLaughsExpandsNothing(t *testing.T) {
	body := []byte(billionLaughs(fault11("&lol9;")))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, ok := ClassifySOAPFault(nil, body)
	runtime.ReadMemStats(&after)
	if ok {
		t.Error("a billion-laughs code classified")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("classifying a %d-byte billion-laughs document allocated %d bytes", len(body), n)
	}
}

// TestClassifySOAPFaultReadsAtMostThePeek: given more than MaxClassifyPeek
// bytes, it looks at the first MaxClassifyPeek only.
func TestClassifySOAPFaultReadsAtMostThePeek(t *testing.T) {
	for _, c := range []soapCase{
		{"the code's end tag ends at the peek", padTo(faultHead, faultTail, MaxClassifyPeek-len(`</faultstring><faultcode>soap:Client</faultcode>`)), false, "soap:Client"},
		{"the code's end tag ends a byte beyond it", padTo(faultHead, faultTail, MaxClassifyPeek-len(`</faultstring><faultcode>soap:Client</faultcode>`)+1), false, ""},
	} {
		c.check(t)
	}
}

// FuzzClassifySOAPFault: never panics, never changes body; a verdict is one of the documented
// ones, with a reason naming no funder text; not ok is the zero
// Classification; and a verdict never depends on what follows the bytes
// that gave it: if a prefix of body is classified, body is too, the same.
func FuzzClassifySOAPFault(f *testing.F) {
	for _, c := range append(soapSemanticCases(), soapHostileCases("http://127.0.0.1:9/evil.dtd", "/nonexistent")...) {
		if len(c.body) <= 4<<10 {
			f.Add([]byte(c.body), uint16(len(c.body)/2))
		}
	}
	for _, b := range sampleSeeds(f) {
		f.Add(b, uint16(len(b)/2))
	}
	php := []byte(fault11("Sender"))
	f.Add(gzipped(string(php)), uint16(20))
	f.Add([]byte(mtom(string(php), "PK")), uint16(200))
	f.Add([]byte("<html>500</html>"+string(php)), uint16(40))
	verdicts := map[string]bool{
		"soap:Client": false, "soap:Server": true, "soap:VersionMismatch": false, "soap:MustUnderstand": false,
		"soap:Sender": false, "soap:Receiver": true, "soap:DataEncodingUnknown": false, "soap:unknown": false,
		"wsa:EndpointUnavailable": true, "wsa:unknown": false,
		"wcf:InternalServiceFault": true, "wcf:DeserializationFailed": false,
		"salesforce:REQUEST_LIMIT_EXCEEDED": true, "salesforce:TotalRequests": false,
	}
	for _, r := range faultRules {
		verdicts[r.name] = false
	}
	for name, retryable := range netSuiteFaults {
		verdicts["netsuite:"+name] = retryable
	}
	for _, name := range []string{"InvalidAddressingHeader", "InvalidAddress", "InvalidEPR", "InvalidCardinality",
		"MissingAddressInEPR", "DuplicateMessageID", "ActionMismatch", "MessageAddressingHeaderRequired",
		"DestinationUnreachable", "ActionNotSupported", "OnlyAnonymousAddressSupported",
		"OnlyNonAnonymousAddressSupported", "InvalidMessageInformationHeader", "MessageInformationHeaderRequired"} {
		verdicts["wsa:"+name] = false
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		orig := bytes.Clone(body)
		c, ok := ClassifySOAPFault(nil, body)
		if !bytes.Equal(body, orig) {
			t.Fatal("the body was changed")
		}
		if !ok && c != (Classification{}) {
			t.Fatalf("not ok, but %+v", c)
		}
		if retryable, known := verdicts[c.Reason]; ok && (!known || retryable != c.Retryable) {
			t.Fatalf("verdict %+v is not a documented one", c)
		}
		if int(cut) > len(body) {
			return
		}
		if pc, pok := ClassifySOAPFault(nil, body[:cut]); pok && (!ok || pc != c) {
			t.Fatalf("the first %d bytes give %+v, all %d give %+v, %v", cut, pc, len(body), c, ok)
		}
	})
}

// BenchmarkClassifySOAPFault is what the classifier costs per response: a
// typical fault; 64 KiB bodies that are not one, which it gives up on at
// their first byte, their root or the Body's first child; and the worst
// case, a fault after a Header of 64 KiB of elements, every one of which
// must be parsed.
func BenchmarkClassifySOAPFault(b *testing.B) {
	bodies := []struct {
		name  string
		body  string
		fault bool
	}{
		{"fault-1.1-1KB", strings.Replace(grantsGovClientFault, "</ns2:ErrorDetails>", strings.Repeat(
			"   <ns2:Message>cvc-complex-type.2.4.b: The content of element 'SF424' is not complete.</ns2:Message>\n", 4)+
			"</ns2:ErrorDetails>", 1), true},
		{"json-64KiB", `{"items":[` + strings.Repeat(`"grant",`, (MaxClassifyPeek-12)/8) + `"x"]}`, false},
		{"html-64KiB", `<!DOCTYPE html><html><body>` + strings.Repeat("<p>maintenance</p>", (MaxClassifyPeek-50)/18) + `</body></html>`, false},
		{"response-64KiB", env11(`<m:r xmlns:m="urn:m">` + strings.Repeat("<m:item>grant</m:item>", (MaxClassifyPeek-200)/22) + `</m:r>`), false},
		{"header-64KiB-then-fault", `<soap:Envelope ` + soapNS + `><soap:Header><m:h xmlns:m="urn:m">` + strings.Repeat("<m:item>grant</m:item>", (MaxClassifyPeek-400)/22) +
			`</m:h></soap:Header><soap:Body><soap:Fault><faultcode>soap:Client</faultcode></soap:Fault></soap:Body></soap:Envelope>`, true},
	}
	for _, bb := range bodies {
		body := []byte(bb.body)
		b.Run(bb.name, func(b *testing.B) {
			if _, ok := ClassifySOAPFault(nil, body); ok != bb.fault || len(body) > MaxClassifyPeek {
				b.Fatalf("%d bytes, a fault: %v; want %v", len(body), ok, bb.fault)
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ClassifySOAPFault(nil, body)
			}
		})
	}
}
