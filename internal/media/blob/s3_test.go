package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/blob/blobtest"
)

// s3Env names the S3-compatible server the S3 tests use, as
//
//	http://ACCESS_KEY:SECRET_KEY@HOST:PORT/BUCKET[?region=REGION]
//
// (path-style addressing; region defaults to us-east-1). The bucket must
// exist. .ci/s3.sh starts a local versitygw and prints the value.
const s3Env = "PARLEY_TEST_S3"

// s3TestConfig returns the config PARLEY_TEST_S3 describes, with a prefix
// of its own for this test, or skips the test when it is unset.
func s3TestConfig(t *testing.T) blob.S3Config {
	t.Helper()
	raw := os.Getenv(s3Env)
	if raw == "" {
		t.Skip(s3Env + " is unset: the S3 store's tests need an S3-compatible server, as " +
			"http://ACCESS_KEY:SECRET_KEY@127.0.0.1:PORT/BUCKET (.ci/s3.sh starts one and prints it)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", s3Env, err)
	}
	secret, _ := u.User.Password()
	bucket := strings.Trim(u.Path, "/")
	var missing []string
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		missing = append(missing, "an http:// or https:// host")
	}
	if u.User.Username() == "" || secret == "" {
		missing = append(missing, "ACCESS_KEY:SECRET_KEY@")
	}
	if bucket == "" || strings.Contains(bucket, "/") {
		missing = append(missing, "one /BUCKET path element")
	}
	if len(missing) > 0 {
		t.Fatalf("%s=%q lacks %s (want http://ACCESS_KEY:SECRET_KEY@HOST:PORT/BUCKET)", s3Env, u.Redacted(), strings.Join(missing, ", "))
	}
	return blob.S3Config{
		Endpoint:   u.Scheme + "://" + u.Host,
		Region:     u.Query().Get("region"),
		Bucket:     bucket,
		AccessKey:  u.User.Username(),
		SecretKey:  secret,
		PathStyle:  true,
		Prefix:     "test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000") + "/",
		TusTempDir: t.TempDir(),
	}
}

// rawClient is an S3 client of the test's own, to look at the bucket
// behind the store's back.
func rawClient(cfg blob.S3Config) *s3.Client {
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	return s3.New(s3.Options{
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""),
		BaseEndpoint: aws.String(cfg.Endpoint),
		UsePathStyle: true,
	})
}

// newS3 returns a store on a fresh prefix, whose objects and unfinished
// multipart uploads are removed when the test ends.
func newS3(t *testing.T) (*blob.S3, blob.S3Config) {
	t.Helper()
	cfg := s3TestConfig(t)
	s, err := blob.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emptyPrefix(t, cfg) })
	return s, cfg
}

func emptyPrefix(t *testing.T, cfg blob.S3Config) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := rawClient(cfg)
	objs := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &cfg.Bucket, Prefix: &cfg.Prefix})
	for objs.HasMorePages() {
		page, err := objs.NextPage(ctx)
		if err != nil {
			t.Errorf("cleaning up %s: %v", cfg.Prefix, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &cfg.Bucket, Key: o.Key}); err != nil {
				t.Errorf("cleaning up %s: %v", *o.Key, err)
			}
		}
	}
	for _, u := range multipartUploads(t, cfg) {
		c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &cfg.Bucket, Key: u.Key, UploadId: u.UploadId})
	}
}

func multipartUploads(t *testing.T, cfg blob.S3Config) []struct{ Key, UploadId *string } {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := rawClient(cfg).ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &cfg.Bucket, Prefix: &cfg.Prefix})
	if err != nil {
		t.Fatalf("listing multipart uploads: %v", err)
	}
	var ups []struct{ Key, UploadId *string }
	for _, u := range out.Uploads {
		ups = append(ups, struct{ Key, UploadId *string }{u.Key, u.UploadId})
	}
	return ups
}

func TestS3(t *testing.T) {
	s3TestConfig(t) // skips once, not per case, without a server
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, _ := newS3(t)
		return s
	})
}

