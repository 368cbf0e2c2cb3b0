package media

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/probe"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
)

// Upload stores a file sent as the whole body of r (POST /v1/files), for
// uid, and returns its record. The body must declare its length
// (Content-Length); the name comes from the query (?name=). Nothing is
// visible unless every byte arrived and the file was accepted.
func (s *Service) Upload(w http.ResponseWriter, r *http.Request, uid string) (store.File, error) {
	ctx := r.Context()
	size := r.ContentLength
	switch {
	case size < 0:
		return store.File{}, reqerr.BadRequest // a length is required: the limits are checked before reading
	case size == 0:
		return store.File{}, reqerr.BadRequest
	case size > s.cfg.MaxFileBytes:
		return store.File{}, reqerr.TooLarge
	}
	if err := s.checkQuota(ctx, uid, size); err != nil {
		return store.File{}, err
	}
	body := s.limitReader(ctx, uid, &progressReader{r: http.MaxBytesReader(nil, r.Body, size), rc: http.NewResponseController(w)})
	// The type is checked on the first bytes, before anything is stored.
	head := make([]byte, min(size, probe.SniffBytes))
	if _, err := io.ReadFull(body, head); err != nil {
		return store.File{}, reqerr.BadRequest // the body ended before its declared length
	}
	if !probe.Allowed(probe.Sniff(head), s.cfg.AllowedTypes) {
		return store.File{}, reqerr.UnsupportedType
	}
	id := newID()
	key := blobKey(id)
	if err := s.blobs.Put(ctx, key, io.MultiReader(bytes.NewReader(head), body), size, "application/octet-stream"); err != nil {
		if errors.Is(err, blob.ErrSizeMismatch) || ctx.Err() != nil {
			return store.File{}, reqerr.BadRequest // a truncated (or overlong) body
		}
		s.log.Warn("media: storing an upload failed", "err", err)
		return store.File{}, reqerr.Unavail
	}
	f, err := s.ingest(ctx, uid, id, key, cleanName(r.URL.Query().Get("name")), size)
	if err != nil {
		s.deleteQuietly(key)
		return store.File{}, err
	}
	return f, nil
}

// ingest makes the record of a file whose size bytes are stored under key:
// its type sniffed and allowed, images inspected (refused when they are
// bombs or broken) and thumbnailed, and its size counted against the
// owner's quota. The caller removes the bytes when it fails; a file whose
// record exists already (a tus upload finished twice) is returned as is.
func (s *Service) ingest(ctx context.Context, uid, id, key, name string, size int64) (store.File, error) {
	if f, err := s.store.GetFile(ctx, id); err == nil {
		return f, nil
	}
	select {
	case s.work <- struct{}{}:
		defer func() { <-s.work }()
	case <-ctx.Done():
		return store.File{}, reqerr.Unavail
	}
	obj, err := s.blobs.Open(ctx, key)
	if err != nil {
		s.log.Warn("media: reading an upload failed", "err", err)
		return store.File{}, reqerr.Unavail
	}
	defer obj.Close()
	head := make([]byte, min(size, probe.SniffBytes))
	if _, err := obj.ReadAt(head, 0); err != nil && !(errors.Is(err, io.EOF) && len(head) == int(size)) {
		s.log.Warn("media: reading an upload failed", "err", err)
		return store.File{}, reqerr.Unavail
	}
	ct := probe.Sniff(head)
	if !probe.Allowed(ct, s.cfg.AllowedTypes) {
		return store.File{}, reqerr.UnsupportedType
	}
	f := store.File{ID: id, Owner: uid, Name: name, Size: size, ContentType: ct, BlobKey: key, CreatedAt: time.Now()}
	info, thumb, err := probe.Inspect(obj, size, ct, s.cfg.Limits)
	image := strings.HasPrefix(ct, "image/")
	switch {
	case err == nil:
	case errors.Is(err, probe.ErrTooLarge) && image:
		return store.File{}, reqerr.TooLarge // a decompression bomb, or too big to render
	case errors.Is(err, probe.ErrCorrupt) && image:
		return store.File{}, reqerr.BadRequest // a truncated or broken image
	case errors.Is(err, probe.ErrCorrupt), errors.Is(err, probe.ErrUnsupported), errors.Is(err, probe.ErrTooLarge):
		// Kept as a plain file: only what the probe would have told is missing.
	default:
		s.log.Warn("media: inspecting an upload failed", "err", err)
		return store.File{}, reqerr.Unavail
	}
	f.Width, f.Height, f.DurationMs, f.Blurhash = int32(info.Width), int32(info.Height), info.Duration.Milliseconds(), info.Blurhash
	if len(thumb.JPEG) > 0 {
		tk := thumbKey(id)
		if err := s.blobs.Put(ctx, tk, bytes.NewReader(thumb.JPEG), int64(len(thumb.JPEG)), "image/jpeg"); err != nil {
			s.log.Warn("media: storing a thumbnail failed", "err", err)
			return store.File{}, reqerr.Unavail
		}
		f.ThumbKey = tk
	}
	if err := s.record(ctx, f); err != nil {
		if f.ThumbKey != "" {
			s.deleteQuietly(f.ThumbKey)
		}
		return store.File{}, err
	}
	return f, nil
}

