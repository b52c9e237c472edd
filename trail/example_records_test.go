package trail_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// Records yields the trail's records one at a time, verified, in chain
// order; an error ends the loop: here, the outcome of each call.
func ExampleRecords() {
	dir, err := os.MkdirTemp("", "trail-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "trail.jsonl")
	auditTrail, err := trail.Open(path, trail.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	status := []int{http.StatusCreated, http.StatusUnprocessableEntity}
	funder := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		code := status[0]
		status = status[1:]
		return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	})
	client := &http.Client{Transport: grantretry.New(funder, grantretry.WithAuditTrail(auditTrail))}
	for _, app := range []string{`{"amount":1}`, `{"amount":-1}`} {
		resp, err := client.Post("https://funder.example/v1/applications", "application/json", strings.NewReader(app))
		if err == nil {
			resp.Body.Close()
		}
	}
	if err := auditTrail.Close(); err != nil {
		fmt.Println(err)
		return
	}

	files, _ := filepath.Glob(path + "*")
	for r, err := range trail.Records(files...) {
		if err != nil {
			fmt.Println(err) // a broken chain: nothing after it is trusted
			break
		}
		if r.Msg == grantretry.MsgDisposition {
			fmt.Println(r.Seq, r.Fields[grantretry.FieldDisposition], r.Fields[grantretry.FieldStatus])
		}
	}
	// Output:
	// 3 succeeded 201
	// 5 failed_terminal 422
}