// TestS3FailedPutLeavesNoUpload: a Put of unknown size that fails after
// its first part aborts its multipart upload, and one with a known size
// leaves no object; the bucket holds nothing under the prefix.
func TestS3FailedPutLeavesNoUpload(t *testing.T) {
	s, cfg := newS3(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16)
	failing := io.MultiReader(bytes.NewReader(big), iotestErrReader{})
	if err := s.Put(ctx, "f/failed", failing, -1, ""); err == nil {
		t.Fatal("Put from a failing reader: no error")
	}
	if err := s.Put(ctx, "f/long", bytes.NewReader(big), int64(len(big)-1), ""); !errors.Is(err, blob.ErrSizeMismatch) {
		t.Fatalf("Put of a long reader: %v, want ErrSizeMismatch", err)
	}
	if ups := multipartUploads(t, cfg); len(ups) != 0 {
		t.Errorf("%d multipart uploads left, e.g. %s", len(ups), *ups[0].Key)
	}
	out, err := rawClient(cfg).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &cfg.Bucket, Prefix: &cfg.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 0 {
		t.Errorf("%d objects left, e.g. %s", len(out.Contents), *out.Contents[0].Key)
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("source failed") }

// TestS3Prefix: objects land under Prefix, and a store on another prefix
// does not see them.
func TestS3Prefix(t *testing.T) {
	s, cfg := newS3(t)
	ctx := context.Background()
	if err := s.Put(ctx, "f/x", strings.NewReader("hi"), 2, "text/plain"); err != nil {
		t.Fatal(err)
	}
	h, err := rawClient(cfg).HeadObject(ctx, &s3.HeadObjectInput{Bucket: &cfg.Bucket, Key: aws.String(cfg.Prefix + "f/x")})
	if err != nil {
		t.Fatalf("the object is not at Prefix+key: %v", err)
	}
	if ct := aws.ToString(h.ContentType); ct != "text/plain" {
		t.Errorf("stored Content-Type %q, want text/plain", ct)
	}
	other := cfg
	other.Prefix = cfg.Prefix + "other/"
	o, err := blob.NewS3(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Stat(ctx, "f/x"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("another prefix's store sees the object: %v", err)
	}
}

// TestS3Unreachable: with nothing listening, calls fail with an error
// (not ErrNotFound), within their context.
func TestS3Unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := blob.NewS3(blob.S3Config{Endpoint: "http://" + addr, Bucket: "b", AccessKey: "a", SecretKey: "s", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Put(ctx, "f/x", strings.NewReader("hi"), 2, ""); err == nil {
		t.Error("Put: no error")
	}
	if err := s.Put(ctx, "f/y", strings.NewReader("hi"), -1, ""); err == nil {
		t.Error("Put of unknown size: no error")
	}
	if _, err := s.Stat(ctx, "f/x"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat: %v, want an error other than ErrNotFound", err)
	}
	if _, err := s.Open(ctx, "f/x"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Open: %v, want an error other than ErrNotFound", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the calls took longer than their context: %v", ctx.Err())
	}
}

func TestNewS3Config(t *testing.T) {
	ok := blob.S3Config{Bucket: "b", AccessKey: "a", SecretKey: "s"}
	for _, c := range []struct {
		name string
		edit func(*blob.S3Config)
	}{
		{"no bucket", func(c *blob.S3Config) { c.Bucket = "" }},
		{"access key alone", func(c *blob.S3Config) { c.SecretKey = "" }},
		{"secret key alone", func(c *blob.S3Config) { c.AccessKey = "" }},
		{"prefix without slash", func(c *blob.S3Config) { c.Prefix = "parley" }},
		{"prefix with ..", func(c *blob.S3Config) { c.Prefix = "../" }},
		{"prefix /", func(c *blob.S3Config) { c.Prefix = "/" }},
		{"prefix too long", func(c *blob.S3Config) { c.Prefix = strings.Repeat("p/", 257) }},
		{"endpoint without scheme", func(c *blob.S3Config) { c.Endpoint = "127.0.0.1:9000" }},
		{"endpoint ftp", func(c *blob.S3Config) { c.Endpoint = "ftp://x" }},
		{"endpoint with credentials", func(c *blob.S3Config) { c.Endpoint = "http://a:b@x" }},
		{"presign endpoint without host", func(c *blob.S3Config) { c.PresignEndpoint = "https://" }},
	} {
		cfg := ok
		c.edit(&cfg)
		if _, err := blob.NewS3(cfg); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	for _, cfg := range []blob.S3Config{
		ok,
		{Bucket: "b"}, // AWS's credential chain; no request is made yet
		{Bucket: "b", AccessKey: "a", SecretKey: "s", Endpoint: "https://s3.example.com:9000", PresignEndpoint: "https://files.example.com", Prefix: "parley/media/", PathStyle: true},
	} {
		s, err := blob.NewS3(cfg)
		if err != nil {
			t.Errorf("NewS3(%+v): %v", cfg, err)
			continue
		}
		s.Close()
	}
}
