module github.com/grantretry/grantretry

go 1.26.8

require (
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/jarcoal/httpmock v1.4.2 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
