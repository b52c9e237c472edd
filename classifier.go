package grantretry

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// WithClassifier makes the Transport read the start of every response of
// status 400 or more, up to MaxClassifyPeek bytes, and let fn classify it
// before the status sets do; fn's ok false leaves the verdict to them.
// Nothing is read for a 1xx-3xx response or when no classifier is set. The
// read is part of the attempt, so the attempt timeout and the call's
// deadline bound it; the caller still receives the whole body, byte for
// byte, when the response is returned. The breaker, the throttle, the
// audit lines and the outcome follow fn's verdict, and its reason is
// reported after the status's ("terminal:500;soap:Client").
// ClassifySOAPFault is one such function. fn must not be nil.
func WithClassifier(fn ClassifyFunc) Option {
	return policyOption(func(c *config) {
		if fn == nil {
			c.invalid("WithClassifier(nil)")
			return
		}
		c.classifier = fn
	})
}

// classifyBody reads the first MaxClassifyPeek bytes of resp's body, lets fn
// classify the response, and puts the bytes back in front of the rest of
// the body. A body that fails while it is read gives fn what arrived, and
// gives the caller those bytes and then the same error.
func classifyBody(fn ClassifyFunc, resp *http.Response, scrub func(string) string) (Classification, bool) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return classifyPeek(fn, resp, nil, scrub)
	}
	peek, err := io.ReadAll(io.LimitReader(resp.Body, MaxClassifyPeek))
	var rest io.Reader = resp.Body
	if err != nil {
		rest = errorReader{err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(peek), rest), body: resp.Body}
	return classifyPeek(fn, resp, peek, scrub)
}

// classifyPeek runs fn and builds the reported reason: the status's form,
// then fn's reason as scrub leaves it. fn's reason is its own text, and
// may echo the request, as a funder's fault does: it is scrubbed as error
// text is (call.scrubText).
func classifyPeek(fn ClassifyFunc, resp *http.Response, peek []byte, scrub func(string) string) (Classification, bool) {
	v, ok := fn(resp, peek)
	if !ok {
		return Classification{}, false
	}
	kind := "terminal:"
	if v.Retryable {
		kind = "transient:"
	}
	reason := kind + strconv.Itoa(resp.StatusCode)
	if v.Reason != "" {
		reason += ";" + scrub(v.Reason)
	}
	return Classification{Retryable: v.Retryable, Reason: capText(reason)}, true
}

// peekedBody is a response body whose start was read for the classifier:
// it reads that start again, then the rest, and closes the original.
type peekedBody struct {
	io.Reader
	body io.ReadCloser
}

func (b *peekedBody) Close() error { return b.body.Close() }

// errorReader fails every read with err.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }
