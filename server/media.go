package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"os"
	"path/filepath"

	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/media"
	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/probe"
	"github.com/parleyim/parley/internal/store"
)

// newMedia builds the media service on the configured blob store: an S3
// bucket, or data_dir/media. A cluster without a bucket has no media (a
// file on one node's disk would be missing on the others): nil, with a
// warning.
func newMedia(cfg Config, st store.Store, tokenKey string) (*media.Service, error) {
	var blobs blob.Store
	var err error
	switch {
	case cfg.MediaS3Bucket != "":
		blobs, err = newS3(cfg)
	case cfg.clustered():
		cfg.Logger.Warn("media is off: a cluster keeps files in an S3 bucket (media_s3_bucket), not on one node's disk")
		return nil, nil
	default:
		blobs, err = blob.NewLocal(filepath.Join(cfg.DataDir, "media"))
	}
	if err != nil {
		return nil, err
	}
	// The URL key is derived from the token key: every node of a cluster
	// has the same, and no new secret is to be kept.
	m := hmac.New(sha256.New, []byte(tokenKey))
	m.Write([]byte("parley media url key v1"))
	svc, err := media.New(media.Config{Store: st, Blobs: blobs, Key: m.Sum(nil),
		MaxFileBytes: cfg.MediaMaxFileBytes, QuotaBytes: orZero(cfg.MediaQuotaBytes), UploadRate: orZero(cfg.MediaUploadRate),
		AllowedTypes: cfg.MediaAllowedTypes, URLTTL: cfg.MediaURLTTL, UnattachedTTL: cfg.MediaUnattachedTTL,
		OrphanGrace: cfg.mediaOrphanGrace,
		Workers:     cfg.MediaWorkers, Limits: probe.Limits{MaxPixels: cfg.MediaMaxPixels}, Logger: cfg.Logger})
	if err != nil {
		blobs.Close()
		return nil, err
	}
	return svc, nil
}

// chatMedia is m as chat's Media, nil when there is none (not an
// interface holding a nil pointer).
func chatMedia(m *media.Service) chat.Media {
	if m == nil {
		return nil
	}
	return m
}

// newS3 opens the configured bucket; resumable uploads keep their parts
// in data_dir/media-parts until each is sent.
func newS3(cfg Config) (blob.Store, error) {
	parts := filepath.Join(cfg.DataDir, "media-parts")
	if err := os.MkdirAll(parts, 0o700); err != nil {
		return nil, err
	}
	return blob.NewS3(blob.S3Config{Endpoint: cfg.MediaS3Endpoint, Region: cfg.MediaS3Region,
		Bucket: cfg.MediaS3Bucket, AccessKey: cfg.MediaS3AccessKey, SecretKey: cfg.MediaS3SecretKey,
		PathStyle: cfg.MediaS3PathStyle, Prefix: cfg.MediaS3Prefix, TusTempDir: parts,
		// Uploads buffered on their way to the bucket (all of them over plain
		// http, small ones over https) hold at most this much at once: with
		// the garbage collector's headroom the server stays within 200 MiB
		// under 100 uploads at once.
		PutBufferBytes: 32 << 20})
}
