// Command stormmetrics runs the storm simulator's default scenario (a
// funder down from 30 s to 120 s of a 240 s run, 24 workers, the
// library's default policy) with grantretry's metrics exported through the
// OpenTelemetry SDK's Prometheus exporter, then prints the Prometheus
// exposition, or with -listen serves it on a loopback address until
// interrupted. It is the run docs/telemetry.md's alert rules and dashboard
// were checked against:
//
//	cd oteltest && go run ./cmd/stormmetrics
//	cd oteltest && go run ./cmd/stormmetrics -listen 127.0.0.1:9464
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/sim"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	listen := flag.String("listen", "", "serve /metrics on this loopback address instead of printing")
	flag.Parse()
	if err := run(*listen); err != nil {
		fmt.Fprintln(os.Stderr, "stormmetrics:", err)
		os.Exit(1)
	}
}

func run(listen string) error {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var srv *http.Server
	if listen != "" {
		host, _, err := net.SplitHostPort(listen)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("-listen %q: want a loopback address such as 127.0.0.1:9464", listen)
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		srv = &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(os.Stderr, "serving http://%s/metrics\n", ln.Addr())
	}

	sc := sim.Default()
	sc.Options = []grantretry.Option{grantretry.WithMeterProvider(mp)}
	ps, err := sim.Lookup([]string{"default"})
	if err != nil {
		return err
	}
	if _, err := sim.Run(ctx, sc, ps, os.Stderr); err != nil {
		return err
	}
	if srv != nil {
		fmt.Fprintln(os.Stderr, "run done; serving until interrupted")
		<-ctx.Done()
		return nil
	}
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(os.Stdout, mf); err != nil {
			return err
		}
	}
	return nil
}
