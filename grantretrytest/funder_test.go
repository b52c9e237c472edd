package grantretrytest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/grantretrytest"
	"github.com/grantretry/grantretry/grantsgov"
)

// trackedBody is a request body that counts what was read of it and
// whether it was closed.
type trackedBody struct {
	r      *strings.Reader
	mu     sync.Mutex
	read   int
	closed bool
}

func newTrackedBody(s string) *trackedBody { return &trackedBody{r: strings.NewReader(s)} }

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.mu.Lock()
	b.read += n
	b.mu.Unlock()
	return n, err
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func post(t *testing.T, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://funder.example/v1/applications?round=2", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(grantretry.HeaderIdempotencyKey, "key-1")
	return req
}

func TestFunderAnswersInOrderAndRecordsEachRequest(t *testing.T) {
	f := grantretrytest.NewFunder(
		grantretrytest.Answer{Status: 503, Header: http.Header{"Retry-After": {"2"}}, Body: "busy"},
		grantretrytest.Reply(201, `{"reference":"FND-0001"}`),
	)
	want := []struct {
		status int
		header string
		body   string
	}{{503, "2", "busy"}, {201, "", `{"reference":"FND-0001"}`}}
	for i, w := range want {
		req := post(t, strings.NewReader("application "+string(rune('A'+i))))
		resp, err := f.RoundTrip(req)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != w.status || resp.Header.Get("Retry-After") != w.header || string(got) != w.body {
			t.Errorf("answer %d: got %d %q %q, want %d %q %q", i, resp.StatusCode, resp.Header.Get("Retry-After"), got, w.status, w.header, w.body)
		}
		if resp.Request != req || resp.ContentLength != int64(len(w.body)) || resp.ProtoMajor != 1 {
			t.Errorf("answer %d: Request %p (want %p), ContentLength %d (want %d), ProtoMajor %d", i, resp.Request, req, resp.ContentLength, len(w.body), resp.ProtoMajor)
		}
	}
	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/applications" || r.URL.Query().Get("round") != "2" ||
			r.Key != "key-1" || r.Header.Get(grantretry.HeaderIdempotencyKey) != "key-1" ||
			string(r.Body) != "application "+string(rune('A'+i)) || r.Answer != i || !r.Processed || r.At.IsZero() {
			t.Errorf("request %d recorded as %+v", i, r)
		}
	}
	if f.Count("key-1") != 2 || f.Processed("key-1") != 2 || f.Count("") != 0 || f.Remaining() != 0 || f.Err() != nil || f.Unclosed() != 0 {
		t.Errorf("Count %d, Processed %d, Count(\"\") %d, Remaining %d, Err %v, Unclosed %d; want 2, 2, 0, 0, nil, 0",
			f.Count("key-1"), f.Processed("key-1"), f.Count(""), f.Remaining(), f.Err(), f.Unclosed())
	}
}

