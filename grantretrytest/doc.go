// Package grantretrytest provides a fake funder for testing code that calls
// funders through grantretry, as net/http/httptest does for net/http.
//
// A [Funder] is an in-memory [http.RoundTripper] that answers each request
// with the next [Answer] of a script (a status, headers and a body; a
// connection dropped before or after the request is read; a delay; a
// Grants.gov SOAP fault) and records every request with its
// Idempotency-Key and body. Put it under grantretry as the inner
// transport, and the pipeline's own code runs against it unchanged:
//
//	f := grantretrytest.NewFunder(
//		grantretrytest.Reply(503, ""),
//		grantretrytest.DropAfterRead(),
//		grantretrytest.Reply(201, `{"reference":"FND-0001"}`),
//	)
//	client := &http.Client{Transport: grantretry.New(f)}
//
// # Zero-time tests with testing/synctest
//
// grantretry waits on time.Timer between attempts, and so does a Funder's
// delay, so a test run in a [testing/synctest] bubble passes the default
// backoff, attempt timeouts and deadlines in no wall time: the bubble's
// clock jumps whenever every goroutine in it is blocked. A call of five
// attempts under the default policy, four 503s and a 201, takes under
// 100 ms of wall time while the bubble's clock moves seconds (measured
// over 20 runs under the race detector: 0.9 s to 5.8 s on the bubble's
// clock, in 1 ms to 11 ms of wall time), without a fake
// [github.com/grantretry/grantretry.Clock] and without changing the
// policy the pipeline runs in production:
//
//	func TestSubmitRetriesThrough503s(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			f := grantretrytest.NewFunder(slices.Concat(
//				slices.Repeat([]grantretrytest.Answer{grantretrytest.Reply(503, "busy")}, 4),
//				[]grantretrytest.Answer{grantretrytest.Reply(201, `{"reference":"FND-0001"}`)})...)
//			client := &http.Client{Transport: grantretry.New(f)}
//			// ... the pipeline's own call through client ...
//			if got := len(f.Requests()); got != 5 {
//				t.Errorf("the funder got %d requests, want 5", got)
//			}
//		})
//	}
//
// Create the Funder, the grantretry Transport and the http.Client inside
// the bubble, so that their timers belong to it.
//
// [testing/synctest.Test] needs the test's *testing.T, so an Example
// function cannot run in a bubble: the package's Examples skip the waits
// with a Clock instead, and its test
// TestFiveAttemptCallInASynctestBubbleTakesNoWallTime runs the same call
// in a bubble.
//
// What works in a bubble is an inner transport that never touches the
// network: a Funder, or httpmock's MockTransport. What does not is a real
// socket, a server from [net/http/httptest] included. A goroutine reading
// a socket is not durably blocked, and while one waits the bubble's clock
// stands still: net/http keeps one reading each kept-alive connection, so
// the first backoff wait never ends and the test hangs until the test
// binary's -timeout; and with keep-alives off, an attempt timeout or a
// deadline never cuts a socket read short.
//
// docs/testing.md in the repository has the measured numbers and more
// recipes.
package grantretrytest
