package worm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// StoreConfig says where the write-once tier is.
type StoreConfig struct {
	// Endpoint is the S3 endpoint's URL; empty for AWS S3. With an
	// endpoint, objects are addressed path-style (http://host/bucket/key),
	// as local S3-compatible servers want.
	Endpoint string
	// Bucket is the bucket, created with Object Lock enabled.
	Bucket string
	// Prefix is the folder of this trail's streams in the bucket; "" for
	// the bucket's top.
	Prefix string
	// Region is the bucket's region. If empty, AWS_REGION (or the shared
	// config's), else us-east-1.
	Region string
	// HTTPClient sends the requests. If nil, the SDK's. When a CA bundle
	// is configured (AWS_CA_BUNDLE, or ca_bundle in the shared config),
	// its certificates are added to the roots of a copy of the client's
	// *http.Transport, and are its only roots if it has none of its own,
	// as with the SDK's client; the client given is not changed. A client whose Transport is not an *http.Transport is
	// refused then: trust the bundle in that transport and unset
	// AWS_CA_BUNDLE for the process.
	HTTPClient *http.Client
}

// Store is an S3 bucket with Object Lock, under a prefix: where a Shipper
// anchors segments and Verify reads them. Credentials come from the
// usual AWS_* environment and shared files. A Store is safe for
// concurrent use.
type Store struct {
	c      *s3.Client
	bucket string
	prefix string
}

// NewStore returns the Store cfg describes. It sends no request.
func NewStore(ctx context.Context, cfg StoreConfig) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("grantretry: worm: no bucket")
	}
	var opts []func(*config.LoadOptions) error
	region := cfg.Region
	if region == "" && os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		region = "us-east-1"
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	var seed *awshttp.BuildableClient
	if cfg.HTTPClient != nil {
		// The SDK adds a CA bundle only to a client of its own kind: it is
		// given one with the roots of cfg's, and what it makes of them is
		// put into a copy of cfg's below.
		seed = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			if roots := transportRoots(cfg.HTTPClient); roots != nil {
				if tr.TLSClientConfig == nil {
					tr.TLSClientConfig = &tls.Config{}
				}
				tr.TLSClientConfig.RootCAs = roots.Clone()
			}
		})
		opts = append(opts, config.WithHTTPClient(seed))
	}
	// The checksum the store keeps is the SHA-256 each upload names; the
	// SDK adds none of its own.
	opts = append(opts, config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired))
	if err := checkCABundle(); err != nil {
		return nil, err
	}
	ac, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("grantretry: worm: AWS configuration: %w", err)
	}
	if cfg.HTTPClient != nil {
		if ac.HTTPClient, err = withCABundle(cfg.HTTPClient, seed, ac.HTTPClient); err != nil {
			return nil, err
		}
	}
	c := s3.NewFromConfig(ac, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
	})
	return &Store{c: c, bucket: cfg.Bucket, prefix: normPrefix(cfg.Prefix)}, nil
}

// checkCABundle refuses the CA bundle AWS_CA_BUNDLE names if the SDK
// could not use it (a file it cannot read, or one without a PEM
// certificate), with an error that names the setting and the file: the
// SDK's own names neither.
func checkCABundle() error {
	path := os.Getenv("AWS_CA_BUNDLE")
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("grantretry: worm: AWS_CA_BUNDLE names %s, which cannot be read: %w", path, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("grantretry: worm: AWS_CA_BUNDLE names %s, which holds no PEM certificate: put the store's CA certificates in it, or unset it", path)
	}
	return nil
}

// transportOf returns hc's *http.Transport, or nil if it has another
// kind of RoundTripper.
func transportOf(hc *http.Client) *http.Transport {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, _ := rt.(*http.Transport)
	return tr
}

// transportRoots returns the roots hc's transport trusts, nil for the
// system's.
func transportRoots(hc *http.Client) *x509.CertPool {
	if tr := transportOf(hc); tr != nil && tr.TLSClientConfig != nil {
		return tr.TLSClientConfig.RootCAs
	}
	return nil
}

// withCABundle returns the client to send requests with: hc itself if
// the configuration loaded holds no CA bundle (the SDK left its client
// seed as it was), else a copy of hc whose transport trusts the roots
// the SDK made of hc's and the bundle.
func withCABundle(hc *http.Client, seed *awshttp.BuildableClient, loaded aws.HTTPClient) (*http.Client, error) {
	bc, ok := loaded.(*awshttp.BuildableClient)
	if !ok || bc == seed {
		return hc, nil
	}
	tr := transportOf(hc)
	if tr == nil {
		return nil, fmt.Errorf("grantretry: worm: a CA bundle is configured (AWS_CA_BUNDLE, or ca_bundle in the shared config), and StoreConfig.HTTPClient's Transport, a %T, is not an *http.Transport that it could be added to: give a client with an *http.Transport, or trust the bundle in your transport's TLS configuration and unset AWS_CA_BUNDLE for this process", hc.Transport)
	}
	built := bc.GetTransport()
	tr = tr.Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = built.TLSClientConfig.RootCAs
	out := *hc
	out.Transport = tr
	return &out, nil
}

// Bucket returns the store's bucket.
func (s *Store) Bucket() string { return s.bucket }

