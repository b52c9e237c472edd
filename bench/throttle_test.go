package bench

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// failEvery is the share of calls that fail in BenchmarkThrottle: one in
// failEvery gets a 503.
const failEvery = 8

// BenchmarkThrottle measures the per-host retry throttle under contention:
// calls to one host through one Transport, 2 goroutines at once on this
// 2-core machine (RunParallel at GOMAXPROCS 2), one call in failEvery
// answered 503. Every call moves the host's token bucket: a 503 takes a
// token, a 200 gives a tenth back. WithBudget(0, ...) turns retries off, so
// nothing waits, and WithoutBreaker keeps the breaker from tripping;
// throttle=off is the same Transport with WithoutRetryThrottle, so the
// difference is what the throttle costs. mode=serial is the same calls on
// one goroutine, for the uncontended cost.
//
// The Transport is called directly, not through http.Client, and the inner
// transport is in memory, so the throttle is as large a share of each call
// as it can be.
func BenchmarkThrottle(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		for _, throttle := range []string{"on", "off"} {
			b.Run("mode="+mode+"/throttle="+throttle, func(b *testing.B) {
				opts := []grantretry.Option{grantretry.WithBudget(0, time.Minute), grantretry.WithoutBreaker()}
				if throttle == "off" {
					opts = append(opts, grantretry.WithoutRetryThrottle())
				}
				t := grantretry.New(cannedTransport{}, opts...)
				b.ReportAllocs()
				stop := measureCPU(b)
				defer stop()
				if mode == "serial" {
					var n int
					for range b.N {
						n++
						if err := throttledCall(t, n); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					var n int // per goroutine: no shared counter beside the throttle
					for pb.Next() {
						n++
						if err := throttledCall(t, n); err != nil {
							b.Error(err) // not Fatal: this is not the benchmark's goroutine
							return
						}
					}
				})
			})
		}
	}
}

// throttledCall makes the n-th call of one goroutine: a 503 when n is a
// multiple of failEvery, a 200 otherwise, both from the same host.
func throttledCall(t *grantretry.Transport, n int) error {
	url := "http://funder.example" + applicationsPath
	want := http.StatusOK
	if n%failEvery == 0 {
		url, want = "http://funder.example"+failPath, http.StatusServiceUnavailable
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("status %d, want %d", resp.StatusCode, want)
	}
	return nil
}
