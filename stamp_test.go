package grantretry

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// stampedHeader is the header RoundTrip sends h's request with, built as
// RoundTrip builds it (see stamped).
func stampedHeader(h http.Header, corr, key string, buf []string) http.Header {
	return stamped(requestWith(h), corr, key, buf)
}

func requestWith(h http.Header) *http.Request {
	return &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: "https", Host: "funder.example"}, Header: h}
}

// stamped copies req's header in validateRequest's pass over it (buf
// backs the values when they fit) and stamps corr and key on the copy.
func stamped(req *http.Request, corr, key string, buf []string) http.Header {
	_, _, hc, err := validateRequest(req, "", false, buf)
	if err != nil {
		panic(err)
	}
	return hc.stamp(corr, key)
}

// TestStampedHeaderBuffer checks the stamped copy whether the values fit in
// the call's buffer or not: the caller's values and the stamps are all
// there, the caller's header is untouched, and appending to one value
// cannot overwrite another or the buffer's next slot.
func TestStampedHeaderBuffer(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
	}{
		{"empty", http.Header{}},
		{"fits", http.Header{"Accept": {"a"}, "X-Trace": {"t"}}},
		{"just over", http.Header{"Accept": {"a", "b"}, "X-Trace": {"t"}}},
		{"nil values", http.Header{"Accept": nil, "X-Trace": {"t"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := tt.h.Clone()
			var buf [4]string
			out := stampedHeader(tt.h, "corr", "key", buf[:])
			want := tt.h.Clone()
			want[canonCorrelationID] = []string{"corr"}
			want[canonIdempotencyKey] = []string{"key"}
			if !reflect.DeepEqual(out, want) {
				t.Fatalf("stamped %v, want %v", out, want)
			}
			for k := range out {
				out[k] = append(out[k], "appended")
			}
			if !reflect.DeepEqual(tt.h, orig) {
				t.Fatalf("the caller's header changed: %v, want %v", tt.h, orig)
			}
			for k, vs := range want {
				if got := out[k][:len(vs)]; !reflect.DeepEqual(got, vs) && vs != nil {
					t.Errorf("%s: appending to the copy left %v, want %v", k, got, vs)
				}
			}
		})
	}
}

// TestStampedHeaderBufferAllocs checks that values that fit take no
// allocation of their own: the map's two, and one more only past the buffer.
func TestStampedHeaderBufferAllocs(t *testing.T) {
	fits := requestWith(http.Header{"Accept": {"a"}, "X-Trace": {"t"}})
	over := requestWith(http.Header{"Accept": {"a", "b"}, "X-Trace": {"t"}})
	var buf [4]string
	var sink http.Header
	if n := testing.AllocsPerRun(100, func() { sink = stamped(fits, "corr", "key", buf[:]) }); n != 2 {
		t.Errorf("values that fit: %v allocations, want 2", n)
	}
	if n := testing.AllocsPerRun(100, func() { sink = stamped(over, "corr", "key", buf[:]) }); n != 3 {
		t.Errorf("values past the buffer: %v allocations, want 3", n)
	}
	_ = sink
}

// TestCorrIDs checks the Transport's correlation ids: 16 hex digits, no
// repeats within a run, and streams seeded apart (two fresh sources do not
// start alike).
func TestCorrIDs(t *testing.T) {
	var a corrIDs
	seen := map[string]bool{}
	for range 1000 {
		id := a.next()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q is not 16 lower-case hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q drawn twice", id)
		}
		seen[id] = true
	}
	var fresh1, fresh2 corrIDs
	if x, y := fresh1.next(), fresh2.next(); x == y {
		t.Fatalf("two fresh sources both began with %q: not seeded apart", x)
	}
}

// BenchmarkCorrelationID compares the two ways a correlation id is drawn:
// crypto/rand (NewCorrelationID) and a Transport's pooled ChaCha8 streams,
// on one goroutine and on all of them.
func BenchmarkCorrelationID(b *testing.B) {
	var ids corrIDs
	srcs := []struct {
		name string
		next func() string
	}{
		{"crypto-rand", NewCorrelationID},
		{"chacha8-pool", ids.next},
	}
	for _, s := range srcs {
		b.Run("src="+s.name+"/par=1", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				benchID = s.next()
			}
		})
		b.Run("src="+s.name+"/par=all", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var id string
				for pb.Next() {
					id = s.next()
				}
				_ = id
			})
		})
	}
}

var benchID string
