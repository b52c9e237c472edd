package fakes2s_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

// A funder that drops nothing, two submissions under one title over
// mutual TLS, and what GetApplicationList then finds by the title: the
// funder ignores Idempotency-Key, so the second submission is a second
// application.
func Example() {
	f, err := fakes2s.Start(fakes2s.Options{DropRate: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	tr := f.NewTransport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, f.URL(), bytes.NewReader(fakes2s.SubmitEnvelope("GRANT-42", "<SF424/>")))
		req.Header.Set("Content-Type", fakes2s.ContentType)
		req.Header.Set("SOAPAction", fakes2s.Action(fakes2s.OpSubmitApplication))
		req.Header.Set("Idempotency-Key", "GRANT-42-1")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r, err := fakes2s.ParseSubmitResponse(resp.Header.Get("Content-Type"), body)
		fmt.Println(resp.StatusCode, r.TrackingNumber, err)
	}
	apps, err := fakes2s.Lookup(context.Background(), client, f.URL(), "GRANT-42")
	for _, a := range apps {
		fmt.Println(a.TrackingNumber, a.Status, a.SubmissionTitle)
	}
	fmt.Println(err, "duplicates:", f.Duplicates())
	// Output:
	// 200 GRANT10000001 <nil>
	// 200 GRANT10000002 <nil>
	// GRANT10000001 Received GRANT-42
	// GRANT10000002 Received GRANT-42
	// <nil> duplicates: 1
}
