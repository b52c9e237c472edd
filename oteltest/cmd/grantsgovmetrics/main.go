// Command grantsgovmetrics runs the Grants.gov demo ("go run
// ./examples/grantsgov", package demo) with grantretry's metrics exported
// through the OpenTelemetry SDK's Prometheus exporter, then prints the
// Prometheus exposition of the run, or with -listen serves it on a
// loopback address until interrupted. It lives in the oteltest module
// because the core's go.mod, and so the demo's, requires no SDK or
// exporter (docs/telemetry.md):
//
//	cd oteltest && go run ./cmd/grantsgovmetrics
//	cd oteltest && go run ./cmd/grantsgovmetrics -listen 127.0.0.1:9464
//
// The demo's own output goes to standard error, the exposition to
// standard output.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/examples/grantsgov/demo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	listen := flag.String("listen", "", "serve /metrics on this loopback address instead of printing")
	flag.Parse()
	if err := run(os.Stdout, os.Stderr, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "grantsgovmetrics:", err)
		os.Exit(1)
	}
}

// run runs the demo with metrics, writing its output to demoOut, and then
// prints the exposition to out or serves it on listen.
func run(out, demoOut io.Writer, listen string) error {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())

	if err := demo.Run(demoOut, "", grantretry.WithMeterProvider(mp)); err != nil {
		return err
	}
	if listen == "" {
		return writeExposition(out, reg)
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("-listen %q: want a loopback address such as 127.0.0.1:9464", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Fprintf(demoOut, "serving http://%s/metrics until interrupted\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	return nil
}

// writeExposition writes every metric family reg holds in the Prometheus
// text format.
func writeExposition(w io.Writer, reg *prometheus.Registry) error {
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	return nil
}
