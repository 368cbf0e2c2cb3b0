package media

import (
	"context"
	"errors"
	"time"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/store"
)

// collectBatch bounds the files one sweep removes (the next sweep goes on).
const collectBatch = 500

// collectLoop deletes files never attached within UnattachedTTL of their
// upload, every tenth of that TTL (at most hourly).
func (s *Service) collectLoop() {
	defer s.wg.Done()
	every := min(s.cfg.UnattachedTTL/10, time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Collect(context.Background(), time.Now()); err != nil {
				s.log.Warn("media: collecting unattached files failed", "err", err)
			}
		}
	}
}

// Collect deletes the files never attached that were uploaded before
// now − UnattachedTTL (at most collectBatch of them) and reports how many;
// resumable uploads untouched as long are removed too, where the blob
// store can (on S3, a lifecycle rule does it).
func (s *Service) Collect(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if sw, ok := s.blobs.(blob.UploadSweeper); ok {
		if _, err := sw.SweepUploads(ctx, now.Add(-s.cfg.UnattachedTTL)); err != nil {
			s.log.Warn("media: sweeping abandoned uploads failed", "err", err)
		}
	}
	files, err := s.store.UnattachedFiles(ctx, now.Add(-s.cfg.UnattachedTTL), collectBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if err := s.deleteBytes(ctx, f); err != nil {
			return n, err
		}
		if _, err := s.store.DeleteFile(ctx, f.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// deleteBytes deletes a file's bytes and thumbnail, before its record: a
// record without bytes is served as gone, bytes without a record would
// never be found again.
func (s *Service) deleteBytes(ctx context.Context, f store.File) error {
	for _, key := range []string{f.BlobKey, f.ThumbKey} {
		if key == "" {
			continue
		}
		if err := s.blobs.Delete(ctx, key); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
	}
	s.files.drop(f.ID)
	return nil
}

// CollectOrphans deletes the files whose last carrying message was deleted
// (by retention, a disappearing timer or a recall; store.Retention's
// OrphanedFiles) at least OrphanGrace ago, at most collectBatch of them,
// and reports how many: bytes first, then the record, which the store
// deletes only if still no message carries the file. A failure leaves the
// store's mark, so the next call tries again. A file sent again within the
// grace is carried again and kept; see AttachValidity for why no send can
// carry a file whose bytes this deletes.
func (s *Service) CollectOrphans(ctx context.Context) (int, error) {
	files, err := s.store.OrphanedFiles(ctx, s.cfg.OrphanGrace, collectBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		if err := s.deleteBytes(ctx, f); err != nil {
			return n, err
		}
		ok, err := s.store.DeleteOrphanedFile(ctx, f.ID)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}