func TestZeroAnswerIsA200WithAnEmptyBody(t *testing.T) {
	f := grantretrytest.NewFunder(grantretrytest.Answer{})
	resp, err := f.RoundTrip(post(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Status != "200 OK" || len(got) != 0 || resp.ContentLength != 0 || resp.Header == nil {
		t.Errorf("got %q %q, ContentLength %d, Header %v", resp.Status, got, resp.ContentLength, resp.Header)
	}
}

func TestAfterTheLastAnswerTheFunderSaysItsScriptRanOut(t *testing.T) {
	f := grantretrytest.NewFunder(grantretrytest.Reply(503, "busy"))
	for range 3 {
		resp, err := f.RoundTrip(post(t, strings.NewReader("x")))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	reqs := f.Requests()
	if reqs[0].Answer != 0 || reqs[1].Answer != -1 || reqs[2].Answer != -1 || reqs[1].Processed {
		t.Errorf("answers %d %d %d, second processed %v; want 0 -1 -1, false", reqs[0].Answer, reqs[1].Answer, reqs[2].Answer, reqs[1].Processed)
	}
	resp, err := f.RoundTrip(post(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != grantretrytest.StatusScriptRanOut || !strings.Contains(string(body), "ran out") {
		t.Errorf("got %d %q, want %d saying the script ran out", resp.StatusCode, body, grantretrytest.StatusScriptRanOut)
	}
	if f.Err() == nil || f.Remaining() != 0 {
		t.Errorf("Err %v, Remaining %d; want an error, 0", f.Err(), f.Remaining())
	}
}

// TestScriptRanOutEndsAGrantretryCallAtOnce: the answer after the script's
// end is not retried and not ambiguous, under the default policy.
func TestScriptRanOutEndsAGrantretryCallAtOnce(t *testing.T) {
	f := grantretrytest.NewFunder()
	client := &http.Client{Transport: grantretry.New(f)}
	_, out, err := submit(context.Background(), client, "https://funder.example/v1/applications", `{}`)
	if err == nil || out.Attempts != 1 || out.Disposition != grantretry.FailedTerminal || out.Ambiguous {
		t.Errorf("got %v after %d attempts, %v, ambiguous %v; want a terminal failure after 1, not ambiguous", err, out.Attempts, out.Disposition, out.Ambiguous)
	}
	if f.Err() == nil {
		t.Error("Err is nil after a request the script had no answer for")
	}
}

func TestAnswerWithAStatusOutOfRangeIsAScriptError(t *testing.T) {
	for _, status := range []int{1, 99, 100, 101, 199, 1000, -5} {
		f := grantretrytest.NewFunder(grantretrytest.Reply(status, ""))
		resp, err := f.RoundTrip(post(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != grantretrytest.StatusScriptRanOut || f.Err() == nil || f.Requests()[0].Answer != 0 {
			t.Errorf("status %d: got %d, Err %v", status, resp.StatusCode, f.Err())
		} else if !strings.Contains(f.Err().Error(), "want 200 to 999") {
			t.Errorf("status %d: Err %q does not say which statuses an Answer may have", status, f.Err())
		}
	}
}

// TestFunderReadsAndClosesEveryRequestBody holds the RoundTripper
// contract on every path: answered, dropped before or after the read,
// cut by its context, and past the script's end.
func TestFunderReadsAndClosesEveryRequestBody(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	shortCtx, cancelShort := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelShort()
	for _, tc := range []struct {
		name    string
		answers []grantretrytest.Answer
		ctx     context.Context
		wantErr bool
	}{
		{"answered", []grantretrytest.Answer{grantretrytest.Reply(200, "")}, context.Background(), false},
		{"dropped before the read", []grantretrytest.Answer{grantretrytest.DropBeforeRead()}, context.Background(), true},
		{"dropped after the read", []grantretrytest.Answer{grantretrytest.DropAfterRead()}, context.Background(), true},
		{"delay cut by the context", []grantretrytest.Answer{grantretrytest.Reply(200, "").After(time.Hour)}, shortCtx, true},
		{"context done before it arrived", []grantretrytest.Answer{grantretrytest.Reply(200, "")}, canceled, true},
		{"past the script", nil, context.Background(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := grantretrytest.NewFunder(tc.answers...)
			body := newTrackedBody("the application")
			req := post(t, body).WithContext(tc.ctx)
			resp, err := f.RoundTrip(req)
			if (err != nil) != tc.wantErr || (resp != nil) == (err != nil) {
				t.Fatalf("got response %v and error %v; want exactly one, an error: %v", resp != nil, err, tc.wantErr)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if body.read != len("the application") || !body.closed {
				t.Errorf("read %d bytes of %d, closed %v", body.read, len("the application"), body.closed)
			}
			if got := string(f.Requests()[0].Body); got != "the application" {
				t.Errorf("recorded body %q", got)
			}
		})
	}
}

func TestFunderRefusesANilRequestWithAnError(t *testing.T) {
	resp, err := grantretrytest.NewFunder().RoundTrip(nil)
	if err == nil || resp != nil {
		t.Errorf("got %v, %v; want an error alone", resp, err)
	}
	body := newTrackedBody("x")
	resp, err = grantretrytest.NewFunder().RoundTrip(&http.Request{Method: http.MethodPost, Body: body})
	if err == nil || resp != nil || !body.closed {
		t.Errorf("no URL: got %v, %v, body closed %v; want an error alone, the body closed", resp, err, body.closed)
	}
}

// TestDropsAreTheErrorsNetHTTPReturns: a refused connection and a reset
// read, as errors.Is finds them.
func TestDropsAreTheErrorsNetHTTPReturns(t *testing.T) {
	f := grantretrytest.NewFunder(grantretrytest.DropBeforeRead(), grantretrytest.DropAfterRead())
	_, before := f.RoundTrip(post(t, nil))
	_, after := f.RoundTrip(post(t, nil))
	var op *net.OpError
	if !errors.Is(before, syscall.ECONNREFUSED) || !errors.As(before, &op) || op.Op != "dial" {
		t.Errorf("before the read: %v, want a dial refused", before)
	}
	if !errors.Is(after, syscall.ECONNRESET) || !errors.As(after, &op) || op.Op != "read" {
		t.Errorf("after the read: %v, want a read reset", after)
	}
	if f.Count("key-1") != 2 || f.Processed("key-1") != 1 {
		t.Errorf("Count %d, Processed %d; want 2, 1", f.Count("key-1"), f.Processed("key-1"))
	}
}

// TestGrantretryReadsADropBeforeReadAsNotApplied and its pair check the
// verdicts the drops are documented to get from grantretry.
func TestGrantretryReadsADropBeforeReadAsNotApplied(t *testing.T) {
	out := oneAttempt(t, grantretrytest.DropBeforeRead())
	if out.Reason != "transport:refused" || out.Ambiguous {
		t.Errorf("reason %q, ambiguous %v; want transport:refused, not ambiguous", out.Reason, out.Ambiguous)
	}
}

func TestGrantretryReadsADropAfterReadAsAmbiguous(t *testing.T) {
	out := oneAttempt(t, grantretrytest.DropAfterRead())
	if out.Reason != "transport:reset" || !out.Ambiguous {
		t.Errorf("reason %q, ambiguous %v; want transport:reset, ambiguous", out.Reason, out.Ambiguous)
	}
}

// oneAttempt makes a call of one attempt, no retry, that a answers.
func oneAttempt(t *testing.T, a grantretrytest.Answer) grantretry.Outcome {
	t.Helper()
	f := grantretrytest.NewFunder(a)
	client := &http.Client{Transport: grantretry.New(f, grantretry.WithBudget(0, time.Minute))}
	_, out, err := submit(context.Background(), client, "https://funder.example/v1/applications", `{}`)
	if err == nil || out.Attempts != 1 {
		t.Fatalf("got %v after %d attempts, want a failure after 1", err, out.Attempts)
	}
	return out
}

func TestDropsAreRetriedUnderTheSameKey(t *testing.T) {
	f, _, out, err := func() (*grantretrytest.Funder, string, grantretry.Outcome, error) {
		f := grantretrytest.NewFunder(grantretrytest.DropBeforeRead(), grantretrytest.DropAfterRead(), grantretrytest.Reply(201, `{"reference":"FND-0001"}`))
		client := &http.Client{Transport: grantretry.New(f, grantretry.WithClock(noWait{}))}
		ref, out, err := submit(context.Background(), client, "https://funder.example/v1/applications", `{}`)
		return f, ref, out, err
	}()
	if err != nil || out.Attempts != 3 {
		t.Fatalf("got %v after %d attempts, want success after 3", err, out.Attempts)
	}
	if f.Count(out.IdempotencyKey) != 3 || f.Processed(out.IdempotencyKey) != 2 {
		t.Errorf("Count %d, Processed %d of the call's key; want 3, 2", f.Count(out.IdempotencyKey), f.Processed(out.IdempotencyKey))
	}
}

func TestDelayEndsWithTheContextsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("the pipeline is shutting down")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(time.Minute, func() { cancel(cause) })
		f := grantretrytest.NewFunder(grantretrytest.Reply(200, "").After(time.Hour))
		start := time.Now()
		resp, err := f.RoundTrip(post(t, nil).WithContext(ctx))
		if resp != nil || !errors.Is(err, cause) {
			t.Errorf("got %v, %v; want the context's cause alone", resp, err)
		}
		if d := time.Since(start); d != time.Minute {
			t.Errorf("the delay took %v on the bubble's clock, want the minute until its context ended", d)
		}
		if r := f.Requests()[0]; !r.Processed || r.Answer != 0 {
			t.Errorf("a request cut during its delay: Processed %v, Answer %d; want true, 0: the funder had read it", r.Processed, r.Answer)
		}
	})
}

// TestRequestWhoseContextIsDoneTakesNoAnswer: a request whose context has
// ended before it reaches the funder gets the context's cause, as from
// net/http's Transport, which sends nothing; it is recorded, not
// processed, and the script's next answer is left for the next request.
func TestRequestWhoseContextIsDoneTakesNoAnswer(t *testing.T) {
	cause := errors.New("the pipeline is shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	f := grantretrytest.NewFunder(grantretrytest.Reply(201, "created"))
	body := newTrackedBody("the application")
	resp, err := f.RoundTrip(post(t, body).WithContext(ctx))
	if resp != nil || !errors.Is(err, cause) {
		t.Fatalf("got %v, %v; want the context's cause alone", resp, err)
	}
	if !body.closed {
		t.Error("the request body was not closed")
	}
	if f.Remaining() != 1 || f.Err() != nil {
		t.Errorf("Remaining %d, Err %v; want 1, nil: the request took no answer and is no script error", f.Remaining(), f.Err())
	}
	r := f.Requests()[0]
	if r.Answer != -1 || r.Processed || string(r.Body) != "the application" {
		t.Errorf("recorded Answer %d, Processed %v, Body %q; want -1, false, the body", r.Answer, r.Processed, r.Body)
	}
	if f.Count("key-1") != 1 || f.Processed("key-1") != 0 {
		t.Errorf("Count %d, Processed %d; want 1, 0", f.Count("key-1"), f.Processed("key-1"))
	}
	resp, err = f.RoundTrip(post(t, nil))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("the next request: %v, %v; want the script's 201", resp, err)
	}
	resp.Body.Close()
}

// TestRequestsAreInTheOrderTheAnswersWereTaken: concurrent requests are
// recorded in the order they took the script's answers, so Requests()[i]
// is the request that got answer i.
func TestRequestsAreInTheOrderTheAnswersWereTaken(t *testing.T) {
	const n = 64
	for round := range 100 {
		f := grantretrytest.NewFunder(slices.Repeat([]grantretrytest.Answer{grantretrytest.Reply(200, "")}, n)...)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				resp, err := f.RoundTrip(post(t, nil))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		for i, r := range f.Requests() {
			if r.Answer != i {
				t.Fatalf("round %d: Requests()[%d] got answer %d", round, i, r.Answer)
			}
		}
	}
}

// TestResponseBodyReadAfterCloseFails: as net/http's, a response body
// read after Close returns an error, whichever way it is read, so a test
// cannot pass with code that reads a body it has closed.
func TestResponseBodyReadAfterCloseFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(io.Reader) error
	}{
		{"Read", func(r io.Reader) error { _, err := r.Read(make([]byte, 4)); return err }},
		{"io.ReadAll", func(r io.Reader) error { _, err := io.ReadAll(r); return err }},
		{"io.Copy", func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := grantretrytest.NewFunder(grantretrytest.Reply(200, "the reference"))
			resp, err := f.RoundTrip(post(t, nil))
			if err != nil {
				t.Fatal(err)
			}
			head := make([]byte, 3)
			if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "the" {
				t.Fatalf("read %q, %v before Close", head, err)
			}
			resp.Body.Close()
			if err := tc.read(resp.Body); err == nil || err.Error() != "http: read on closed response body" {
				t.Errorf("read after Close: %v, want net/http's error", err)
			}
			if f.Unclosed() != 0 {
				t.Errorf("Unclosed %d after Close, want 0", f.Unclosed())
			}
		})
	}
}

func TestHeadAnswerHasNoBodyButItsLength(t *testing.T) {
	f := grantretrytest.NewFunder(grantretrytest.Reply(200, "twelve bytes"))
	req, _ := http.NewRequest(http.MethodHead, "https://funder.example/", nil)
	resp, err := f.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if len(got) != 0 || resp.ContentLength != 12 {
		t.Errorf("got %q, ContentLength %d; want no body, 12", got, resp.ContentLength)
	}
}

// TestUnclosedCountsTheBodiesNotClosed: grantretry drains and closes the
// four discarded 503s of a five-attempt call; the caller's own response is
// the one left until it closes it.
func TestUnclosedCountsTheBodiesNotClosed(t *testing.T) {
	f := grantretrytest.NewFunder(
		grantretrytest.Reply(503, "busy"), grantretrytest.Reply(503, "busy"), grantretrytest.Reply(503, "busy"),
		grantretrytest.Reply(503, "busy"), grantretrytest.Reply(201, "done"))
	client := &http.Client{Transport: grantretry.New(f, grantretry.WithClock(noWait{}))}
	req, _ := http.NewRequest(http.MethodPost, "https://funder.example/v1/applications", strings.NewReader("{}"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Unclosed(); n != 1 {
		t.Errorf("%d bodies unclosed before the caller closed its own, want 1", n)
	}
	resp.Body.Close()
	resp.Body.Close()
	if n := f.Unclosed(); n != 0 {
		t.Errorf("%d bodies unclosed after, want 0", n)
	}
}

func TestFunderIsSafeForConcurrentUse(t *testing.T) {
	const n = 64
	answers := make([]grantretrytest.Answer, n)
	for i := range answers {
		answers[i] = grantretrytest.Reply(200, "")
	}
	f := grantretrytest.NewFunder(answers...)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.RoundTrip(post(t, strings.NewReader("x")))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			_ = f.Requests()
			_ = f.Count("key-1")
		}()
	}
	wg.Wait()
	seen := make(map[int]bool)
	for _, r := range f.Requests() {
		seen[r.Answer] = true
	}
	if len(seen) != n || f.Remaining() != 0 || f.Err() != nil || f.Unclosed() != 0 {
		t.Errorf("%d distinct answers given, Remaining %d, Err %v, Unclosed %d; want %d, 0, nil, 0", len(seen), f.Remaining(), f.Err(), f.Unclosed(), n)
	}
}

func TestRequestsAreCopies(t *testing.T) {
	f := grantretrytest.NewFunder(grantretrytest.Reply(200, ""))
	resp, _ := f.RoundTrip(post(t, strings.NewReader("body")))
	resp.Body.Close()
	r := f.Requests()[0]
	r.Body[0] = 'X'
	r.Header.Set(grantretry.HeaderIdempotencyKey, "changed")
	r.URL.Path = "/changed"
	again := f.Requests()[0]
	if string(again.Body) != "body" || again.Header.Get(grantretry.HeaderIdempotencyKey) != "key-1" || again.URL.Path != "/v1/applications" {
		t.Errorf("a change to a returned Request reached the Funder's record: %+v", again)
	}
}

// TestSOAPFaultIsTheMirrorsSampleByteForByte compares SOAPFault with the
// sample of the repository's testdata, built from the Grants.gov public
// mirror's code (its .source file says how).
func TestSOAPFaultIsTheMirrorsSampleByteForByte(t *testing.T) {
	dir := filepath.Join("..", "testdata", "soapfaults")
	body, err := os.ReadFile(filepath.Join(dir, "grantsgov-mtom-not-found.body"))
	if err != nil {
		t.Fatal(err)
	}
	headers, err := os.ReadFile(filepath.Join(dir, "grantsgov-mtom-not-found.headers"))
	if err != nil {
		t.Fatal(err)
	}
	a := grantretrytest.SOAPFault("Failed to get application zip.(Grant Application not found for tracking number:GRANT12345678)")
	if a.Body != string(body) {
		t.Errorf("body:\n%q\nwant the sample's:\n%q", a.Body, body)
	}
	wantCT := strings.TrimPrefix(strings.TrimSpace(string(headers)), "Content-Type: ")
	if a.Status != 500 || a.Header.Get("Content-Type") != wantCT {
		t.Errorf("got %d %q, want 500 %q", a.Status, a.Header.Get("Content-Type"), wantCT)
	}
}

func TestSOAPFaultEscapesItsText(t *testing.T) {
	a := grantretrytest.SOAPFault(`cvc-type: "a" < b & c`)
	if !strings.Contains(a.Body, "<faultstring>cvc-type: &#34;a&#34; &lt; b &amp; c</faultstring>") {
		t.Errorf("the text is not escaped: %q", a.Body)
	}
}

// TestSOAPFaultIsReadByTheGrantsGovClassifier: the fault of an outage is
// retried and that of a refusal is not, as grantsgov.ClassifyFault reads
// the service's texts.
func TestSOAPFaultIsReadByTheGrantsGovClassifier(t *testing.T) {
	f := grantretrytest.NewFunder(
		grantretrytest.SOAPFault("Server error has occurred"),
		grantretrytest.SOAPFault("Failed to validate request. cvc-complex-type.2.4.a: Invalid content was found."),
	)
	client := &http.Client{Transport: grantretry.New(f, grantretry.WithClock(noWait{}), grantretry.WithClassifier(grantsgov.ClassifyFault))}
	req, _ := http.NewRequest(http.MethodPost, "https://ws07.grants.gov/grantsws-applicant/services/v2/ApplicantWebServicesSoapPort", bytes.NewReader([]byte("<soap:Envelope/>")))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	if out.Attempts != 2 || out.Reason != "terminal:500;grantsgov:validation" {
		t.Errorf("%d attempts, reason %q; want 2, terminal:500;grantsgov:validation", out.Attempts, out.Reason)
	}
}
