// Package oteltest holds the tests of grantretry's OpenTelemetry
// instruments and spans against the SDK's in-memory reader and span
// recorder. It is a module of its own so that the SDK, otelhttp and the
// Prometheus exporter never become requirements of the core.
package oteltest
