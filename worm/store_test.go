package worm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// lockedBucketTLS is a TLS server that answers GetObjectLockConfiguration
// as S3 does for a bucket with Object Lock, under a certificate of its
// own, and the path of a CA bundle that holds that certificate.
func lockedBucketTLS(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !r.URL.Query().Has("object-lock") {
			http.Error(w, "unexpected", http.StatusNotImplemented)
			return
		}
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`)
	}))
	t.Cleanup(srv.Close)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_CA_BUNDLE", bundle)
	return srv, bundle
}

// With AWS_CA_BUNDLE set, as it is on many hosts, a StoreConfig.HTTPClient
// is used with the bundle added to its roots: its own transport settings
// (here its dialer) are kept, and the client given is not changed.
func TestHTTPClientIsUsedWithTheCABundle(t *testing.T) {
	for _, withRoots := range []bool{false, true} {
		srv, _ := lockedBucketTLS(t)
		var dials atomic.Int32
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		if withRoots {
			// roots of its own, without the server's CA
			tr.TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool()}
		}
		hc := &http.Client{Transport: tr}
		st, err := NewStore(context.Background(), StoreConfig{Endpoint: srv.URL, Bucket: "b", HTTPClient: hc})
		if err != nil {
			t.Fatalf("roots of its own %v: NewStore: %v", withRoots, err)
		}
		if _, enabled, err := st.bucketRetention(context.Background(), noRetry); err != nil || !enabled {
			t.Fatalf("roots of its own %v: a request through the client: enabled %v, %v; want the bundle's CA trusted", withRoots, enabled, err)
		}
		if dials.Load() == 0 {
			t.Errorf("roots of its own %v: the request did not go through the client's transport", withRoots)
		}
		if hc.Transport != tr || (!withRoots && tr.TLSClientConfig != nil) || (withRoots && !tr.TLSClientConfig.RootCAs.Equal(x509.NewCertPool())) {
			t.Errorf("roots of its own %v: the client given was changed", withRoots)
		}
	}
}

// A client whose transport is not an *http.Transport cannot be given the
// bundle: NewStore says so, and what to do.
func TestHTTPClientTheBundleCannotBeAddedToIsRefusedWithWhatToDo(t *testing.T) {
	srv, _ := lockedBucketTLS(t)
	hc := &http.Client{Transport: roundTripFunc(http.DefaultTransport.RoundTrip)}
	_, err := NewStore(context.Background(), StoreConfig{Endpoint: srv.URL, Bucket: "b", HTTPClient: hc})
	if err == nil || !strings.HasPrefix(err.Error(), "grantretry: worm: ") || !strings.Contains(err.Error(), "AWS_CA_BUNDLE") {
		t.Fatalf("NewStore: %v; want a grantretry: worm: error naming AWS_CA_BUNDLE and what to do", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A CA bundle that cannot be used, missing or holding no certificate, is
// refused with a grantretry: worm: error that names AWS_CA_BUNDLE and the
// file, so an operator knows which setting to fix.
func TestBadCABundleIsRefusedNamingTheFileAndTheSetting(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, bundle := range []string{notPEM, missing} {
		for _, hc := range []*http.Client{nil, {}} {
			t.Setenv("AWS_CA_BUNDLE", bundle)
			_, err := NewStore(context.Background(), StoreConfig{Bucket: "b", HTTPClient: hc})
			if err == nil || !strings.HasPrefix(err.Error(), "grantretry: worm: ") || !strings.Contains(err.Error(), "AWS_CA_BUNDLE") || !strings.Contains(err.Error(), bundle) {
				t.Errorf("AWS_CA_BUNDLE=%s, a client of its own %v: NewStore: %v; want a grantretry: worm: error naming AWS_CA_BUNDLE and the file", bundle, hc != nil, err)
			}
		}
	}
}
