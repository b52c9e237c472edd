package sendtrace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
)

type otherRT struct{}

func (otherRT) RoundTrip(*http.Request) (*http.Response, error) { return nil, http.ErrHandlerTimeout }

func TestNothingSentOnlyWhenTheTraceShowsNoConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	send := func(client *http.Client, url string) *Trace {
		tr := new(Trace)
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), tr.ClientTrace()), http.MethodPost, url, strings.NewReader("x"))
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		return tr
	}
	if tr := send(srv.Client(), srv.URL); tr.NothingSent(srv.Client()) {
		t.Error("a request answered by a server: NothingSent = true")
	}
	refused := httptest.NewServer(http.NotFoundHandler())
	url := refused.URL
	refused.Close()
	plain := &http.Client{}
	if tr := send(plain, url); !tr.NothingSent(plain) {
		t.Error("a refused connection: NothingSent = false")
	}
	other := &http.Client{Transport: otherRT{}}
	if tr := send(other, srv.URL); tr.NothingSent(other) {
		t.Error("a RoundTripper the trace cannot see through: NothingSent = true")
	}
	if !new(Trace).NothingSent(nil) {
		t.Error("no client: NothingSent = false")
	}
}

func TestCapErrorAndAmbiguousStatus(t *testing.T) {
	if got := CapError(strings.Repeat("e", MaxError+10)); len(got) != MaxError || !strings.HasSuffix(got, "...") {
		t.Errorf("CapError of a long text: %d bytes", len(got))
	}
	if CapError("short") != "short" {
		t.Error("CapError changed a short text")
	}
	for status, want := range map[int]bool{500: true, 502: true, 504: true, 501: false, 503: false, 429: false, 201: false} {
		if AmbiguousStatus(status) != want {
			t.Errorf("AmbiguousStatus(%d) = %v", status, !want)
		}
	}
}
