package grantretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestClassifyStatus(t *testing.T) {
	cases := []struct {
		status    int
		retryable bool
		reason    string
	}{
		{100, false, "ok:100"},
		{200, false, "ok:200"},
		{201, false, "ok:201"},
		{302, false, "ok:302"},
		{304, false, "ok:304"},
		{400, false, "terminal:400"},
		{401, false, "terminal:401"},
		{403, false, "terminal:403"},
		{404, false, "terminal:404"},
		{422, false, "terminal:422"},
		{429, true, "transient:429"},
		{500, true, "transient:500"},
		{502, true, "transient:502"},
		{503, true, "transient:503"},
		{504, true, "transient:504"},
		{408, false, "unclassified:408"},
		{409, false, "unclassified:409"},
		{418, false, "unclassified:418"},
		{501, false, "unclassified:501"},
		{599, false, "unclassified:599"},
		{999, false, "unclassified:999"},
		{0, false, "unclassified:0"},
		{-1, false, "unclassified:-1"},
		{1000, false, "unclassified:1000"},
	}
	for _, c := range cases {
		got := Classify(c.status, nil)
		if got.Retryable != c.retryable || got.Reason != c.reason {
			t.Errorf("Classify(%d) = %+v, want {%v %s}", c.status, got, c.retryable, c.reason)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyErrors(t *testing.T) {
	opErr := func(err error) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", err)}
	}
	cases := []struct {
		name      string
		err       error
		retryable bool
		reason    string
	}{
		{"reset", opErr(syscall.ECONNRESET), true, "transport:reset"},
		{"broken pipe", opErr(syscall.EPIPE), true, "transport:reset"},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true, "transport:refused"},
		{"EOF", io.EOF, true, "transport:eof"},
		{"unexpected EOF", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), true, "transport:eof"},
		{"net timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, true, "transport:timeout"},
		{"attempt timeout", &attemptTimeoutError{d: time.Second, err: context.Canceled}, true, "transport:timeout"},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", Name: "funder.test", IsTemporary: true}, true, "transport:dns"},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "funder.test", IsNotFound: true}, false, "transport:dns_not_found"},
		{"unknown", errors.New("http2: server sent GOAWAY and closed the connection"), true, "transport:network"},
		{"caller cancel", fmt.Errorf("wrapped: %w", context.Canceled), false, "transport:canceled"},
		{"caller deadline", &url.Error{Op: "Post", URL: "u", Err: context.DeadlineExceeded}, false, "transport:deadline"},
		{"cert verification", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false, "transport:tls_cert"},
		{"bare x509 hostname", x509.HostnameError{Host: "funder.test", Certificate: &x509.Certificate{}}, false, "transport:tls_cert"},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired, Cert: &x509.Certificate{}}, false, "transport:tls_cert"},
		{"tls to plain http", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false, "transport:tls"},
		{"malformed url", &url.Error{Op: "parse", URL: "::", Err: errors.New("missing protocol scheme")}, false, "transport:malformed_url"},
		{"bad escape", url.EscapeError("%zz"), false, "transport:malformed_url"},
		{"invalid request", fmt.Errorf("%w: nil URL", ErrInvalidRequest), false, "transport:invalid_request"},
	}
	for _, c := range cases {
		got := Classify(503, c.err) // status is ignored when err is set
		if got.Retryable != c.retryable || got.Reason != c.reason {
			t.Errorf("%s: Classify = %+v, want {%v %s}", c.name, got, c.retryable, c.reason)
		}
	}
}

// Real errors from net/http on loopback sockets, as they arrive on this Go.
func TestClassifyRealTransportErrors(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is the point
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plainSrv.Close()

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + closed.Addr().String()
	closed.Close()

	hangUp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp.Close()
	go func() {
		for {
			c, err := hangUp.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			c.Read(buf)                   // read the request, then
			c.(*net.TCPConn).SetLinger(0) // reset instead of a clean close
			c.Close()
		}
	}()

	cases := []struct {
		name      string
		url       string
		retryable bool
		reason    string
	}{
		{"untrusted certificate", tlsSrv.URL, false, "transport:tls_cert"},
		{"https to a plain server", "https" + plainSrv.URL[len("http"):], false, "transport:tls"},
		{"connection refused", refusedURL, true, "transport:refused"},
		{"reset after the request", "http://" + hangUp.Addr().String(), true, ""},
	}
	for _, c := range cases {
		tr := &http.Transport{}
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		_, err := tr.RoundTrip(req)
		tr.CloseIdleConnections()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		got := Classify(0, err)
		if got.Retryable != c.retryable || (c.reason != "" && got.Reason != c.reason) {
			t.Errorf("%s: Classify(%v) = %+v, want retryable %v %s", c.name, err, got, c.retryable, c.reason)
		}
	}
}
