package fakes2s_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/grantretry/grantretry/internal/fakes2s"
)

// A funder that drops nothing, two submissions of one id, and what
// GetApplicationList then finds: the funder ignores Idempotency-Key, so
// the second submission is a second application.
func Example() {
	f, err := fakes2s.Start(fakes2s.Options{DropRate: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, f.URL(), bytes.NewReader(fakes2s.SubmitEnvelope("GRANT-42", "<application/>")))
		req.Header.Set("Content-Type", fakes2s.ContentType)
		req.Header.Set("Idempotency-Key", "GRANT-42-1")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tracking, err := fakes2s.ParseSubmitResponse(body)
		fmt.Println(resp.StatusCode, tracking, err)
	}
	tracking, err := fakes2s.Lookup(context.Background(), client, f.URL(), "GRANT-42")
	fmt.Println(tracking, err)
	fmt.Println("duplicates:", f.Duplicates())
	// Output:
	// 200 GRANT10000001 <nil>
	// 200 GRANT10000002 <nil>
	// [GRANT10000001 GRANT10000002] <nil>
	// duplicates: 1
}
