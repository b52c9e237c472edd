package grantretry

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// Errors the reference table misses: a certificate failure whose x509 cause
// is none of the three matched types, a bad host, an aborted connection.
func TestClassifyMoreErrors(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		retryable bool
		reason    string
	}{
		{"cert: unhandled critical extension", &tls.CertificateVerificationError{Err: x509.UnhandledCriticalExtension{}}, false, "transport:tls_cert"},
		{"invalid host", &url.Error{Op: "Get", URL: "u", Err: url.InvalidHostError("fun der")}, false, "transport:malformed_url"},
		{"conn aborted", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNABORTED)}, true, "transport:reset"},
	}
	for _, c := range cases {
		if got := Classify(0, c.err); got.Retryable != c.retryable || got.Reason != c.reason {
			t.Errorf("%s: Classify = %+v, want {%v %s}", c.name, got, c.retryable, c.reason)
		}
	}
}
