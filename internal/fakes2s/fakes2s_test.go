package fakes2s_test

import (
	"bytes"
	"context"
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

// newClient returns a plain net/http client, keep-alive on, with a
// Transport of its own so that no two tests share a connection.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
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

// submit posts a SubmitApplication for id through client, with an
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
		s.tracking, s.err = fakes2s.ParseSubmitResponse(body)
	}
	return s
}

// post sends body to url and returns the status and the answer.
func post(t *testing.T, client *http.Client, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := client.Post(url, fakes2s.ContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}

func id(i int) string { return fmt.Sprintf("GRANT-%d", i) }
