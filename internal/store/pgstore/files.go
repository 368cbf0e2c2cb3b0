package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyim/parley/internal/store"
)

// fileColumns are a file row's columns in the order scanFile reads them.
const fileColumns = `id, owner_id, name, size, content_type, width, height, duration_ms, blurhash, blob_key, thumb_key, created_at, attached`

func scanFile(r pgx.Row) (store.File, error) {
	var f store.File
	var created pgtype.Timestamptz
	err := r.Scan(&f.ID, &f.Owner, &f.Name, &f.Size, &f.ContentType, &f.Width, &f.Height, &f.DurationMs,
		&f.Blurhash, &f.BlobKey, &f.ThumbKey, &created, &f.Attached)
	f.CreatedAt = fromTimestamp(created)
	return f, err
}

// PutFile implements store.Store.
func (s *Store) PutFile(ctx context.Context, f store.File) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if f.ID == "" || f.Owner == "" {
		return errEmptyID
	}
	tag, err := s.pool.Exec(ctx, s.q.putFile, f.ID, f.Owner, f.Name, f.Size, f.ContentType, f.Width, f.Height,
		f.DurationMs, f.Blurhash, f.BlobKey, f.ThumbKey, timestamp(f.CreatedAt), f.Attached)
	if err != nil {
		return mapErr("put file", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrExists
	}
	return nil
}

// UpdateFile implements store.Store.
func (s *Store) UpdateFile(ctx context.Context, f store.File) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	tag, err := s.pool.Exec(ctx, s.q.updateFile, f.ID, f.Name, f.ContentType, f.Width, f.Height, f.DurationMs,
		f.Blurhash, f.BlobKey, f.ThumbKey, f.Attached)
	if err != nil {
		return mapErr("update file", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// GetFile implements store.Store.
func (s *Store) GetFile(ctx context.Context, id string) (store.File, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.File{}, err
	}
	defer done()
	f, err := scanFile(s.pool.QueryRow(ctx, s.q.getFile, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.File{}, store.ErrNotFound
	}
	if err != nil {
		return store.File{}, mapErr("get file", err)
	}
	return f, nil
}

// DeleteFile implements store.Store.
func (s *Store) DeleteFile(ctx context.Context, id string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	tag, err := s.pool.Exec(ctx, s.q.deleteFile, id)
	if err != nil {
		return false, mapErr("delete file", err)
	}
	return tag.RowsAffected() > 0, nil
}

// AttachFiles implements store.Store.
func (s *Store) AttachFiles(ctx context.Context, ids []string) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if len(ids) == 0 {
		return nil
	}
	_, err = s.pool.Exec(ctx, s.q.attachFiles, ids)
	return mapErr("attach files", err)
}

// UnattachedFiles implements store.Store.
func (s *Store) UnattachedFiles(ctx context.Context, before time.Time, limit int) ([]store.File, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.unattachedFiles, timestamp(before), limit)
	if err != nil {
		return nil, mapErr("unattached files", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.File, error) { return scanFile(r) })
	if err != nil {
		return nil, mapErr("unattached files", err)
	}
	return out, nil
}

// MediaUsage implements store.Store.
func (s *Store) MediaUsage(ctx context.Context, owner string) (files, bytes int64, err error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	if err := s.pool.QueryRow(ctx, s.q.mediaUsage, owner).Scan(&files, &bytes); err != nil {
		return 0, 0, mapErr("media usage", err)
	}
	return files, bytes, nil
}
