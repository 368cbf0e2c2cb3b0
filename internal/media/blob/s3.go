package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/semaphore"
)

// S3Config says where an S3 store keeps its objects.
type S3Config struct {
	// Endpoint is the S3 API's base URL, e.g. "http://127.0.0.1:7070" or
	// "https://minio.example.com". Empty: AWS S3 itself, for Region.
	Endpoint string
	// PresignEndpoint is the base URL put in presigned URLs, for when
	// clients reach the store under another name than the server does.
	// Empty: Endpoint (or AWS).
	PresignEndpoint string
	// Region is the bucket's region. Empty: "us-east-1".
	Region string
	// Bucket holds the objects. Required.
	Bucket string
	// AccessKey and SecretKey are static credentials. Both empty: AWS's
	// default credential chain (environment, shared config files, the
	// EC2/ECS/EKS role). One without the other is an error.
	AccessKey string
	SecretKey string
	// PathStyle addresses the bucket in the URL's path (host/bucket/key),
	// as most self-hosted S3 servers need. False: virtual-hosted style
	// (bucket.host/key), as AWS prefers.
	PathStyle bool
	// Prefix is prepended to every key, so several deployments can share a
	// bucket; empty or a valid key ending in "/", e.g. "parley/", of at
	// most 512 bytes. Empty: keys are used as they are.
	Prefix string
	// TusTempDir is where tusd's s3store keeps each part of a resumable
	// upload on local disk until it is sent (up to s3TusParts parts of
	// s3TusPartSize bytes per upload in flight). Empty: os.TempDir().
	TusTempDir string
	// PutBufferBytes is how many bytes all Puts together may hold in memory
	// while they buffer parts (Puts of unknown size or under 256 KiB, and
	// every Put to a plain-http Endpoint); a Put waits for room. At least
	// 8 MiB (one part). 0: 128 MiB.
	PutBufferBytes int64
}

const (
	// s3MaxPut is the largest object one PutObject may create.
	s3MaxPut = 5 << 30
	// s3PartSize is the part of a buffered Put: the most memory one Put
	// holds (S3's minimum part is 5 MiB).
	s3PartSize = 8 << 20
	// s3MaxParts is S3's limit, so Put takes up to 10000*s3PartSize bytes.
	s3MaxParts = 10000
	// s3MaxPresign is the longest a SigV4 presigned URL may live.
	s3MaxPresign = 7 * 24 * time.Hour
	// s3AbortTimeout bounds the clean-up of a failed multipart Put, which
	// runs even when the Put's context is done.
	s3AbortTimeout = 30 * time.Second
	// s3DefaultPutBuffer is PutBufferBytes' default.
	s3DefaultPutBuffer = 128 << 20
	// s3StreamMin is the smallest Put streamed over https; smaller ones are
	// buffered, which costs little and lets the SDK retry them.
	s3StreamMin = 256 << 10
)

// S3 is a Store in an S3 bucket: the object under key is the S3 object
// Prefix+key.
type S3 struct {
	cfg       S3Config
	client    *s3.Client
	presign   *s3.PresignClient
	transport *http.Transport // the client's, to close idle connections
	// stream: Put sends a body of known size as it reads it. Only over
	// https, where the SDK frames it (aws-chunked) with a trailing CRC32,
	// so a server that gets it cut short sees an incomplete body. Over
	// plain http the SDK can neither hash a stream ahead nor add a trailer,
	// and a server may store a cut-short unsigned body as the object
	// (versitygw does): there every Put is buffered, hashed and signed.
	stream bool
	// buffers bounds the bytes Puts hold in memory (PutBufferBytes).
	buffers *semaphore.Weighted
}

var _ Store = (*S3)(nil)

