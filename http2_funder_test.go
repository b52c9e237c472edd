package grantretry

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// What an h2Funder does with a request stream.
type h2Step int

const (
	// h2Answer reads the whole request, records it as processed, and
	// answers with the step's status.
	h2Answer h2Step = iota
	// h2Refuse resets the stream with REFUSED_STREAM as its headers
	// arrive: RFC 9113 section 8.7 says the request was not processed.
	h2Refuse
	// h2GoawayBefore sends GOAWAY, NO_ERROR, with a last stream id below
	// the stream's as its headers arrive, and closes the connection: RFC
	// 9113 section 6.8 says the streams above it were not processed.
	h2GoawayBefore
	// h2GoawayAfter reads the whole request and records it as processed,
	// then sends GOAWAY naming the stream as the last one it may have
	// processed, and closes the connection without answering.
	h2GoawayAfter
	// h2ProtocolError resets the stream with PROTOCOL_ERROR after reading
	// and processing the whole request: the code says nothing of whether
	// it was processed.
	h2ProtocolError
)

// h2Reply is a step, and the status an h2Answer answers with.
type h2Reply struct {
	step   h2Step
	status int
}

// h2Funder is a loopback HTTP/2 server that speaks the frames by hand, so
// that it can refuse a stream or send GOAWAY at a chosen point, which
// net/http's server does not let a handler do. It serves cleartext HTTP/2
// with prior knowledge, or HTTP/2 over TLS (ALPN h2) when built with a TLS
// config. The n-th request stream it sees, over all its connections, gets
// script[n-1]; the last entry repeats.
//
// It counts the request streams it received and those it processed: read
// whole and acted on, whether or not its answer reached the client.
type h2Funder struct {
	ln     net.Listener
	script []h2Reply
	wg     sync.WaitGroup

	mu        sync.Mutex
	streams   int // request streams received (HEADERS frames)
	processed int // requests read whole and acted on
	conns     int
	open      map[net.Conn]bool
}

// newH2CFunder starts a cleartext HTTP/2 funder.
func newH2CFunder(t *testing.T, script ...h2Reply) *h2Funder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startH2Funder(t, ln, script)
}

// newH2TLSFunder starts an HTTP/2 funder over TLS, with the certificate
// of an httptest TLS server; the pool trusts it.
func newH2TLSFunder(t *testing.T, script ...h2Reply) (*h2Funder, *tls.Config) {
	t.Helper()
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS()
	certs := cert.TLS.Certificates
	pool := cert.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	cert.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = tls.NewListener(ln, &tls.Config{Certificates: certs, NextProtos: []string{"h2"}})
	return startH2Funder(t, ln, script), &tls.Config{RootCAs: pool}
}

func startH2Funder(t *testing.T, ln net.Listener, script []h2Reply) *h2Funder {
	f := &h2Funder{ln: ln, script: script, open: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for c := range f.open {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

func (f *h2Funder) url(scheme string) string {
	return scheme + "://" + f.ln.Addr().String() + "/v1/applications"
}

// counts returns the request streams received, the requests processed and
// the connections accepted.
func (f *h2Funder) counts() (streams, processed, conns int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams, f.processed, f.conns
}

func (f *h2Funder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns++
		f.open[c] = true
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() {
				c.Close()
				f.mu.Lock()
				delete(f.open, c)
				f.mu.Unlock()
			}()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			f.handle(c)
		}()
	}
}

// next records a new request stream and returns its step.
func (f *h2Funder) next() h2Reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams++
	return f.script[min(f.streams, len(f.script))-1]
}

func (f *h2Funder) markProcessed() {
	f.mu.Lock()
	f.processed++
	f.mu.Unlock()
}

// HTTP/2 frame types, flags and error codes (RFC 9113 sections 6 and 7).
const (
	h2FrameData         = 0x0
	h2FrameHeaders      = 0x1
	h2FrameRSTStream    = 0x3
	h2FrameSettings     = 0x4
	h2FramePing         = 0x6
	h2FrameGoaway       = 0x7
	h2FlagEndStream     = 0x1
	h2FlagAck           = 0x1
	h2FlagEndHeaders    = 0x4
	h2CodeNo            = 0x0
	h2CodeProtocol      = 0x1
	h2CodeRefusedStream = 0x7
)

// handle speaks one connection until the client ends it or a step closes
// it. It reads every frame and acts on a stream when its headers arrive
// (a refusal) or when its request has been read whole.
func (f *h2Funder) handle(c net.Conn) {
	write := func(typ, flags byte, stream uint32, payload []byte) {
		h := make([]byte, 9, 9+len(payload))
		h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		h[3], h[4] = typ, flags
		binary.BigEndian.PutUint32(h[5:], stream)
		c.Write(append(h, payload...))
	}
	code := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	preface := make([]byte, 24)
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	write(h2FrameSettings, 0, 0, nil)
	pending := map[uint32]h2Reply{} // streams whose request is still being read
	var last uint32                 // the highest stream acted on
	for {
		h := make([]byte, 9)
		if _, err := io.ReadFull(c, h); err != nil {
			return
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags, stream := h[3], h[4], binary.BigEndian.Uint32(h[5:])&0x7fffffff
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			return
		}
		switch typ {
		case h2FrameSettings:
			if flags&h2FlagAck == 0 {
				write(h2FrameSettings, h2FlagAck, 0, nil)
			}
			continue
		case h2FramePing:
			if flags&h2FlagAck == 0 {
				write(h2FramePing, h2FlagAck, 0, make([]byte, 8))
			}
			continue
		case h2FrameHeaders:
			r := f.next()
			switch r.step {
			case h2Refuse:
				write(h2FrameRSTStream, 0, stream, code(h2CodeRefusedStream))
				continue
			case h2GoawayBefore:
				write(h2FrameGoaway, 0, 0, append(code(last), code(h2CodeNo)...))
				return
			}
			pending[stream] = r
		case h2FrameData:
		default:
			continue
		}
		r, ok := pending[stream]
		if !ok || flags&h2FlagEndStream == 0 {
			continue
		}
		delete(pending, stream)
		f.markProcessed()
		last = stream
		switch r.step {
		case h2Answer:
			// :status as a literal without indexing, name from the
			// static table (index 8), and an empty body.
			s := strconv.Itoa(r.status)
			write(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, append([]byte{0x08, byte(len(s))}, s...))
		case h2GoawayAfter:
			write(h2FrameGoaway, 0, 0, append(code(stream), code(h2CodeNo)...))
			return
		case h2ProtocolError:
			write(h2FrameRSTStream, 0, stream, code(h2CodeProtocol))
		}
	}
}