// record stores f's record if its owner's quota allows; the check and the
// write are one step per owner on this node.
func (s *Service) record(ctx context.Context, f store.File) error {
	mu := s.ownerLock(f.Owner)
	mu.Lock()
	defer mu.Unlock()
	if err := s.checkQuota(ctx, f.Owner, f.Size); err != nil {
		return err
	}
	err := s.store.PutFile(ctx, f)
	if errors.Is(err, store.ErrExists) {
		return nil // finished twice: the first made it
	}
	if err != nil {
		return reqerr.Store(err)
	}
	return nil
}

// checkQuota refuses size more bytes for uid past the quota.
func (s *Service) checkQuota(ctx context.Context, uid string, size int64) error {
	if s.cfg.QuotaBytes <= 0 {
		return nil
	}
	_, used, err := s.store.MediaUsage(ctx, uid)
	if err != nil {
		return reqerr.Store(err)
	}
	if used+size > s.cfg.QuotaBytes {
		return reqerr.Quota
	}
	return nil
}

func (s *Service) ownerLock(uid string) *sync.Mutex {
	var h uint32 = 2166136261
	for i := 0; i < len(uid); i++ {
		h = (h ^ uint32(uid[i])) * 16777619
	}
	return &s.owners[h%uint32(len(s.owners))]
}

// deleteQuietly removes bytes that will never have a record.
func (s *Service) deleteQuietly(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.blobs.Delete(ctx, key); err != nil {
		s.log.Warn("media: deleting refused bytes failed", "key", key, "err", err)
	}
}

// limitReader holds uid's uploads to the upload rate.
func (s *Service) limitReader(ctx context.Context, uid string, r io.Reader) io.Reader {
	if s.rate == nil {
		return r
	}
	return &rateReader{ctx: ctx, r: r, s: s, uid: uid}
}

type rateReader struct {
	ctx context.Context
	r   io.Reader
	s   *Service
	uid string
}

// rateChunk bounds one read, so the wait after it stays short.
const rateChunk = 64 << 10

func (rr *rateReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p[:min(len(p), rateChunk)])
	if d := rr.s.rate.Take(rr.uid, float64(n)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-rr.ctx.Done():
			t.Stop()
			return n, rr.ctx.Err()
		}
	}
	return n, err
}

// progressTimeout is how long an upload's body may make no progress: the
// server's read timeout bounds a whole request, which a large file needs
// longer than, so a body that keeps coming keeps its connection.
const progressTimeout = 60 * time.Second

type progressReader struct {
	r  io.Reader
	rc *http.ResponseController
}

func (p *progressReader) Read(b []byte) (int, error) {
	_ = p.rc.SetReadDeadline(time.Now().Add(progressTimeout)) // unsupported (a test's recorder): the server's timeout holds
	return p.r.Read(b)
}

// maxNameBytes bounds a file's name.
const maxNameBytes = 255

// cleanName is a display name from a client's: no path, no control
// characters, valid UTF-8, at most maxNameBytes; "file" when nothing is
// left.
func cleanName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ToValidUTF8(name, "")
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	for len(name) > maxNameBytes {
		_, n := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-n]
	}
	if name == "" || name == "." || name == ".." {
		return "file"
	}
	return name
}

// validTypePattern reports whether p is "type/subtype", "type/*" or "*/*".
func validTypePattern(p string) bool {
	t, sub, ok := strings.Cut(p, "/")
	return ok && t != "" && sub != "" && !strings.ContainsAny(p, " ;,") && (t != "*" || sub == "*")
}
