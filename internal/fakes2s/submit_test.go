package fakes2s_test

import (
	"context"
	"encoding/xml"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

func TestSubmitIsAnsweredWithTrackingNumber(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	s := submit(context.Background(), newClient(t), f.URL(), "GRANT-42", "")
	if s.err != nil || s.status != http.StatusOK {
		t.Fatalf("submit: status %d, err %v; want 200", s.status, s.err)
	}
	if s.tracking != "GRANT10000001" {
		t.Errorf("tracking number %q, want GRANT10000001", s.tracking)
	}
	if got := f.TrackingNumbers("GRANT-42"); !slices.Equal(got, []string{"GRANT10000001"}) {
		t.Errorf("recorded %v, want [GRANT10000001]", got)
	}
	if f.Received() != 1 || f.Applications("GRANT-42") != 1 || f.TotalApplications() != 1 || f.Duplicates() != 0 {
		t.Errorf("received %d, applications %d, total %d, duplicates %d; want 1, 1, 1, 0",
			f.Received(), f.Applications("GRANT-42"), f.TotalApplications(), f.Duplicates())
	}
}

// A reconciler's answer built with SubmitResponse is byte for byte the
// one the funder sends, so a caller cannot tell the two apart.
func TestSubmitResponseIsTheFundersAnswer(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	status, answer := post(t, newClient(t), f.URL(), fakes2s.SubmitEnvelope("GRANT-42", "<application/>"))
	if want := fakes2s.SubmitResponse("GRANT-42", "GRANT10000001"); status != http.StatusOK || string(answer) != string(want) {
		t.Errorf("status %d, answer\n%s\nwant 200 and\n%s", status, answer, want)
	}
	if tracking, err := fakes2s.ParseSubmitResponse(fakes2s.SubmitResponse("GRANT-42", "GRANT10000007")); tracking != "GRANT10000007" || err != nil {
		t.Errorf("ParseSubmitResponse: %q, %v; want GRANT10000007", tracking, err)
	}
}

func TestIdempotencyKeyIsIgnored(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t)
	first := submit(context.Background(), client, f.URL(), "GRANT-42", "key-1")
	second := submit(context.Background(), client, f.URL(), "GRANT-42", "key-1")
	if first.tracking == "" || second.tracking == "" || first.tracking == second.tracking {
		t.Fatalf("tracking numbers %q and %q (errors %v, %v); want two different ones", first.tracking, second.tracking, first.err, second.err)
	}
	if f.Applications("GRANT-42") != 2 || f.Duplicates() != 1 {
		t.Errorf("applications %d, duplicates %d; want 2, 1", f.Applications("GRANT-42"), f.Duplicates())
	}
}

// soapFault is what the tests read of a SOAP 1.1 fault.
type soapFault struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Code    string   `xml:"Body>Fault>faultcode"`
}

func TestMalformedRequestIsClientFault(t *testing.T) {
	const envelope = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>%s</soap:Body></soap:Envelope>`
	wrap := func(body string) string { return strings.Replace(envelope, "%s", body, 1) }
	cases := []struct {
		name        string
		body        string
		wantQueries int // 1 if the funder takes it for a query, else it is a submission
	}{
		{"not XML", "SubmissionID=GRANT-42", 0},
		{"not a SOAP envelope", `<SubmitApplicationRequest xmlns="` + fakes2s.Namespace + `"><SubmissionID>GRANT-42</SubmissionID></SubmitApplicationRequest>`, 0},
		{"SOAP 1.2 envelope", `<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><SubmitApplicationRequest xmlns="` + fakes2s.Namespace + `"><SubmissionID>GRANT-42</SubmissionID></SubmitApplicationRequest></env:Body></env:Envelope>`, 0},
		{"operation in another namespace", wrap(`<SubmitApplicationRequest><SubmissionID>GRANT-42</SubmissionID></SubmitApplicationRequest>`), 0},
		{"empty Body", wrap(""), 0},
		{"no SubmissionID", wrap(`<SubmitApplicationRequest xmlns="` + fakes2s.Namespace + `"><GrantApplicationXML/></SubmitApplicationRequest>`), 0},
		{"blank SubmissionID", wrap(`<SubmitApplicationRequest xmlns="` + fakes2s.Namespace + `"><SubmissionID> </SubmissionID></SubmitApplicationRequest>`), 0},
		{"both operations", wrap(`<SubmitApplicationRequest xmlns="` + fakes2s.Namespace + `"><SubmissionID>A</SubmissionID></SubmitApplicationRequest><GetApplicationListRequest xmlns="` + fakes2s.Namespace + `"><SubmissionID>A</SubmissionID></GetApplicationListRequest>`), 0},
		{"query without SubmissionID", wrap(`<GetApplicationListRequest xmlns="` + fakes2s.Namespace + `"/>`), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, fakes2s.Options{DropRate: -1})
			status, answer := post(t, newClient(t), f.URL(), []byte(tc.body))
			var fault soapFault
			if err := xml.Unmarshal(answer, &fault); err != nil {
				t.Fatalf("answer is not a SOAP envelope: %v\n%s", err, answer)
			}
			if status != http.StatusInternalServerError || fault.Code != "soap:Client" {
				t.Errorf("status %d, faultcode %q; want 500, soap:Client", status, fault.Code)
			}
			if f.TotalApplications() != 0 {
				t.Errorf("recorded %d applications, want 0", f.TotalApplications())
			}
			if f.Queries() != tc.wantQueries || f.Received() != 1-tc.wantQueries {
				t.Errorf("queries %d, received %d; want %d, %d", f.Queries(), f.Received(), tc.wantQueries, 1-tc.wantQueries)
			}
		})
	}
}

func TestOtherMethodsAndPathsAreRefused(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t)
	base := strings.TrimSuffix(f.URL(), fakes2s.PortPath)
	cases := []struct {
		name, method, url string
		want              int
	}{
		{"GET on the port", http.MethodGet, f.URL(), http.StatusMethodNotAllowed},
		{"POST elsewhere", http.MethodPost, base + "/applications", http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, strings.NewReader(string(fakes2s.SubmitEnvelope("GRANT-42", ""))))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if f.Received() != 0 || f.Queries() != 0 || f.TotalApplications() != 0 {
		t.Errorf("received %d, queries %d, applications %d; want all 0", f.Received(), f.Queries(), f.TotalApplications())
	}
}

func TestSubmitEnvelopeEscapes(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	const awkward = `GRANT-<1>&"2"`
	s := submit(context.Background(), newClient(t), f.URL(), awkward, "")
	if s.err != nil || s.status != http.StatusOK {
		t.Fatalf("submit: status %d, err %v; want 200", s.status, s.err)
	}
	if f.Applications(awkward) != 1 {
		t.Errorf("applications of %q: %d, want 1", awkward, f.Applications(awkward))
	}
}

// The funder does not notice a client that gives up: the application is
// recorded when its work is done, after the client has seen an error.
func TestSubmissionIsRecordedAfterClientGivesUp(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1, Latency: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if s := submit(ctx, newClient(t), f.URL(), "GRANT-42", ""); !errors.Is(s.err, context.DeadlineExceeded) {
		t.Fatalf("submit: status %d, err %v; want the client's deadline", s.status, s.err)
	}
	for deadline := time.Now().Add(10 * time.Second); f.Applications("GRANT-42") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the application was never recorded")
		}
	}
}
