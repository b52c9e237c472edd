package grantretry

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"sync"
)

// Header names the Transport stamps on every attempt.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderCorrelationID  = "X-Correlation-ID"
)

// IdempotencyKey returns the stable key of one submission: "grant-" followed
// by the first 32 hex digits of SHA-256(submissionID bytes, then payload
// bytes). The same submission and payload give the same key in any process,
// so a retry from another worker, or a redelivery next week, is recognised by
// the funder as the same request.
func IdempotencyKey(submissionID string, payload []byte) string {
	h := sha256.New()
	io.WriteString(h, submissionID)
	h.Write(payload)
	return keyFromSum(h)
}

func keyFromSum(h hash.Hash) string {
	var sum [sha256.Size]byte
	return keyFromSumInto(h, sum[:0])
}

// keyFromSumInto is keyFromSum with the sum appended to buf (of capacity
// sha256.Size at least), so that a caller with a buffer of its own on the
// heap allocates only the key.
func keyFromSumInto(h hash.Hash, buf []byte) string {
	var out [6 + 32]byte
	copy(out[:], "grant-")
	hex.Encode(out[6:], h.Sum(buf)[:16])
	return string(out[:])
}

// implicitKeyPrefix is what stands in for the submission id when a POST or
// PATCH has none: the key is IdempotencyKey(method+" "+url+"\n", payload), so
// the same request to the same URL with the same bytes gets the same key.
// The URL is taken without its user info, fragment and secret query
// parameters (rd): a rotated credential must not turn a resend into a new
// submission, and a key that is logged must not hash a short secret.
func implicitKeyPrefix(r *http.Request, rd redactor) string {
	u, _ := rd.url(r.URL)
	return r.Method + " " + u + "\n"
}

type submissionIDKey struct{}

// WithSubmissionID returns a copy of ctx that names the submission of the
// call made with it. The Transport derives the call's Idempotency-Key from
// the id and the request body, and writes the id into every audit line. The
// id must be 1 to MaxSubmissionIDLen bytes with no control characters;
// RoundTrip refuses a request whose id is not, before sending anything.
func WithSubmissionID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, submissionIDKey{}, id)
}

// submissionID returns the id set by WithSubmissionID, if any.
func submissionID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(submissionIDKey{}).(string)
	return id, ok
}

func validateSubmissionID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty submission id", ErrInvalidRequest)
	case len(id) > MaxSubmissionIDLen:
		return fmt.Errorf("%w: submission id is %d bytes, more than %d", ErrInvalidRequest, len(id), MaxSubmissionIDLen)
	case hasControl(id):
		return fmt.Errorf("%w: submission id has a control character", ErrInvalidRequest)
	}
	return nil
}

// NewCorrelationID returns 16 hex digits from crypto/rand: an unguessable id
// that ties every attempt of one logical call to one audit thread.
func NewCorrelationID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b[:])
}

// corrIDs draws a Transport's correlation ids, as unguessable as
// NewCorrelationID's and about half the cost: 8 bytes from a ChaCha8
// stream (math/rand/v2's, a cryptographically strong generator) seeded
// with 32 bytes from crypto/rand. The streams sit in a sync.Pool, so that
// concurrent calls share no lock and each P mostly reuses its own; a
// stream the pool drops at a GC is simply replaced by a freshly seeded one.
// See docs/performance.md ("the correlation id") for why this is safe.
//
// A corrIDs is safe for concurrent use; its zero value is ready.
type corrIDs struct{ pool sync.Pool }

// next returns a new correlation id: 16 hex digits.
func (g *corrIDs) next() string {
	s, _ := g.pool.Get().(*mrand.ChaCha8)
	if s == nil {
		var seed [32]byte
		rand.Read(seed[:]) // never fails: crypto/rand crashes the program instead
		s = mrand.NewChaCha8(seed)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.Uint64())
	g.pool.Put(s)
	return hex.EncodeToString(b[:])
}

// keyedMethod reports whether the Transport derives an Idempotency-Key for
// the method: the two methods whose repetition can create a second record.
func keyedMethod(m string) bool { return m == http.MethodPost || m == http.MethodPatch }

