package stacks

// This file is the README's quick start, as it stands there
// (TestGuidesShowTheCodeTheTestsCompile compares them).

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/grantretry/grantretry"
	"go.uber.org/zap"
)

// newFunderClient returns the client for funder calls: grantretry over
// inner, the transport you send through (nil: grantretry's own pooled
// transport, not http.DefaultTransport). Build it once and share it: it
// holds the per-host breakers. A test passes an httpmock.MockTransport as
// inner, and grantretry stays in the loop.
func newFunderClient(inner http.RoundTripper, log *zap.Logger) *http.Client {
	return &http.Client{Transport: grantretry.New(inner, grantretry.WithLogger(log))}
}

func submit(ctx context.Context, client *http.Client, url, id string, pkg []byte) error {
	// The submission id names the application; with the body it fixes the
	// Idempotency-Key, so a resend next week carries the same key.
	ctx = grantretry.WithSubmissionID(ctx, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(pkg))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err // no response at all: see "Reading an outcome"
	}
	defer resp.Body.Close()
	out, _ := grantretry.OutcomeOf(resp)
	if out.Disposition != grantretry.Succeeded {
		// A 422, or the last 503 of a call out of retries: err is nil,
		// the disposition says what happened.
		return fmt.Errorf("submission %s: %s (%s) after %d attempts, status %d",
			id, out.Disposition, out.StopReason, out.Attempts, out.Status)
	}
	return nil
}
