package pebblestore

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// file values: lp(owner) lp(name) varint(size) lp(content type)
// varint(width) varint(height) varint(duration ms) lp(blurhash)
// lp(blob key) lp(thumb key) time(created) flags(attached).
func encodeFile(f store.File) []byte {
	b := make([]byte, 0, 64+len(f.Owner)+len(f.Name)+len(f.ContentType)+len(f.Blurhash)+len(f.BlobKey)+len(f.ThumbKey))
	b = appendLP(appendLP(b, f.Owner), f.Name)
	b = binary.AppendVarint(b, f.Size)
	b = appendLP(b, f.ContentType)
	b = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(b, int64(f.Width)), int64(f.Height)), f.DurationMs)
	b = appendLP(appendLP(appendLP(b, f.Blurhash), f.BlobKey), f.ThumbKey)
	b = appendTime(b, f.CreatedAt)
	return append(b, flags(f.Attached))
}

func decodeFile(key []byte, id string, body []byte) (store.File, error) {
	r := bodyReader{b: body}
	f := store.File{ID: id, Owner: r.str(), Name: r.str(), Size: r.varint(), ContentType: r.str()}
	f.Width, f.Height, f.DurationMs = int32(r.varint()), int32(r.varint()), r.varint()
	f.Blurhash, f.BlobKey, f.ThumbKey = r.str(), r.str(), r.str()
	f.CreatedAt = r.time()
	f.Attached = r.flags(1)&1 != 0
	if !r.ok() {
		return store.File{}, corruptf(key, "bad file record")
	}
	return f, nil
}

func fileKey(id string) []byte { return appendLP([]byte{nsFile}, id) }

// unattachedKey orders files never attached by creation time. Times before
// 1970 (never made by the server) sort first.
func unattachedKey(f store.File) []byte {
	b := binary.BigEndian.AppendUint64([]byte{nsUnattached}, uint64(max(f.CreatedAt.UnixNano(), 0)))
	return append(b, f.ID...)
}

func mediaUsageKey(owner string) []byte { return appendLP([]byte{nsMediaUsage}, owner) }

// PutFile implements store.Store: the record, its unattached index entry
// and the owner's usage in one batch.
func (s *Store) PutFile(ctx context.Context, f store.File) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if f.ID == "" || f.Owner == "" {
		return errEmptyID
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	key := fileKey(f.ID)
	if _, found, err := s.getBody(key); err != nil || found {
		if found {
			return store.ErrExists
		}
		return err
	}
	files, bytes, err := s.mediaUsage(f.Owner)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key, frame(key, encodeFile(f)), nil)
	if !f.Attached {
		k := unattachedKey(f)
		_ = b.Set(k, frame(k, nil), nil)
	}
	uk := mediaUsageKey(f.Owner)
	_ = b.Set(uk, frame(uk, encodeMediaUsage(files+1, bytes+f.Size)), nil)
	return mapErr(s.commitBatch(b, s.wo, small))
}

// UpdateFile implements store.Store.
func (s *Store) UpdateFile(ctx context.Context, f store.File) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	old, err := s.getFile(f.ID)
	if err != nil {
		return err
	}
	f.Owner, f.Size, f.CreatedAt = old.Owner, old.Size, old.CreatedAt
	b := s.db.NewBatch()
	defer b.Close()
	key := fileKey(f.ID)
	_ = b.Set(key, frame(key, encodeFile(f)), nil)
	if old.Attached != f.Attached {
		k := unattachedKey(f)
		if f.Attached {
			_ = b.Delete(k, nil)
		} else {
			_ = b.Set(k, frame(k, nil), nil)
		}
	}
	return mapErr(s.commitBatch(b, s.wo, small))
}

// GetFile implements store.Store.
func (s *Store) GetFile(ctx context.Context, id string) (store.File, error) {
	if err := s.enter(ctx); err != nil {
		return store.File{}, err
	}
	defer s.closeMu.RUnlock()
	return s.getFile(id)
}

func (s *Store) getFile(id string) (store.File, error) {
	key := fileKey(id)
	body, found, err := s.getBody(key)
	if err != nil {
		return store.File{}, err
	}
	if !found {
		return store.File{}, store.ErrNotFound
	}
	return decodeFile(key, id, body)
}

// DeleteFile implements store.Store.
func (s *Store) DeleteFile(ctx context.Context, id string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	f, err := s.getFile(id)
	if err == store.ErrNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	files, bytes, err := s.mediaUsage(f.Owner)
	if err != nil {
		return false, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(fileKey(id), nil)
	_ = b.Delete(unattachedKey(f), nil)
	uk := mediaUsageKey(f.Owner)
	if files <= 1 {
		_ = b.Delete(uk, nil)
	} else {
		_ = b.Set(uk, frame(uk, encodeMediaUsage(files-1, max(bytes-f.Size, 0))), nil)
	}
	if err := s.commitBatch(b, s.wo, small); err != nil {
		return false, mapErr(err)
	}
	return true, nil
}

// AttachFiles implements store.Store.
func (s *Store) AttachFiles(ctx context.Context, ids []string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	for _, id := range ids {
		f, err := s.getFile(id)
		if err == store.ErrNotFound {
			continue
		}
		if err != nil {
			return err
		}
		if f.Attached {
			continue
		}
		_ = b.Delete(unattachedKey(f), nil)
		f.Attached = true
		key := fileKey(id)
		_ = b.Set(key, frame(key, encodeFile(f)), nil)
	}
	if b.Empty() {
		return nil
	}
	return mapErr(s.commitBatch(b, s.wo, small))
}

// UnattachedFiles implements store.Store: a scan of the index from the
// oldest.
func (s *Store) UnattachedFiles(ctx context.Context, before time.Time, limit int) ([]store.File, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	lower := []byte{nsUnattached}
	upper := binary.BigEndian.AppendUint64([]byte{nsUnattached}, uint64(max(before.UnixNano(), 0)))
	var ids []string
	err := s.iterate(ctx, lower, upper, func(key, _ []byte) (bool, error) {
		if len(key) < 9 {
			return false, corruptf(key, "bad unattached file key")
		}
		ids = append(ids, string(key[9:]))
		return len(ids) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.File, 0, len(ids))
	for _, id := range ids {
		f, err := s.getFile(id)
		if err == store.ErrNotFound {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// MediaUsage implements store.Store.
func (s *Store) MediaUsage(ctx context.Context, owner string) (files, bytes int64, err error) {
	if err := s.enter(ctx); err != nil {
		return 0, 0, err
	}
	defer s.closeMu.RUnlock()
	return s.mediaUsage(owner)
}

func (s *Store) mediaUsage(owner string) (files, bytes int64, err error) {
	key := mediaUsageKey(owner)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return 0, 0, err
	}
	r := bodyReader{b: body}
	files, bytes = r.varint(), r.varint()
	if !r.ok() {
		return 0, 0, corruptf(key, "bad media usage record")
	}
	return files, bytes, nil
}

func encodeMediaUsage(files, bytes int64) []byte {
	return binary.AppendVarint(binary.AppendVarint(nil, files), bytes)
}
