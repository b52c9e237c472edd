package oteltest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// stepClock is a Clock that moves on only when told to.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// pointSets are the attribute sets of every data point of m.
func pointSets(m metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}

// TestServerAddressSeriesAreBoundedOver100000Hosts is a funder that sends
// each call to a new host, read through the SDK: server.address takes at
// most MaxHostSeries values and OtherHost, every instrument's series stay
// that few, and the calls past the named hosts are all counted under
// OtherHost.
func TestServerAddressSeriesAreBoundedOver100000Hosts(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 calls")
	}
	r, mp := reader(t)
	clk := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	inner := &script{statuses: []int{http.StatusOK}}
	tr := grantretry.New(inner, grantretry.WithMeterProvider(mp), grantretry.WithClock(clk))
	const hosts = 100_000
	for i := range hosts {
		n := i + 1
		url := fmt.Sprintf("http://127.%d.%d.%d/v1/applications", n>>16&0xff, n>>8&0xff, n&0xff)
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		resp.Body.Close()
		clk.advance(time.Second)
	}
	ms := collect(t, r)
	addresses := map[string]bool{}
	for name, m := range ms {
		sets := pointSets(m)
		// Per host and per value of the instrument's own attributes: a
		// handful, never one per host.
		if len(sets) > 4*(grantretry.MaxHostSeries+1) {
			t.Errorf("%s has %d series after %d hosts", name, len(sets), hosts)
		}
		for _, s := range sets {
			if v, ok := s.Value("server.address"); ok {
				addresses[v.AsString()] = true
			}
		}
	}
	if len(addresses) > grantretry.MaxHostSeries+1 || !addresses[grantretry.OtherHost] {
		t.Errorf("server.address took %d values (%s among them: %v), want at most %d and it", len(addresses),
			grantretry.OtherHost, addresses[grantretry.OtherHost], grantretry.MaxHostSeries+1)
	}
	other := sum(t, ms, "grantretry.calls", map[string]string{"server.address": grantretry.OtherHost})
	if want := float64(hosts - grantretry.MaxHostSeries); other != want {
		t.Errorf("grantretry.calls under %s: %v, want %v", grantretry.OtherHost, other, want)
	}
}
