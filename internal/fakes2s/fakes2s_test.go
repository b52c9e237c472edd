package fakes2s_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"

	"github.com/grantretry/grantretry/internal/fakes2s"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start starts a funder that the test closes when it ends.
func start(t *testing.T, o fakes2s.Options) *fakes2s.Funder {
	t.Helper()
	f, err := fakes2s.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// newClient returns a plain net/http client of f, keep-alive on, with the
// client certificate and a Transport of its own so that no two tests share
// a connection.
func newClient(t *testing.T, f *fakes2s.Funder) *http.Client {
	return clientWith(t, f.ClientTLS())
}

// clientWith returns a client whose Transport has cfg.
func clientWith(t *testing.T, cfg *tls.Config) *http.Client {
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// submission is what a client saw of one SubmitApplication call.
type submission struct {
	status   int    // 0 if no response came back
	tracking string // "" unless answered 200
	err      error
	// reused has one entry per connection the Transport sent the request
	// on, in order: whether that connection was a reused one. More than
	// one means net/http resent the request by itself.
	reused []bool
}

// submit posts a SubmitApplication titled id through client, with its
// SOAPAction, with an
// Idempotency-Key header if key is not "". The request's body is a
// bytes.Reader, so http.NewRequest sets GetBody: net/http may replay it.
// The answer is read to its end, which puts the connection back in the
// idle pool before submit returns. Safe to call from many goroutines.
func submit(ctx context.Context, client *http.Client, url, id, key string) submission {
	var s submission
	trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { s.reused = append(s.reused, c.Reused) }}
	ctx = httptrace.WithClientTrace(ctx, trace)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(fakes2s.SubmitEnvelope(id, "<application/>")))
	if err != nil {
		s.err = err
		return s
	}
	req.Header.Set("Content-Type", fakes2s.ContentType)
	req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		s.err = err
		return s
	}
	defer resp.Body.Close()
	s.status = resp.StatusCode
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.err = err
		return s
	}
	if resp.StatusCode == http.StatusOK {
		var r fakes2s.Receipt
		r, s.err = fakes2s.ParseSubmitResponse(resp.Header.Get("Content-Type"), body)
		s.tracking = r.TrackingNumber
	}
	return s
}

// answer is a response as the tests read it.
type answer struct {
	status      int
	contentType string
	body        []byte
}

// post sends body to url with a SOAPAction header (none if action is "")
// and returns the answer.
func post(t *testing.T, client *http.Client, url, action string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", fakes2s.ContentType)
	if action != "" {
		req.Header.Set("SOAPAction", action)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), b}
}

// soapFault is what the tests read of a SOAP 1.1 fault.
type soapFault struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Code    string   `xml:"Body>Fault>faultcode"`
	String  string   `xml:"Body>Fault>faultstring"`
}

// fault reads the fault of an answer, MTOM-framed or bare.
func fault(t *testing.T, a answer) soapFault {
	t.Helper()
	env, err := fakes2s.Envelope(a.contentType, a.body)
	if err != nil {
		t.Fatalf("answer %q: %v", a.body, err)
	}
	var f soapFault
	if err := xml.Unmarshal(env, &f); err != nil {
		t.Fatalf("answer is not a SOAP envelope: %v\n%s", err, a.body)
	}
	return f
}

func id(i int) string { return fmt.Sprintf("GRANT-%d", i) }
