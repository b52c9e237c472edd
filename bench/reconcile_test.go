package bench

import (
	"context"
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
)

// BenchmarkReconcileSuccess is what reconciling adds to a call that succeeds
// at once, in memory: nothing for a POST with a body (the inner transport
// just gets no GetBody); for a host with a reconciler, an httptrace watch
// on each attempt (rt=grantretry-reconciler); for a keyed POST with no body,
// the resend guard (body=none).
func BenchmarkReconcileSuccess(b *testing.B) {
	never := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		body bool
		opts []grantretry.Option
	}{
		{"body=json/rt=grantretry", true, nil},
		{"body=json/rt=grantretry-reconciler", true, []grantretry.Option{grantretry.WithReconciler(never)}},
		{"body=none/rt=grantretry", false, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client := &http.Client{Transport: grantretry.New(cannedTransport{}, tc.opts...)}
			ctx := grantretry.WithSubmissionID(context.Background(), submissionID)
			send := func() {
				var req *http.Request
				if tc.body {
					r, err := newRequest(ctx, http.MethodPost, "https://funder.test/v1/applications")
					if err != nil {
						b.Fatal(err)
					}
					req = r
				} else {
					req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "https://funder.test/v1/applications/42/withdraw", nil)
				}
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%v %v", resp, err)
				}
				resp.Body.Close()
			}
			send()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				send()
			}
		})
	}
}
