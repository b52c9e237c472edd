package grantretry

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// WithClassifier makes the Transport read the start of every response of
// status 400 or more, up to MaxClassifyPeek bytes, and let fn classify it
// before the status sets do; fn's ok false leaves the verdict to
// ClassifyLimits, which every Transport applies, and then to them.
// Nothing is read for a 1xx-3xx response; with no classifier set, only the
// body of a 403, for ClassifyLimits. The
// read is part of the attempt, so the attempt timeout and the call's
// deadline bound it; the caller still receives the whole body, byte for
// byte, when the response is returned. The breaker, the throttle, the
// audit lines and the outcome follow fn's verdict, and its reason is
// reported after the status's ("terminal:500;soap:Client").
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
// status (see peekBody); otherwise the limits see the headers alone.
func classifyResponse(fn ClassifyFunc, resp *http.Response) (Classification, bool) {
	if fn == nil && !limitsReadBody(resp.StatusCode) {
		return classifyPeek(ClassifyLimits, resp, nil)
	}
	peek := peekBody(resp)
	if fn != nil {
		if v, ok := classifyPeek(fn, resp, peek); ok {
			return v, true
		}
	}
	return classifyPeek(ClassifyLimits, resp, peek)
}

// peekBody reads the first MaxClassifyPeek bytes of resp's body and puts
// them back in front of the rest of the body. A body that fails while it
// is read gives the classifiers what arrived, and gives the caller those
// bytes and then the same error.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	peek, err := io.ReadAll(io.LimitReader(resp.Body, MaxClassifyPeek))
	var rest io.Reader = resp.Body
	if err != nil {
		rest = errorReader{err}
	}
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(peek), rest), body: resp.Body}
	return peek
}

// classifyPeek runs fn and builds the reported reason: the status's form,
// then fn's reason.
func classifyPeek(fn ClassifyFunc, resp *http.Response, peek []byte) (Classification, bool) {
	v, ok := fn(resp, peek)
	if !ok {
		return Classification{}, false
	}
	kind := "terminal:"
	switch {
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
	return v, true
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
