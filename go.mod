module github.com/grantretry/grantretry

go 1.24.0

require (
	github.com/hashicorp/go-cleanhttp v0.5.2
	github.com/jarcoal/httpmock v1.4.2
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require go.uber.org/multierr v1.10.0 // indirect
