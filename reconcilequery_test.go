package grantretry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// ReconcileQuery.Request holds what its doc says: a body the Transport can
// send again is there and readable again through GetBody; a streamed one,
// sent once and spent, is not there at all (Body and GetBody nil, no
// length), rather than a nil Body beside a GetBody that fails.
func TestReconcileQueryBodyOfAStreamedRequest(t *testing.T) {
	const payload = "<Application>0123456789</Application>"
	for _, streamed := range []bool{true, false} {
		var got ReconcileQuery
		var body, again string
		var getBodyErr error
		reconciler := func(ctx context.Context, q ReconcileQuery) (*http.Response, error) {
			got = q
			if q.Request.Body != nil {
				b, _ := io.ReadAll(q.Request.Body)
				body = string(b)
			}
			if q.Request.GetBody != nil {
				rc, err := q.Request.GetBody()
				if getBodyErr = err; err == nil {
					b, _ := io.ReadAll(rc)
					rc.Close()
					again = string(b)
				}
			}
			return nil, nil // not applied
		}
		opts := []Option{WithBudget(0, time.Minute), WithReconciler(reconciler)}
		if streamed {
			opts = append(opts, WithReplayLimit(8))
		}
		h := newHarness(t, opts...)
		h.mock.RegisterResponder(http.MethodPost, funderURL, func(r *http.Request) (*http.Response, error) {
			io.Copy(io.Discard, r.Body)
			return httpmock.NewStringResponse(http.StatusBadGateway, "upstream"), nil // ambiguous
		})
		req, _ := http.NewRequest(http.MethodPost, funderURL, io.NopCloser(strings.NewReader(payload)))
		req.ContentLength = int64(len(payload))
		req.Header.Set(HeaderIdempotencyKey, "key-42")
		resp, err := h.tr.RoundTrip(req)
		if err == nil {
			readAll(t, resp)
		}
		if got.Request == nil {
			t.Fatalf("streamed %v: the reconciler was not asked (err %v)", streamed, err)
		}
		q := got.Request
		switch {
		case streamed && (q.Body != nil || q.GetBody != nil || q.ContentLength != 0):
			t.Errorf("streamed: Body %v, GetBody set %v (err %v), ContentLength %d; want none, the body being spent",
				q.Body, q.GetBody != nil, getBodyErr, q.ContentLength)
		case !streamed && (body != payload || again != payload || getBodyErr != nil):
			t.Errorf("buffered: Body %q, GetBody %q (%v); want %q twice", body, again, getBodyErr, payload)
		}
	}
}
