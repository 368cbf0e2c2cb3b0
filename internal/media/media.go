// Package media is Parley's files: uploads (one request, or resumable with
// the tus protocol), their records, the attachments that messages carry,
// thumbnails and signed download URLs (docs/media.md).
//
// The bytes live in a blob.Store (local disk under the data directory, or
// an S3 bucket); the records in store.Store. A file becomes visible (gets
// a record) only once all of its bytes are stored, sniffed, allowed and
// inspected. Whether a user may read a file is decided by chat, from the
// message that carries it; this package knows files and their uploaders.
package media

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/limit"
	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/probe"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Config is what the media service needs. Zero values take the stated
// defaults; Store, Blobs and Key are required.
type Config struct {
	Store store.Store
	Blobs blob.Store
	// Key signs download URLs (HMAC-SHA256); at least 32 bytes.
	Key []byte
	// MaxFileBytes bounds one file. Default 100 MiB.
	MaxFileBytes int64
	// QuotaBytes bounds the bytes of one user's files; an upload past it
	// is refused with QUOTA_EXCEEDED. Zero: unlimited.
	QuotaBytes int64
	// UploadRate bounds the bytes per second one user uploads, all their
	// uploads together (bursts of up to 4 s of it). Zero: unlimited.
	UploadRate int64
	// AllowedTypes are the content types accepted ("type/subtype",
	// "type/*", "*/*"), matched against the type sniffed from the bytes.
	// Default: every type.
	AllowedTypes []string
	// URLTTL is how long a download URL works. Default 10 minutes.
	URLTTL time.Duration
	// UnattachedTTL: a file not sent in a message within this long of its
	// upload is deleted. Default 24 hours.
	UnattachedTTL time.Duration
	// OrphanGrace: a file whose last carrying message was deleted
	// (retention, a disappearing timer, a recall) can be sent again for a
	// while, then its bytes are deleted (CollectOrphans) once it is this
	// old. Default 5 minutes.
	OrphanGrace time.Duration
	// Workers is how many files are inspected (images decoded,
	// thumbnails made) at once. Default 2.
	Workers int
	// Limits bound the decoding of one image (pixels, bytes).
	Limits probe.Limits
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultMaxFileBytes  = 100 << 20
	DefaultURLTTL        = 10 * time.Minute
	DefaultUnattachedTTL = 24 * time.Hour
	DefaultOrphanGrace   = 5 * time.Minute
	DefaultWorkers       = 2
)

