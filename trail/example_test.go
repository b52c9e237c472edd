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

// A Transport writes every attempt and disposition to the trail and syncs
// it before RoundTrip returns; Verify checks the chain afterwards, as
// "grantretry audit verify" does.
func Example() {
	dir, err := os.MkdirTemp("", "trail-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "trail.jsonl")

	auditTrail, err := trail.Open(path, trail.Options{})
	if err != nil {
		fmt.Println(err) // damaged, or no such directory: send nothing unrecorded
		return
	}
	funder := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	})
	client := &http.Client{Transport: grantretry.New(funder, grantretry.WithAuditTrail(auditTrail))}
	resp, err := client.Post("https://funder.example/v1/applications", "application/json", strings.NewReader(`{"amount":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	if err := auditTrail.Close(); err != nil {
		fmt.Println(err)
		return
	}

	files, _ := filepath.Glob(path + "*")
	sum, err := trail.Verify(files...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sum.Records, "records; dispositions:", sum.Dispositions)
	// Output: 3 records; dispositions: map[succeeded:1]
}
