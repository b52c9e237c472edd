package oteltest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// script is an inner transport that answers each request with the next
// status of its list (the last one for ever after), or with a transport
// error for status 0. Its responses say HTTP/1.1, as a real transport's.
type script struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header // on every response
	n        int
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	s.mu.Lock()
	code := s.statuses[min(s.n, len(s.statuses)-1)]
	s.n++
	s.mu.Unlock()
	if code == 0 {
		return nil, io.ErrUnexpectedEOF
	}
	h := http.Header{}
	for k, v := range s.header {
		h[k] = v
	}
	return &http.Response{StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// reader is a meter provider with a manual reader, for one test.
func reader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return r, mp
}

// collect reads every metric the reader holds, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != grantretry.InstrumentationName {
			continue
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// match reports whether set has every attribute of want (key=value,
// values compared as text).
func match(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.String() != v {
			return false
		}
	}
	return true
}

// sum adds up the points of a counter or gauge whose attributes match: 0
// if the instrument has recorded nothing.
func sum(t *testing.T, ms map[string]metricdata.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0 // nothing recorded yet
	}
	total := 0.0
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				total += float64(p.Value)
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				total += float64(p.Value)
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				total += p.Value
			}
		}
	default:
		t.Fatalf("%s is a %T, not a counter or gauge", name, m.Data)
	}
	return total
}

// hist returns the count and sum of a histogram's points whose attributes
// match.
func hist(t *testing.T, ms map[string]metricdata.Metrics, name string, want map[string]string) (count uint64, total float64) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s; have %v", name, names(ms))
	}
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				count += p.Count
				total += p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes, want) {
				count += p.Count
				total += float64(p.Sum)
			}
		}
	default:
		t.Fatalf("%s is a %T, not a histogram", name, m.Data)
	}
	return count, total
}

func names(ms map[string]metricdata.Metrics) []string {
	var out []string
	for n := range ms {
		out = append(out, n)
	}
	return out
}

// post makes one keyed POST through rt and closes what it returns.
func post(t *testing.T, rt http.RoundTripper, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(grantretry.WithSubmissionID(ctx, "GRANT-2026-0042"), http.MethodPost, url, bytes.NewReader([]byte(`{"a":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

const funderURL = "https://apply.funder.test/v1/applications/GRANT-2026-0042"

// fast is a policy whose waits take no noticeable time.
var fast = grantretry.WithBackoff(time.Microsecond, time.Microsecond)
