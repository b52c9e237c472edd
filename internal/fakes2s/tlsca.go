package fakes2s

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"
)

// certs are the keys and certificates a Funder makes at Start, in memory,
// and forgets at Close: a throwaway CA, the server's certificate for
// 127.0.0.1, and three client certificates: one the CA issued and that is
// valid (what a registered S2S client holds), one the CA issued that has
// expired, and one from another CA (a certificate the service has no
// record of).
type certs struct {
	pool    *x509.CertPool // the fake's CA, for the client's RootCAs and the server's check
	server  tls.Certificate
	client  tls.Certificate
	expired tls.Certificate
	foreign tls.Certificate
}

// newCerts makes the CA and its certificates; now dates them.
func newCerts(now time.Time) (*certs, error) {
	caKey, caCert, err := newCA("fakes2s throwaway CA", now)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	c := &certs{pool: pool}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
	}
	if c.server, err = issue(server, caCert, caKey); err != nil {
		return nil, err
	}
	if c.client, err = issue(clientTemplate("fakes2s applicant", now.Add(-time.Hour), now.Add(24*time.Hour)), caCert, caKey); err != nil {
		return nil, err
	}
	if c.expired, err = issue(clientTemplate("fakes2s expired applicant", now.Add(-48*time.Hour), now.Add(-24*time.Hour)), caCert, caKey); err != nil {
		return nil, err
	}
	otherKey, otherCert, err := newCA("another CA", now)
	if err != nil {
		return nil, err
	}
	if c.foreign, err = issue(clientTemplate("unregistered applicant", now.Add(-time.Hour), now.Add(24*time.Hour)), otherCert, otherKey); err != nil {
		return nil, err
	}
	return c, nil
}

func clientTemplate(name string, notBefore, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore:   notBefore, NotAfter: notAfter,
	}
}

func newCA(name string, now time.Time) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("fakes2s: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-72 * time.Hour),
		NotAfter:              now.Add(72 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("fakes2s: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("fakes2s: CA certificate: %w", err)
	}
	return key, cert, nil
}

// issue signs tmpl with the CA and returns it with its new key.
func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("fakes2s: key: %w", err)
	}
	tmpl.SerialNumber = serial()
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("fakes2s: certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("fakes2s: certificate for %s: %w", tmpl.Subject.CommonName, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)) // never fails
	return n
}

// serverTLS is the listener's configuration. The handshake asks for a
// client certificate and accepts a connection without one, or with one it
// cannot verify: the certificate is checked by the handler, which answers
// a SOAP fault, as the service does (see the package documentation).
// HTTP/1.1 only.
func (c *certs) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.server},
		ClientAuth:   tls.RequestClientCert,
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}
}

// clientTLS returns a configuration that trusts the fake's CA and, if
// cert is not nil, presents it.
func (c *certs) clientTLS(cert *tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// checkClient returns the fault string for the connection's client
// certificate, "" if it is one the CA issued and is valid at now.
func (c *certs) checkClient(state *tls.ConnectionState, now time.Time) string {
	if state == nil || len(state.PeerCertificates) == 0 {
		return FaultMissingCertificate
	}
	leaf := state.PeerCertificates[0]
	opts := x509.VerifyOptions{
		Roots:       c.pool,
		CurrentTime: leaf.NotBefore, // the issuer first; the dates below
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if _, err := leaf.Verify(opts); err != nil {
		return FaultUnknownCertificate
	}
	if now.After(leaf.NotAfter) {
		return FaultExpiredCertificate
	}
	return ""
}
