package grantretry

import (
	"errors"
	"net/http"
	"testing"
)

// An empty Method means GET (net/http) and is retried like one.
func TestEmptyMethodIsRetriedLikeGet(t *testing.T) {
	h := newHarness(t)
	h.mock.RegisterResponder(http.MethodGet, funderURL, seq(503, 204))
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	req.Method = ""
	resp, err := h.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if o := mustOutcome(t, resp); o.Attempts != 2 || o.Disposition != Succeeded {
		t.Errorf("outcome %+v, want succeeded after 2 attempts", o)
	}
}

func TestInvalidMethodsAreRefused(t *testing.T) {
	for _, m := range []string{"GET /admin", "PO\nST", "BAD(METHOD)"} {
		h := newHarness(t)
		h.mock.RegisterNoResponder(seq(200))
		req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
		req.Method = m
		resp, err := h.tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, ErrInvalidRequest) || h.mock.GetTotalCallCount() != 0 {
			t.Errorf("method %q: resp %v err %v sent %d, want ErrInvalidRequest and nothing sent",
				m, resp, err, h.mock.GetTotalCallCount())
		}
	}
}
