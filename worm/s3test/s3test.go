// Package s3test gives tests a real S3 server with Object Lock: the one
// GRANTRETRY_S3_ENDPOINT names (with GRANTRETRY_S3_BUCKET, a bucket made
// with Object Lock, and the AWS_* credentials), else a versitygw it
// starts itself if it finds the binary (GRANTRETRY_VERSITYGW, the CI
// cache ${XDG_CACHE_HOME:-$HOME/.cache}/grantretry/bin, or PATH). Without
// either, tests skip, unless CI or GRANTRETRY_S3_REQUIRED asks for them:
// then a skip is a failure.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

var gw struct {
	once     sync.Once
	cmd      *exec.Cmd
	dir      string
	endpoint string
	bucket   string
	err      error
}

// Stop stops the versitygw Endpoint started, if it did, and removes its
// data. Call it from TestMain after m.Run.
func Stop() {
	if gw.cmd != nil {
		gw.cmd.Process.Kill()
		gw.cmd.Wait()
		os.RemoveAll(gw.dir)
	}
}

// Required reports whether CI asked for the S3 tests.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("GRANTRETRY_S3_REQUIRED") != ""
}

// Endpoint returns the endpoint and bucket the tests use, starting a
// versitygw if need be; it skips or fails t if there is none.
func Endpoint(t testing.TB) (string, string) {
	t.Helper()
	if e := os.Getenv("GRANTRETRY_S3_ENDPOINT"); e != "" {
		b := os.Getenv("GRANTRETRY_S3_BUCKET")
		if b == "" {
			t.Fatal("GRANTRETRY_S3_ENDPOINT is set without GRANTRETRY_S3_BUCKET")
		}
		return e, b
	}
	gw.once.Do(start)
	if gw.err != nil {
		if Required() {
			t.Fatalf("an S3 server is required (CI or GRANTRETRY_S3_REQUIRED): %v", gw.err)
		}
		t.Skipf("no S3 server: %v (set GRANTRETRY_S3_ENDPOINT, or put versitygw on PATH)", gw.err)
	}
	return gw.endpoint, gw.bucket
}

// Gateway returns the path of the versitygw binary.
func Gateway() (string, error) {
	if p := os.Getenv("GRANTRETRY_VERSITYGW"); p != "" {
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	if p := filepath.Join(cache, "grantretry", "bin", "versitygw"); fileExists(p) {
		return p, nil
	}
	return exec.LookPath("versitygw")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// start starts versitygw on a free loopback port, with a posix backend
// and versioning (which Object Lock needs) in a temporary directory, and
// makes a bucket with Object Lock.
func start() {
	bin, err := Gateway()
	if err != nil {
		gw.err = err
		return
	}
	gw.dir, err = os.MkdirTemp("", "worm-versitygw-")
	if err != nil {
		gw.err = err
		return
	}
	data, versions := filepath.Join(gw.dir, "data"), filepath.Join(gw.dir, "versions")
	os.Mkdir(data, 0o700)
	os.Mkdir(versions, 0o700)
	addr := FreeAddr()
	os.Setenv("AWS_ACCESS_KEY_ID", "worm-test")
	os.Setenv("AWS_SECRET_ACCESS_KEY", "worm-test-secret")
	os.Setenv("AWS_REGION", "us-east-1")
	gw.cmd = exec.Command(bin, "--port", addr, "--quiet", "--access", "worm-test", "--secret", "worm-test-secret",
		"posix", "--versioning-dir", versions, data)
	if gw.err = gw.cmd.Start(); gw.err != nil {
		gw.cmd = nil
		return
	}
	gw.endpoint, gw.bucket = "http://"+addr, "worm-test"
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			gw.err = CreateLockedBucket(context.Background(), gw.endpoint, gw.bucket)
			return
		}
		time.Sleep(50 * time.Millisecond) // the server starting, not a backoff
	}
	gw.err = fmt.Errorf("versitygw did not listen on %s", addr)
}

// FreeAddr returns a loopback address with a port free a moment ago.
func FreeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// CreateLockedBucket makes bucket, with Object Lock enabled.
func CreateLockedBucket(ctx context.Context, endpoint, bucket string) error {
	ac, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		return err
	}
	c := s3.NewFromConfig(ac, func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint); o.UsePathStyle = true })
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket), ObjectLockEnabledForBucket: aws.Bool(true)})
	return err
}
