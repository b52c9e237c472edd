package grantretry

// Regression tests for the defects a review of issues 9, 11 and 12 found,
// each a repro that failed before its fix.

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// challengeAuth is a challenge-response auth transport (Digest, NTLM): it
// sends the request, and on a 401 sends it again with credentials, on the
// same context, as such transports do.
type challengeAuth struct{ next http.RoundTripper }

func (c challengeAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Digest response=\"ok\"")
	return c.next.RoundTrip(r2)
}

// R6: the resend guard takes the auth transport's second request (a new
// request, not a resend of a written one) for net/http's resend, closes
// its connection and fails the attempt: a keyed body-less POST through a
// Digest or NTLM transport can never succeed.
func TestResendGuardLetsChallengeResponseAuthThrough(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Digest realm="funder"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	// Without grantretry: works.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/applications/42/withdraw", nil)
	resp, err := challengeAuth{base}.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain: %v %v", resp, err)
	}
	resp.Body.Close()

	tr := New(challengeAuth{base}, WithClock(newFakeClock()), WithBudget(2, 5*time.Second), WithoutBreaker())
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/applications/42/withdraw", nil)
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("through grantretry: %v (server saw %d requests)", err, served.Load())
	}
	resp.Body.Close()
}

// h2cServer speaks just enough HTTP/2 over cleartext: it holds the first
// stream open (another caller's request in flight), refuses the second with
// REFUSED_STREAM ("not processed": HTTP/2 says it is safe to resend), and
// answers every later one 200. It answers the held stream when release is
// closed.
func h2cServer(t *testing.T, ln net.Listener, sawSecond chan<- struct{}, release <-chan struct{}) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	var wmu sync.Mutex
	write := func(typ, flags byte, stream uint32, payload []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		h := make([]byte, 9)
		h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		h[3], h[4] = typ, flags
		binary.BigEndian.PutUint32(h[5:], stream)
		c.Write(append(h, payload...))
	}
	preface := make([]byte, 24)
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	write(0x4, 0, 0, nil) // SETTINGS
	headers := 0
	var held uint32
	go func() {
		<-release
		if held != 0 {
			write(0x1, 0x5, held, []byte{0x88}) // :status 200, END_HEADERS|END_STREAM
		}
	}()
	for {
		h := make([]byte, 9)
		if _, err := io.ReadFull(c, h); err != nil {
			t.Logf("server: connection ended: %v", err)
			return
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags, stream := h[3], h[4], binary.BigEndian.Uint32(h[5:])&0x7fffffff
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			return
		}
		switch {
		case typ == 0x4 && flags&1 == 0:
			write(0x4, 1, 0, nil) // SETTINGS ACK
		case typ == 0x6 && flags&1 == 0: // PING
			write(0x6, 1, 0, make([]byte, 8))
		case typ == 0x1:
			headers++
			switch headers {
			case 1:
				held = stream
			case 2:
				write(0x3, 0, stream, []byte{0, 0, 0, 7}) // RST_STREAM REFUSED_STREAM
				close(sawSecond)
			default:
				write(0x1, 0x5, stream, []byte{0x88})
			}
		}
	}
}

// R4: the resend guard closes an h2c connection, shared with another
// caller's request in flight, to stop HTTP/2's resend of a stream the
// server refused (and so did not process).
func TestResendGuardLeavesASharedH2CConnectionOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sawSecond, release := make(chan struct{}), make(chan struct{})
	srvDone := make(chan struct{})
	go func() { defer close(srvDone); h2cServer(t, ln, sawSecond, release) }()

	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	inner := &http.Transport{Protocols: &p}
	defer inner.CloseIdleConnections()
	url := "http://" + ln.Addr().String()

	// Another caller's request, on the same pooled h2c connection.
	other := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url+"/status", nil)
		resp, err := inner.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		other <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it open the connection and its stream

	tr := New(inner, WithClock(newFakeClock()), WithBudget(0, 5*time.Second))
	req, _ := http.NewRequest(http.MethodPost, url+"/withdraw", nil) // keyed, no body: guarded
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	t.Logf("guarded call: err=%v", err)
	<-sawSecond
	close(release)
	select {
	case oerr := <-other:
		if oerr != nil {
			t.Fatalf("another caller's request on the shared h2c connection failed: %v", oerr)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("other request hung")
	}
	ln.Close()
	inner.CloseIdleConnections() // the server reads until the connection ends
	select {
	case <-srvDone:
	case <-time.After(10 * time.Second):
		// Seen once in CI (2026-12-01), not reproduced: fail with what is
		// known instead of waiting out the suite's timeout.
		t.Fatal("the h2c connection was still open 10 s after CloseIdleConnections: a stream or a reservation left on it")
	}
}
