package worm

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// InstrumentationName is the name of the Meter a Shipper's gauges come
// from.
const InstrumentationName = "github.com/grantretry/grantretry/worm"

// register makes the backlog observable: how many records wait for their
// anchor, and how long the oldest has.
func (s *Shipper) register(mp metric.MeterProvider) error {
	m := mp.Meter(InstrumentationName)
	records, err := m.Int64ObservableGauge("grantretry.worm.unanchored.records", metric.WithUnit("{record}"),
		metric.WithDescription("Audit records read from the trail and not anchored in the write-once store yet."))
	if err != nil {
		return err
	}
	age, err := m.Float64ObservableGauge("grantretry.worm.unanchored.age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest audit record not anchored yet has waited."))
	if err != nil {
		return err
	}
	s.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		b := s.Backlog()
		o.ObserveInt64(records, int64(b.Records))
		o.ObserveFloat64(age, b.Age.Seconds())
		return nil
	}, records, age)
	return err
}
