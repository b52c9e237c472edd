package bench

import (
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
)

// A network is where the inner transport sends: nowhere (in memory), or a
// loopback server.
type network struct {
	name  string
	setup func(tb testing.TB) (inner http.RoundTripper, url string)
}

const applicationsPath = "/v1/applications"

var networks = []network{
	{"inmem", func(testing.TB) (http.RoundTripper, string) {
		return cannedTransport{}, "http://funder.example" + applicationsPath
	}},
	{"loopback", func(tb testing.TB) (http.RoundTripper, string) {
		return newLoopbackTransport(tb), newLoopbackServer(tb).URL + applicationsPath
	}},
}

var methods = []string{http.MethodGet, http.MethodPost}

// BenchmarkSuccess is one successful call through http.Client: build the
// request, Do, read and close the response. Every variant wraps the same
// kind of inner transport, so a variant's cost minus bare's is what it adds.
// The names are key=value so benchstat can pivot them:
//
//	benchstat -col /rt bench.txt
func BenchmarkSuccess(b *testing.B) {
	for _, nw := range networks {
		for _, method := range methods {
			for _, v := range variants {
				name := "net=" + nw.name + "/method=" + method + "/rt=" + v.name
				b.Run(name, func(b *testing.B) {
					inner, url := nw.setup(b)
					client := &http.Client{Transport: v.wrap(inner)}
					ctx := contextFor(method)
					if _, err := do(client, ctx, method, url); err != nil { // warm the pool
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					stop := measureCPU(b)
					for range b.N {
						code, err := do(client, ctx, method, url)
						if err != nil || code != http.StatusOK {
							b.Fatalf("status %d, err %v", code, err)
						}
					}
					stop()
				})
			}
		}
	}
}

// BenchmarkSuccessKeyAllowance is the key's allowance for a POST: the
// time grantretry.IdempotencyKey takes on the submission id and the body
// that BenchmarkSuccess's POST sends (15 and 105 bytes: three SHA-256
// blocks). Run it in the same rounds as BenchmarkSuccess, so that the
// allowance and the costs it is added to come from the same machine state.
func BenchmarkSuccessKeyAllowance(b *testing.B) {
	b.ReportAllocs()
	stop := measureCPU(b)
	for range b.N {
		stringSink = grantretry.IdempotencyKey(submissionID, postBody)
	}
	stop()
}