// NewS3 checks cfg and returns an S3 store. It makes no request.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("blob: s3: Bucket is required")
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("blob: s3: AccessKey and SecretKey go together")
	}
	if cfg.Prefix != "" {
		// S3 keys take 1024 bytes: MaxKeyLen for the key, the rest for this.
		if !strings.HasSuffix(cfg.Prefix, "/") || len(cfg.Prefix) > 1024-MaxKeyLen || CheckKey(strings.TrimSuffix(cfg.Prefix, "/")) != nil {
			return nil, fmt.Errorf("blob: s3: Prefix %q is not a key ending in /", cfg.Prefix)
		}
	}
	plainHTTP := false
	for i, e := range []string{cfg.Endpoint, cfg.PresignEndpoint} {
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return nil, fmt.Errorf("blob: s3: endpoint %q is not an http(s)://host[:port] URL", e)
		}
		if i == 0 {
			plainHTTP = u.Scheme == "http"
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.PutBufferBytes == 0 {
		cfg.PutBufferBytes = s3DefaultPutBuffer
	}
	if cfg.PutBufferBytes < s3PartSize {
		return nil, fmt.Errorf("blob: s3: PutBufferBytes %d is less than one part (%d)", cfg.PutBufferBytes, s3PartSize)
	}

	hc := awshttp.NewBuildableClient()
	var awsCfg aws.Config
	if cfg.AccessKey != "" {
		// Static keys: nothing else from the environment is taken in. The
		// checksum settings are LoadDefaultConfig's defaults, which a bare
		// aws.Config lacks: without them a streamed Put would go out with
		// neither a hash nor a checksum.
		awsCfg = aws.Config{
			Region:                     cfg.Region,
			Credentials:                credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, ""),
			HTTPClient:                 hc,
			RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
			ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
		}
	} else {
		var err error
		awsCfg, err = config.LoadDefaultConfig(context.Background(), config.WithRegion(cfg.Region), config.WithHTTPClient(hc))
		if err != nil {
			return nil, fmt.Errorf("blob: s3: %w", err)
		}
	}
	opts := func(endpoint string) func(*s3.Options) {
		return func(o *s3.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
			o.UsePathStyle = cfg.PathStyle
		}
	}
	client := s3.NewFromConfig(awsCfg, opts(cfg.Endpoint))
	presignEndpoint := cfg.PresignEndpoint
	if presignEndpoint == "" {
		presignEndpoint = cfg.Endpoint
	}
	presign := s3.NewPresignClient(s3.NewFromConfig(awsCfg, opts(presignEndpoint)))
	return &S3{
		cfg: cfg, client: client, presign: presign, transport: hc.GetTransport(),
		stream:  !plainHTTP,
		buffers: semaphore.NewWeighted(cfg.PutBufferBytes),
	}, nil
}

// object is the S3 key of key.
func (s *S3) object(key string) *string { return aws.String(s.cfg.Prefix + key) }

// Put over https with a known size from 256 KiB to 5 GiB sends one
// PutObject that streams r, not retried (r cannot be read twice).
// Otherwise it buffers r in parts of s3PartSize (within PutBufferBytes):
// one PutObject if it fits one part, else a multipart upload, aborted if
// anything fails; the SDK retries each request.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := checkPutKey(key); err != nil {
		return err
	}
	if size < -1 {
		return errNegativeSize
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	body := newExactReader(ctx, r, size)
	var err error
	if s.stream && size >= s3StreamMin && size <= s3MaxPut {
		err = s.putStream(ctx, key, body, size, contentType)
	} else {
		err = s.putBuffered(ctx, key, body, size, contentType)
	}
	if err != nil {
		// The SDK may report a failed body as a retry it could not make;
		// the reader's own error says what happened.
		if body.err != nil {
			err = body.err
		}
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	return nil
}

// putStream sends body in one PutObject as it reads it (size >= s3StreamMin,
// over https only: see S3.stream).
func (s *S3) putStream(ctx context.Context, key string, body *exactReader, size int64, contentType string) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.cfg.Bucket,
		Key:           s.object(key),
		Body:          body,
		ContentLength: aws.Int64(size),
		ContentType:   optional(contentType),
	}, func(o *s3.Options) { o.RetryMaxAttempts = 1 }) // a stream cannot be sent twice
	return err
}

// putBuffered stores body as one PutObject if it fits in one part, or as a
// multipart upload of s3PartSize parts. Buffered parts can be hashed,
// checksummed and retried by the SDK.
func (s *S3) putBuffered(ctx context.Context, key string, body io.Reader, size int64, contentType string) (err error) {
	reserve := int64(s3PartSize)
	if size >= 0 && size < s3PartSize {
		reserve = size + 1 // room to see the end without growing
	}
	if err := s.buffers.Acquire(ctx, reserve); err != nil {
		return err
	}
	defer s.buffers.Release(reserve)
	// The whole reserve at once: grown by doubling, a part left as much
	// garbage again behind it as it held.
	buf, last, err := readPart(body, make([]byte, 0, reserve), int(reserve))
	if err != nil {
		return err
	}
	if last {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        &s.cfg.Bucket,
			Key:           s.object(key),
			Body:          bytes.NewReader(buf),
			ContentLength: aws.Int64(int64(len(buf))),
			ContentType:   optional(contentType),
		})
		return err
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:      &s.cfg.Bucket,
		Key:         s.object(key),
		ContentType: optional(contentType),
	})
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s3AbortTimeout)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &s.cfg.Bucket, Key: s.object(key), UploadId: created.UploadId,
		}); aerr != nil {
			err = fmt.Errorf("%w (and aborting its multipart upload: %v)", err, aerr)
		}
	}()
	var parts []types.CompletedPart
	for n := int32(1); ; n++ {
		if len(buf) > 0 || n == 1 {
			if n > s3MaxParts {
				return fmt.Errorf("larger than %d parts of %d bytes", s3MaxParts, s3PartSize)
			}
			out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket:        &s.cfg.Bucket,
				Key:           s.object(key),
				UploadId:      created.UploadId,
				PartNumber:    aws.Int32(n),
				Body:          bytes.NewReader(buf),
				ContentLength: aws.Int64(int64(len(buf))),
			})
			if err != nil {
				return fmt.Errorf("part %d: %w", n, err)
			}
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
		}
		if last {
			break
		}
		if buf, last, err = readPart(body, buf, s3PartSize); err != nil {
			return err
		}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &s.cfg.Bucket,
		Key:             s.object(key),
		UploadId:        created.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	return err
}

