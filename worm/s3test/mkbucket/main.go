// Command mkbucket makes the bucket GRANTRETRY_S3_BUCKET, with Object
// Lock enabled, on the server GRANTRETRY_S3_ENDPOINT names, with the
// AWS_* credentials: what CI runs once its S3 server is up.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/grantretry/grantretry/worm/s3test"
)

func main() {
	endpoint, bucket := os.Getenv("GRANTRETRY_S3_ENDPOINT"), os.Getenv("GRANTRETRY_S3_BUCKET")
	if endpoint == "" || bucket == "" {
		fmt.Fprintln(os.Stderr, "grantretry: mkbucket: set GRANTRETRY_S3_ENDPOINT and GRANTRETRY_S3_BUCKET")
		os.Exit(2)
	}
	if err := s3test.CreateLockedBucket(context.Background(), endpoint, bucket); err != nil {
		fmt.Fprintln(os.Stderr, "grantretry: mkbucket:", err)
		os.Exit(1)
	}
}
