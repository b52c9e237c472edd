// Package bench holds grantretry's benchmarks against the libraries its
// users would pick instead: go-retryablehttp and failsafe-go. It is a module
// of its own, so that those libraries never become dependencies of
// grantretry; its go.mod replaces grantretry with the working tree (../), so
// the benchmarks always measure the code beside them.
//
// Run them, and read the results, as docs/performance.md says:
//
//	cd bench
//	go test -run '^$' -bench . -benchmem
//
// The package has no API: everything is in its _test.go files.
package bench