// readPart reads up to max bytes of r into buf (reused; grown as bytes
// come, never past max) and reports whether r ended.
func readPart(r io.Reader, buf []byte, max int) ([]byte, bool, error) {
	buf = buf[:0]
	for len(buf) < max {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max, 2*cap(buf)+64<<10))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// Open heads the object and returns a reader of ranged GETs pinned to the
// object's ETag, so an object replaced meanwhile fails the reads instead of
// mixing two objects' bytes.
func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	h, err := s.head(ctx, "open", key)
	if err != nil {
		return nil, err
	}
	o := &s3Object{
		ctx: ctx, s: s, key: s.object(key), name: key,
		size: aws.ToInt64(h.ContentLength), mod: aws.ToTime(h.LastModified), etag: h.ETag,
		blockOff: -1,
	}
	return o, nil
}

// Stat heads the object.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	h, err := s.head(ctx, "stat", key)
	if err != nil {
		return Info{}, err
	}
	return Info{Size: aws.ToInt64(h.ContentLength), ModTime: aws.ToTime(h.LastModified)}, nil
}

func (s *S3) head(ctx context.Context, op, key string) (*s3.HeadObjectOutput, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if id, ok := strings.CutPrefix(key, tusPrefix); ok && !validTusID(id) {
		// tusd's .info and .part objects are its records, not uploads.
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	h, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: s.object(key)})
	if err != nil {
		return nil, s3Err(op, key, err)
	}
	return h, nil
}

// Delete deletes the object; for a tus upload also tusd's .info and .part
// objects.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	names := []string{key}
	if id, ok := strings.CutPrefix(key, tusPrefix); ok && validTusID(id) {
		names = append(names, key+".info", key+".part")
	}
	for _, name := range names {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: s.object(name)})
		if err != nil && !errors.Is(s3Err("delete", key, err), ErrNotFound) {
			return s3Err("delete", key, err)
		}
	}
	return nil
}

// PresignGet signs a GET of the object with SigV4 query parameters,
// including the response header overrides, so a changed URL is refused.
func (s *S3) PresignGet(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if ttl < time.Second || ttl > s3MaxPresign {
		return "", fmt.Errorf("blob: presign %q: ttl %v is not between 1s and %v", key, ttl, s3MaxPresign)
	}
	in := &s3.GetObjectInput{Bucket: &s.cfg.Bucket, Key: s.object(key)}
	if downloadName != "" {
		cd := mime.FormatMediaType("attachment", map[string]string{"filename": cleanFileName(downloadName)})
		if cd == "" {
			return "", fmt.Errorf("blob: presign %q: download name %q cannot be sent", key, downloadName)
		}
		in.ResponseContentDisposition = &cd
	}
	if contentType != "" {
		if _, _, err := mime.ParseMediaType(contentType); err != nil {
			return "", fmt.Errorf("blob: presign %q: content type %q: %w", key, contentType, err)
		}
		in.ResponseContentType = &contentType
	}
	req, err := s.presign.PresignGetObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("blob: presign %q: %w", key, err)
	}
	return req.URL, nil
}

// cleanFileName makes a user's file name safe to offer as a download
// name: no directories, control bytes or quotes, at most 200 bytes.
func cleanFileName(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == '"' || r == 0xfffd:
			return '_'
		}
		return r
	}, strings.ToValidUTF8(name, "_"))
	for len(name) > 200 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}

// Close closes the client's idle connections.
func (s *S3) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// s3Err maps S3's "no such key" answers to ErrNotFound.
func s3Err(op, key string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %q", ErrNotFound, key)
		case "NoSuchBucket":
			return fmt.Errorf("blob: %s %q: %w", op, key, err)
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return fmt.Errorf("blob: %s %q: %w", op, key, err)
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
