package bench

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
)

var payloadSizes = []struct {
	name string
	n    int
}{
	{"1KiB", 1 << 10},
	{"1MiB", 1 << 20},
	{"32MiB", 32 << 20},
}

// payloadOf returns n bytes that are not all alike.
func payloadOf(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

// BenchmarkIdempotencyKey compares grantretry.IdempotencyKey with plain
// SHA-256 of the same bytes: the key is SHA-256 of the submission id and
// the payload, so plain SHA-256 is its ceiling.
func BenchmarkIdempotencyKey(b *testing.B) {
	for _, sz := range payloadSizes {
		p := payloadOf(sz.n)
		b.Run("size="+sz.name+"/impl=sha256", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			stop := measureCPU(b)
			for range b.N {
				sumSink = sha256.Sum256(p)
			}
			stop()
		})
		b.Run("size="+sz.name+"/impl=grantretry", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			stop := measureCPU(b)
			for range b.N {
				stringSink = grantretry.IdempotencyKey(submissionID, p)
			}
			stop()
		})
	}
}

// BenchmarkKeyedPost sends one POST of each payload size through the
// in-memory transport, bare and through grantretry (which derives the key
// from the body through GetBody). B/op shows whether grantretry copies the
// body: a full copy would cost at least the payload's size per op.
func BenchmarkKeyedPost(b *testing.B) {
	for _, sz := range payloadSizes {
		p := payloadOf(sz.n)
		for _, v := range variants[:2] { // bare, grantretry
			b.Run("size="+sz.name+"/rt="+v.name, func(b *testing.B) {
				rt := v.wrap(cannedTransport{})
				ctx := contextFor(http.MethodPost)
				b.SetBytes(int64(len(p)))
				b.ReportAllocs()
				stop := measureCPU(b)
				for range b.N {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://funder.example"+applicationsPath, bytes.NewReader(p))
					if err != nil {
						b.Fatal(err)
					}
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				stop()
			})
		}
	}
}
