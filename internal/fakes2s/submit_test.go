package fakes2s_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

func TestSubmitIsAnsweredWithTrackingNumberAndReceivedDateTime(t *testing.T) {
	received := time.Date(2026, 3, 2, 9, 30, 0, 0, time.FixedZone("EST", -5*3600))
	f := start(t, fakes2s.Options{DropRate: -1, Now: func() time.Time { return received }})
	a := post(t, newClient(t, f), f.URL(), fakes2s.Action(fakes2s.OpSubmitApplication), fakes2s.SubmitEnvelope("GRANT-42", "<SF424/>"))
	if a.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", a.status, a.body)
	}
	if !strings.HasPrefix(a.contentType, `multipart/related; type="application/xop+xml"; boundary="uuid:`) || !strings.HasPrefix(string(a.body), "--uuid:") {
		t.Errorf("Content-Type %q, body %.40q...: want the MTOM framing", a.contentType, a.body)
	}
	r, err := fakes2s.ParseSubmitResponse(a.contentType, a.body)
	if err != nil || r.TrackingNumber != "GRANT10000001" || !r.ReceivedDateTime.Equal(received) {
		t.Errorf("answer %+v, %v; want GRANT10000001 received %v", r, err, received)
	}
	if got := f.TrackingNumbers("GRANT-42"); !slices.Equal(got, []string{"GRANT10000001"}) {
		t.Errorf("recorded %v, want [GRANT10000001]", got)
	}
	if f.Received() != 1 || f.Applications("GRANT-42") != 1 || f.TotalApplications() != 1 || f.Duplicates() != 0 || f.Refused() != 0 {
		t.Errorf("received %d, applications %d, total %d, duplicates %d, refused %d; want 1, 1, 1, 0, 0",
			f.Received(), f.Applications("GRANT-42"), f.TotalApplications(), f.Duplicates(), f.Refused())
	}
}

// The answer carries no submission id: only the tracking number (GRANT
// and 8 digits, the schema's pattern) and the time, in the namespaces the
// WSDL gives them.
func TestSubmitResponseHasTheWSDLShape(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	a := post(t, newClient(t, f), f.URL(), "", fakes2s.SubmitEnvelope("GRANT-42", ""))
	env, err := fakes2s.Envelope(a.contentType, a.body)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>` +
		`<ns2:SubmitApplicationResponse xmlns="http://apply.grants.gov/system/GrantsCommonElements-V1.0" xmlns:ns2="http://apply.grants.gov/services/ApplicantWebServices-V2.0">` +
		`<GrantsGovTrackingNumber>GRANT[0-9]{8}</GrantsGovTrackingNumber><ns2:ReceivedDateTime>[0-9T:.+-]+(Z|[+-][0-9:]+)</ns2:ReceivedDateTime>` +
		`</ns2:SubmitApplicationResponse></soap:Body></soap:Envelope>$`)
	if !want.Match(env) {
		t.Errorf("envelope\n%s\ndoes not match\n%s", env, want)
	}
	if strings.Contains(string(env), "GRANT-42") {
		t.Error("the answer carries the submission title")
	}
}

// A reconciler's answer built with SubmitResponse reads as the funder's.
func TestSubmitResponseReadsAsTheFundersAnswer(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	ct, body := fakes2s.SubmitResponse("GRANT10000007", at)
	r, err := fakes2s.ParseSubmitResponse(ct, body)
	if err != nil || r.TrackingNumber != "GRANT10000007" || !r.ReceivedDateTime.Equal(at) {
		t.Errorf("ParseSubmitResponse: %+v, %v; want GRANT10000007 at %v", r, err, at)
	}
	// The label is a hint: the same body under another one reads alike.
	if r2, err := fakes2s.ParseSubmitResponse("text/xml", body); err != nil || r2 != r {
		t.Errorf("under text/xml: %+v, %v", r2, err)
	}
}

func TestIdempotencyKeyIsIgnored(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t, f)
	first := submit(context.Background(), client, f.URL(), "GRANT-42", "key-1")
	second := submit(context.Background(), client, f.URL(), "GRANT-42", "key-1")
	if first.tracking == "" || second.tracking == "" || first.tracking == second.tracking {
		t.Fatalf("tracking numbers %q and %q (errors %v, %v); want two different ones", first.tracking, second.tracking, first.err, second.err)
	}
	if f.Applications("GRANT-42") != 2 || f.Duplicates() != 1 {
		t.Errorf("applications %d, duplicates %d; want 2, 1", f.Applications("GRANT-42"), f.Duplicates())
	}
}

func TestOtherMethodsAndPathsAreRefused(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t, f)
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
	s := submit(context.Background(), newClient(t, f), f.URL(), awkward, "")
	if s.err != nil || s.status != http.StatusOK {
		t.Fatalf("submit: status %d, err %v; want 200", s.status, s.err)
	}
	if f.Applications(awkward) != 1 {
		t.Errorf("applications of %q: %d, want 1", awkward, f.Applications(awkward))
	}
}

// The service validates an application after it has answered: one whose
// GrantApplicationXML is not well-formed XML gets a tracking number and is
// Rejected with Errors.
func TestIllFormedApplicationIsReceivedThenRejected(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1})
	client := newClient(t, f)
	a := post(t, client, f.URL(), "", fakes2s.SubmitEnvelope("GRANT-42", "<SF424>"))
	r, err := fakes2s.ParseSubmitResponse(a.contentType, a.body)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("submit: status %d, err %v; want 200", a.status, err)
	}
	got, err := fakes2s.Query(context.Background(), client, f.URL(), fakes2s.OpGetApplicationList,
		fakes2s.Filter{Type: fakes2s.FilterStatus, Value: fakes2s.StatusRejectedWithErrors})
	if err != nil || len(got) != 1 || got[0].TrackingNumber != r.TrackingNumber {
		t.Errorf("applications Rejected with Errors: %+v, %v; want %s", got, err, r.TrackingNumber)
	}
}

// The funder does not notice a client that gives up: the application is
// recorded when its work is done, after the client has seen an error.
func TestSubmissionIsRecordedAfterClientGivesUp(t *testing.T) {
	f := start(t, fakes2s.Options{DropRate: -1, Latency: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the client gives up once the funder has the request
		for f.Received() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if s := submit(ctx, newClient(t, f), f.URL(), "GRANT-42", ""); !errors.Is(s.err, context.Canceled) {
		t.Fatalf("submit: status %d, err %v; want the client's cancellation", s.status, s.err)
	}
	for deadline := time.Now().Add(10 * time.Second); f.Applications("GRANT-42") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the application was never recorded")
		}
	}
}