// Prefix returns the store's prefix, "" or ending in "/".
func (s *Store) Prefix() string { return s.prefix }

// noRetry makes one request one attempt: the Shipper retries on its own
// clock.
func noRetry(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// errExists is a put refused because the key has an object already.
var errExists = errors.New("grantretry: worm: the object exists")

// put uploads body to key, never over an object (If-None-Match: *), with
// its SHA-256, COMPLIANCE retention until retain and the metadata meta.
func (s *Store) put(ctx context.Context, key string, body []byte, contentType string, retain time.Time, meta map[string]string) error {
	sum := sha256Sum(body)
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:                    aws.String(s.bucket),
		Key:                       aws.String(key),
		Body:                      bytes.NewReader(body),
		ContentLength:             aws.Int64(int64(len(body))),
		ContentType:               aws.String(contentType),
		ChecksumAlgorithm:         types.ChecksumAlgorithmSha256,
		ChecksumSHA256:            aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		IfNoneMatch:               aws.String("*"),
		ObjectLockMode:            types.ObjectLockModeCompliance,
		ObjectLockRetainUntilDate: aws.Time(retain),
		Metadata:                  meta,
	}, noRetry)
	if isStatus(err, http.StatusPreconditionFailed) {
		return errExists
	}
	return err
}

func isStatus(err error, code int) bool {
	var re interface{ HTTPStatusCode() int }
	return err != nil && errors.As(err, &re) && re.HTTPStatusCode() == code
}

// object is one version of an object, or a delete marker.
type object struct {
	key, version string
	modified     time.Time
	deleteMarker bool
	latest       bool
}

// versions lists every version and delete marker under the prefix, key by
// key, oldest version first.
func (s *Store) versions(ctx context.Context, within string, optFns ...func(*s3.Options)) ([]object, error) {
	var out []object
	p := s3.NewListObjectVersionsPaginator(s.c, &s3.ListObjectVersionsInput{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix + within),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, optFns...)
		if err != nil {
			return nil, err
		}
		for _, v := range page.Versions {
			out = append(out, object{key: aws.ToString(v.Key), version: aws.ToString(v.VersionId),
				modified: aws.ToTime(v.LastModified), latest: aws.ToBool(v.IsLatest)})
		}
		for _, d := range page.DeleteMarkers {
			out = append(out, object{key: aws.ToString(d.Key), version: aws.ToString(d.VersionId),
				modified: aws.ToTime(d.LastModified), deleteMarker: true, latest: aws.ToBool(d.IsLatest)})
		}
	}
	// S3 lists a key's versions newest first, and a second is the finest
	// time a listing gives: sort by key, then oldest first, ties in the
	// listing's order reversed.
	ord := make(map[string]int, len(out))
	for i, o := range out {
		ord[o.key+"\x00"+o.version] = i
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.key != b.key:
			return a.key < b.key
		case !a.modified.Equal(b.modified):
			return a.modified.Before(b.modified)
		}
		return ord[a.key+"\x00"+a.version] > ord[b.key+"\x00"+b.version]
	})
	return out, nil
}

// get reads one version of key ("" for the current one): its bytes and
// the SHA-256 checksum the store keeps for it, base64, "" if none.
func (s *Store) get(ctx context.Context, key, version string, optFns ...func(*s3.Options)) ([]byte, string, error) {
	b, sum, _, err := s.getWithMeta(ctx, key, version, optFns...)
	return b, sum, err
}

// getWithMeta is get, with the object's user metadata (its keys without
// the x-amz-meta- prefix, in lower case).
func (s *Store) getWithMeta(ctx context.Context, key, version string, optFns ...func(*s3.Options)) ([]byte, string, map[string]string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := s.c.GetObject(ctx, in, optFns...)
	if err != nil {
		return nil, "", nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, aws.ToString(out.ChecksumSHA256), out.Metadata, err
}

// retention reads a version's Object Lock retention: its mode and
// retain-until date; "" and zero if it has none.
func (s *Store) retention(ctx context.Context, key, version string) (string, time.Time, error) {
	out, err := s.c.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), VersionId: aws.String(version),
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchObjectLockConfiguration" {
			return "", time.Time{}, nil
		}
		return "", time.Time{}, err
	}
	if out.Retention == nil {
		return "", time.Time{}, nil
	}
	return string(out.Retention.Mode), aws.ToTime(out.Retention.RetainUntilDate), nil
}

// bucketRetention returns the bucket's default retention, and whether
// Object Lock is enabled on it.
func (s *Store) bucketRetention(ctx context.Context, optFns ...func(*s3.Options)) (time.Duration, bool, error) {
	out, err := s.c.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(s.bucket)}, optFns...)
	if err != nil {
		return 0, false, err
	}
	lc := out.ObjectLockConfiguration
	if lc == nil || lc.ObjectLockEnabled != types.ObjectLockEnabledEnabled {
		return 0, false, nil
	}
	if lc.Rule == nil || lc.Rule.DefaultRetention == nil {
		return 0, true, nil
	}
	d := lc.Rule.DefaultRetention
	return time.Duration(aws.ToInt32(d.Days))*24*time.Hour + time.Duration(aws.ToInt32(d.Years))*365*24*time.Hour, true, nil
}