// idempotentMethod reports whether RFC 9110 section 9.2.2 makes the method
// safe to repeat without a key.
func idempotentMethod(m string) bool {
	switch m {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// emptySHA256 is the hex SHA-256 of no bytes.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// payload is the request body of one logical call, made replayable if it can
// be. It belongs to one RoundTrip and is never shared.
type payload struct {
	orig     io.ReadCloser                 // the caller's body, nil or http.NoBody when empty
	first    io.ReadCloser                 // a body too large to buffer, sent once
	buf      []byte                        // a buffered body, replayed from memory
	getBody  func() (io.ReadCloser, error) // the caller's GetBody
	size     int64                         // bytes, or -1 when not read
	sum      string                        // hex SHA-256 of the bytes, when computed
	key      string                        // derived Idempotency-Key, if any
	whyNotRe string                        // why the body is not replayable, "" if it is
	// scratch takes the key's prefix on its way into the hash, and the
	// hash's sum on its way out: a hash.Hash keeps whatever it is given
	// from the stack, so a buffer of the call's costs no allocation.
	scratch [sha256.Size]byte
}

// replayable reports whether the body can be sent again byte for byte.
func (p *payload) replayable() bool { return p.whyNotRe == "" }

// empty reports whether the request has no body at all.
func (p *payload) empty() bool {
	return p.orig == nil || p.orig == http.NoBody
}

// read takes ownership of r.Body: from here on the Transport closes it. It
// makes the body replayable (GetBody, or a buffer up to limit), and in the
// same pass computes what the call needs: the derived key when keyPrefix is
// not empty, and the payload's SHA-256 when wantSum is set.
func (p *payload) read(r *http.Request, limit int64, keyPrefix string, wantSum bool) error {
	p.orig, p.size = r.Body, -1
	var keyH, sumH hash.Hash
	if keyPrefix != "" {
		keyH = sha256.New()
		if len(keyPrefix) <= len(p.scratch) {
			keyH.Write(p.scratch[:copy(p.scratch[:], keyPrefix)])
		} else {
			io.WriteString(keyH, keyPrefix)
		}
	}
	if wantSum && !p.empty() {
		sumH = sha256.New()
	} else if wantSum {
		p.sum = emptySHA256 // nothing to hash
	}
	finish := func() {
		if keyH != nil {
			p.key = keyFromSumInto(keyH, p.scratch[:0])
		}
		if sumH != nil {
			var b [sha256.Size]byte
			p.sum = hex.EncodeToString(sumH.Sum(b[:0]))
		}
	}

	switch {
	case p.empty():
		p.size = 0
		finish()
		return nil
	case r.GetBody != nil:
		// Every attempt, and the hashes, read fresh copies from GetBody,
		// so the caller's body is closed now: an inner transport that
		// forgets to close what it is sent cannot leak it.
		p.getBody = r.GetBody
		r.Body.Close()
		if keyH == nil && sumH == nil {
			return nil
		}
		n, err := hashBody(r.GetBody, keyH, sumH)
		if err != nil {
			return err
		}
		p.size = n
		finish()
		return nil
	}

	// No GetBody: buffer up to limit, and one byte more to learn whether
	// the body fits.
	var b bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= limit {
		b.Grow(int(r.ContentLength))
	}
	n, err := b.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		r.Body.Close()
		return fmt.Errorf("grantretry: reading request body: %w", err)
	}
	if n > limit {
		p.first = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b.Bytes()), r.Body), r.Body}
		p.whyNotRe = fmt.Sprintf("body over the %d-byte replay limit and no GetBody", limit)
		return nil
	}
	r.Body.Close()
	p.buf = b.Bytes()
	if p.buf == nil {
		p.buf = []byte{} // a body that was present but empty is still replayed
	}
	p.size = n
	if keyH != nil {
		keyH.Write(p.buf)
	}
	if sumH != nil {
		sumH.Write(p.buf)
	}
	finish()
	return nil
}

// hashBody reads one copy of the body from getBody into the hashes that are
// not nil.
func hashBody(getBody func() (io.ReadCloser, error), a, b hash.Hash) (int64, error) {
	rc, err := getBody()
	if err != nil {
		return 0, fmt.Errorf("grantretry: GetBody: %w", err)
	}
	defer rc.Close()
	var w io.Writer
	switch {
	case a != nil && b != nil:
		w = io.MultiWriter(a, b)
	case a != nil:
		w = a
	default:
		w = b
	}
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, fmt.Errorf("grantretry: reading request body from GetBody: %w", err)
	}
	return n, nil
}

// errBodySpent is returned if a body that is not replayable is asked for a
// second time; the retry loop never does that.
var errBodySpent = errors.New("grantretry: request body is not replayable and was already sent")

// body returns a fresh copy of the body for one attempt.
func (p *payload) body() (io.ReadCloser, error) {
	if rc := p.first; rc != nil {
		p.first = nil
		return rc, nil
	}
	switch {
	case p.empty():
		return p.orig, nil
	case p.buf != nil:
		return p.replay()
	case p.getBody != nil:
		rc, err := p.getBody()
		if err != nil {
			return nil, fmt.Errorf("grantretry: GetBody failed: %w", err)
		}
		return rc, nil
	}
	return nil, errBodySpent
}

// replay returns the buffered body; it is the GetBody of a buffered request.
func (p *payload) replay() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(p.buf)), nil
}

// close releases the caller's body if no attempt took it.
func (p *payload) close() {
	if p.first != nil {
		p.first.Close()
		p.first = nil
	}
}

// hasControl reports whether s holds an ASCII control character other than
// horizontal tab: CR and LF among them, which would split a header.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}
