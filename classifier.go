package grantretry

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
)

// WithClassifier makes the Transport read the start of every response of
// status 400 or more, up to MaxClassifyPeek bytes, and let fn classify it
// before the status sets do; fn's ok false leaves the verdict to
// ClassifyLimits, which every Transport applies, and then to them.
// Nothing is read for a 1xx-3xx response; with no classifier set, only the
// body of a 403, for [ClassifyLimits]. The answer came within the attempt,
// so no timer of the call cuts it while its body is read; the read waits at
// most one second, and never past the attempt timeout ([WithAttemptTimeout])
// or the call's deadline. A body not read by then is not judged: fn is not
// asked, ClassifyLimits sees the headers alone, and the status's verdict
// stands, so a slow body never makes a refusal a retry. The caller still
// receives the whole body, byte for byte, when the response is returned.
// The breaker, the throttle, the audit lines and the outcome follow fn's
// verdict, and its reason is reported after the status's
// ("terminal:500;soap:Client").
// ClassifySOAPFault is one such function; ClassifyFirst and ClassifyRules
// put a funder's own texts in front of it. fn must not be nil.
func WithClassifier(fn ClassifyFunc) Option {
	return policyOption(func(c *config) {
		if fn == nil {
			c.invalid("WithClassifier(nil)")
			return
		}
		c.classifier = fn
	})
}

// classifyResponse gives a response of status 400 or more its verdict: fn's
// (WithClassifier), and when fn is nil or declines, ClassifyLimits'. The
// body is read only when fn is set or a limit rule reads the body of that
// status (see peekBody), and for at most wait; otherwise the limits see
// the headers alone. A body that has not arrived by then is not judged:
// fn is not asked, and the limits see the headers alone, so that a slow
// body never turns the status's verdict into a retry. received is the
// Transport's Clock when the answer arrived, which a quota's TimeSpan
// counts from. fn's reason is its own text, and may echo the request, as a
// funder's fault does: it is reported as scrub leaves it (call.scrubText).
func classifyResponse(fn ClassifyFunc, resp *http.Response, wait time.Duration, received time.Time, scrub func(string) string) (Classification, bool) {
	var peek []byte
	if fn != nil || limitsReadBody(resp.StatusCode) {
		var ok bool
		if peek, ok = peekBody(resp, wait); !ok {
			fn = nil
		}
	}
	if fn != nil {
		if v, ok := fn(resp, peek); ok {
			if v.Reason != "" {
				v.Reason = scrub(v.Reason)
			}
			return withStatus(resp, v), true
		}
	}
	v, ok := classifyLimits(resp, peek, received)
	if !ok {
		return Classification{}, false
	}
	return withStatus(resp, v), true
}

// maxPeekWait bounds the wait for the body a classifier reads: the body of
// an error answer comes with its headers, and one that stalls must not
// hold the call, nor let a timer cut the response it belongs to.
const maxPeekWait = time.Second

// peekBody reads the first MaxClassifyPeek bytes of resp's body, waiting
// at most wait for them, and puts them back in front of the rest of the
// body. A body that fails while it is read gives the classifiers what
// arrived, and gives the caller those bytes and then the same error. A
// body that is not read by then gives false, and the caller, when it
// reads, what arrives: the read goes on until the body ends, fails or is
// closed.
func peekBody(resp *http.Response, wait time.Duration) ([]byte, bool) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil, true
	}
	p := &peeking{body: resp.Body, done: make(chan struct{})}
	go p.read()
	resp.Body = p
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-p.done:
			return p.peek, true
		case <-timer.C:
		}
	}
	select {
	case <-p.done:
		return p.peek, true
	default:
		return nil, false
	}
}

// peeking is a response body whose start is being read for the
// classifier: once that read is over, it reads that start again, then the
// rest, and it closes the original. Close may be called while a Read
// waits: it closes the original body, which ends the read.
type peeking struct {
	body io.ReadCloser
	done chan struct{} // closed when peek and err are set
	peek []byte
	err  error
	rest io.Reader // set by the first Read, after done
}

func (p *peeking) read() {
	p.peek, p.err = io.ReadAll(io.LimitReader(p.body, MaxClassifyPeek))
	close(p.done)
}

func (p *peeking) Read(b []byte) (int, error) {
	if p.rest == nil {
		<-p.done
		var rest io.Reader = p.body
		if p.err != nil {
			rest = errorReader{p.err}
		}
		p.rest = io.MultiReader(bytes.NewReader(p.peek), rest)
	}
	return p.rest.Read(b)
}

func (p *peeking) Close() error { return p.body.Close() }

// withStatus builds a classifier's reported reason: the status's form,
// then the classifier's reason.
func withStatus(resp *http.Response, v Classification) Classification {
	kind := "terminal:"
	switch {
	case v.Applied:
		v.Retryable, v.Owed = false, false // the Transport never retries it
	case v.Owed:
		kind, v.Retryable = "owed:", false
	case v.Retryable:
		kind = "transient:"
	}
	reason := kind + strconv.Itoa(resp.StatusCode)
	if v.Reason != "" {
		reason += ";" + v.Reason
	}
	v.Reason = capText(reason)
	return v
}

// errorReader fails every read with err.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }
