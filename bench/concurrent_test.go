package bench

import (
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/grantretry/grantretry"
)

// concurrentCalls is how many calls BenchmarkConcurrent keeps in flight.
const concurrentCalls = 1000

// yieldingTransport is cannedTransport that yields the processor once
// before it answers, so that every goroutine's call is in flight while the
// others run: with concurrentCalls goroutines, about that many calls are in
// flight at once.
type yieldingTransport struct{ cannedTransport }

func (t yieldingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	runtime.Gosched()
	return t.cannedTransport.RoundTrip(r)
}

// watchingTransport is yieldingTransport that first watches the request's
// context, as net/http's Transport does: through grantretry, that makes
// the call's cancellable context and queues its budget deadline, which an
// inner transport that never watches it spares (see callContext).
type watchingTransport struct{ yieldingTransport }

func (t watchingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	default:
	}
	return t.yieldingTransport.RoundTrip(r)
}

// BenchmarkConcurrent is GETs through one Transport from concurrentCalls
// goroutines at once (RunParallel, GOMAXPROCS 2), calling RoundTrip
// directly. rt=grantretry-watched is what every call's deadline costs when
// a thousand calls hold one in the Transport's queues: its inner transport
// watches the context, as net/http's does. rt=bare is the inner transport
// alone. ns/op is the inverse of the throughput.
func BenchmarkConcurrent(b *testing.B) {
	for _, rt := range []string{"bare", "grantretry", "grantretry-watched"} {
		b.Run("calls=1000/rt="+rt, func(b *testing.B) {
			var t http.RoundTripper = yieldingTransport{}
			switch rt {
			case "grantretry":
				t = grantretry.New(t)
			case "grantretry-watched":
				t = grantretry.New(watchingTransport{})
			}
			b.ReportAllocs()
			b.SetParallelism((concurrentCalls + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			stop := measureCPU(b)
			defer stop()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, err := http.NewRequest(http.MethodGet, "http://funder.example"+applicationsPath, nil)
					if err != nil {
						b.Error(err)
						return
					}
					resp, err := t.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
