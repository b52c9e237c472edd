package bench

import (
	"context"
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkTelemetry is what the OpenTelemetry options add to a
// call that succeeds at once, in memory: nothing without a provider
// (rt=grantretry, the same as BenchmarkSuccess's row); with the SDK's
// meter provider (a manual reader, never collected: the cost of
// recording), its tracer provider (a batch span processor and a no-op
// exporter), or both. Compare the added cost with one audit line,
// BenchmarkAuditTrail/op=zap-attempt/sink=discard.
func BenchmarkTelemetry(b *testing.B) {
	for _, method := range methods {
		for _, v := range []struct {
			name           string
			metrics, trace bool
		}{
			{"grantretry", false, false},
			{"grantretry-metrics", true, false},
			{"grantretry-traces", false, true},
			{"grantretry-otel", true, true},
		} {
			b.Run("method="+method+"/rt="+v.name, func(b *testing.B) {
				var opts []grantretry.Option
				if v.metrics {
					mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
					b.Cleanup(func() { mp.Shutdown(context.Background()) })
					opts = append(opts, grantretry.WithMeterProvider(mp))
				}
				if v.trace {
					tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					b.Cleanup(func() { tp.Shutdown(context.Background()) })
					opts = append(opts, grantretry.WithTracerProvider(tp))
				}
				client := &http.Client{Transport: grantretry.New(cannedTransport{}, opts...)}
				url := "http://funder.example" + applicationsPath
				ctx := contextFor(method)
				if _, err := do(client, ctx, method, url); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					code, err := do(client, ctx, method, url)
					if err != nil || code != http.StatusOK {
						b.Fatalf("status %d, err %v", code, err)
					}
				}
			})
		}
	}
}
