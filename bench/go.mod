module github.com/grantretry/grantretry/bench

go 1.24.0

replace github.com/grantretry/grantretry => ../

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/grantretry/grantretry v0.0.0-00010101000000-000000000000
	github.com/hashicorp/go-retryablehttp v0.7.8
	go.uber.org/zap v1.28.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