func (c *Config) setDefaults() {
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if len(c.AllowedTypes) == 0 {
		c.AllowedTypes = []string{"*/*"}
	}
	if c.URLTTL <= 0 {
		c.URLTTL = DefaultURLTTL
	}
	if c.UnattachedTTL <= 0 {
		c.UnattachedTTL = DefaultUnattachedTTL
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = DefaultOrphanGrace
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Service is the media service. Build with New, stop with Close.
type Service struct {
	cfg   Config
	log   *slog.Logger
	store store.Store
	blobs blob.Store
	rate  *limit.Keyed // bytes per user; nil: unlimited
	work  chan struct{}
	// owners serializes each user's quota check with the record that
	// counts against it (striped by user).
	owners [64]sync.Mutex
	files  fileCache

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New builds the service and starts collecting files never attached.
func New(cfg Config) (*Service, error) {
	cfg.setDefaults()
	if cfg.Store == nil || cfg.Blobs == nil {
		return nil, errors.New("media: a store and a blob store are required")
	}
	if len(cfg.Key) < 32 {
		return nil, errors.New("media: the URL signing key must be at least 32 bytes")
	}
	for _, t := range cfg.AllowedTypes {
		if !validTypePattern(t) {
			return nil, errors.New("media: allowed type " + t + " is not type/subtype, type/* or */*")
		}
	}
	s := &Service{cfg: cfg, log: cfg.Logger, store: cfg.Store, blobs: cfg.Blobs,
		work: make(chan struct{}, cfg.Workers), stop: make(chan struct{})}
	if cfg.UploadRate > 0 {
		s.rate = limit.NewKeyed(limit.Rate{PerSecond: float64(cfg.UploadRate), Burst: 4 * float64(cfg.UploadRate)})
	}
	s.wg.Add(1)
	go s.collectLoop()
	return s, nil
}

// Close stops the collector and releases the blob store; call it once no
// request is served any more.
func (s *Service) Close() {
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if err := s.blobs.Close(); err != nil {
			s.log.Warn("media: closing the blob store", "err", err)
		}
	})
}

// MaxFileBytes is the largest file accepted.
func (s *Service) MaxFileBytes() int64 { return s.cfg.MaxFileBytes }

// Attach implements chat.Media: each attachment must name a file uid
// uploaded, once; it answers them as the records describe them and marks
// the files kept.
func (s *Service) Attach(ctx context.Context, uid string, atts []*pb.Attachment) ([]*pb.Attachment, error) {
	out := make([]*pb.Attachment, 0, len(atts))
	ids := make([]string, 0, len(atts))
	var fresh []string
	for _, a := range atts {
		if a.GetId() == "" || len(a.Id) > maxIDLen {
			return nil, reqerr.BadRequest
		}
		for _, id := range ids {
			if id == a.Id {
				return nil, reqerr.BadRequest
			}
		}
		f, err := s.file(ctx, a.Id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && f.Owner != uid) {
			return nil, reqerr.Denied // the same whether it exists or not
		}
		if err != nil {
			return nil, reqerr.Store(err)
		}
		if !f.Attached && time.Since(f.CreatedAt) > s.cfg.UnattachedTTL-s.attachMargin() {
			// Due to be collected: attaching it now could race the collector.
			return nil, reqerr.Denied
		}
		if f.Attached {
			// A file no message carries any more is attached again only
			// well before CollectOrphans may delete its bytes.
			age, orphaned, err := s.store.FileOrphaned(ctx, a.Id)
			if err != nil {
				return nil, reqerr.Store(err)
			}
			if orphaned && age > s.cfg.OrphanGrace-s.orphanFence() {
				return nil, reqerr.Denied // as if already deleted
			}
		}
		ids = append(ids, a.Id)
		if !f.Attached {
			fresh = append(fresh, a.Id)
		}
		out = append(out, Attachment(f))
	}
	// A file sent before is kept already: only a first send writes.
	if len(fresh) > 0 {
		if err := s.store.AttachFiles(ctx, fresh); err != nil {
			return nil, reqerr.Store(err)
		}
		for _, id := range fresh {
			s.files.drop(id) // read again, attached, by the next send
		}
	}
	return out, nil
}

// AttachValidity is how long Attach's answer holds: a message carrying
// files must be committed within it of the Attach call, or fail (the
// client retries and Attach is asked again). Together with orphanFence it
// keeps the bytes of a file being sent again from being deleted under it:
// Attach refuses a file orphaned longer than OrphanGrace − orphanFence,
// CollectOrphans deletes only those orphaned at least OrphanGrace, and
// AttachValidity is half the fence (the rest absorbs clock drift).
func (s *Service) AttachValidity() time.Duration { return s.orphanFence() / 2 }

// orphanFence: see AttachValidity. 2 minutes by default.
func (s *Service) orphanFence() time.Duration { return s.cfg.OrphanGrace * 2 / 5 }

// attachMargin keeps attaching and collecting apart: a file is attached
// only while it is younger than UnattachedTTL less this.
func (s *Service) attachMargin() time.Duration { return min(s.cfg.UnattachedTTL/10, time.Hour) }

// maxIDLen bounds a file id in a request (the server makes 32 characters).
const maxIDLen = 128

// Attachment is how a message describes file f.
func Attachment(f store.File) *pb.Attachment {
	return &pb.Attachment{Id: f.ID, Name: f.Name, Size: f.Size, ContentType: f.ContentType,
		Width: f.Width, Height: f.Height, DurationMs: f.DurationMs, Thumbnail: f.ThumbKey != "", Blurhash: f.Blurhash}
}

// URL implements chat.Media: a download URL for the file (or its
// thumbnail), valid for URLTTL. With owner set, only that user's files.
func (s *Service) URL(ctx context.Context, fileID string, thumb bool, owner string) (*pb.FileUrlResult, error) {
	f, err := s.store.GetFile(ctx, fileID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && owner != "" && f.Owner != owner) || (err == nil && thumb && f.ThumbKey == "") {
		return nil, reqerr.Denied
	}
	if err != nil {
		return nil, reqerr.Store(err)
	}
	expires := time.Now().Add(s.cfg.URLTTL).Truncate(time.Second)
	key, name, ct := f.BlobKey, f.Name, f.ContentType
	if thumb {
		key, name, ct = f.ThumbKey, "", "image/jpeg"
	}
	_, disposition := servedAs(ct)
	if disposition == "inline" {
		name = "" // shown in place: no download name
	}
	u, err := s.blobs.PresignGet(ctx, key, s.cfg.URLTTL, name, servedType(ct))
	switch {
	case err == nil:
	case errors.Is(err, blob.ErrNotSupported):
		u = s.signedPath(f.ID, thumb, expires)
	default:
		s.log.Warn("media: presigning failed", "file", f.ID, "err", err)
		return nil, reqerr.Unavail
	}
	return &pb.FileUrlResult{Url: u, ExpiresAt: expires.UnixMilli()}, nil
}

// Usage is a user's files and their bytes, and the quota (0: unlimited).
func (s *Service) Usage(ctx context.Context, uid string) (files, bytes, quota int64, err error) {
	files, bytes, err = s.store.MediaUsage(ctx, uid)
	return files, bytes, s.cfg.QuotaBytes, err
}

// newID is a file id: 128 random bits in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// fileIDOf is the file id of a tus upload: derived from the upload's id
// with the service's key, so the record of a finished upload can be found
// again from the upload alone (a HEAD after a lost answer), while the id
// says nothing of where the bytes are.
func (s *Service) fileIDOf(uploadID string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte("parley tus upload\x00"))
	m.Write([]byte(uploadID))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// blobKey and thumbKey are where a one-request upload's bytes and any
// file's thumbnail live.
func blobKey(id string) string  { return "f/" + id[:2] + "/" + id }
func thumbKey(id string) string { return "t/" + id[:2] + "/" + id }

// Blobs is the blob store the files are kept in (account exports keep
// their archives there too, under a prefix of their own).
func (s *Service) Blobs() blob.Store { return s.blobs }
