package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
)

// Files carried by messages (store.Retention's OrphanedFiles, migration
// 0012): message_files rows are written in the transaction that stores a
// message and deleted in the one that deletes, recalls or erases it, which
// also adds the files to file_orphans. The upsert rewrites an existing
// file_orphans row: it takes the row's lock, so dropping a stale entry
// (which locks it first) and adding it again are ordered.
const (
	sqlInsertMessageFiles = `INSERT INTO {s}.message_files (file_id, conversation_id, seq)
		SELECT i.f, i.conv, c.last_seq - i.back FROM unnest($1::text[], $2::text[], $3::int8[]) AS i(f, conv, back)
		JOIN {s}.conversations c ON c.id = i.conv
		ON CONFLICT DO NOTHING`
	sqlDropFilesBelow = `WITH d AS (DELETE FROM {s}.message_files WHERE conversation_id = $1 AND seq < $2 RETURNING file_id)
		INSERT INTO {s}.file_orphans (file_id) SELECT DISTINCT file_id FROM d ORDER BY file_id
		ON CONFLICT (file_id) DO UPDATE SET marked_at = now()`
	sqlDropFilesOf = `WITH d AS (DELETE FROM {s}.message_files t USING unnest($1::text[], $2::int8[]) AS r(c, q)
			WHERE t.conversation_id = r.c AND t.seq = r.q RETURNING t.file_id)
		INSERT INTO {s}.file_orphans (file_id) SELECT DISTINCT file_id FROM d ORDER BY file_id
		ON CONFLICT (file_id) DO UPDATE SET marked_at = now()`
	// Candidates first: those carried again or without a record are
	// stale; the others are orphans.
	sqlOrphanCandidates = `SELECT o.file_id,
			EXISTS (SELECT 1 FROM {s}.message_files m WHERE m.file_id = o.file_id)
			OR NOT EXISTS (SELECT 1 FROM {s}.files f WHERE f.id = o.file_id)
		FROM {s}.file_orphans o WHERE o.marked_at <= now() - make_interval(secs => $2)
		ORDER BY o.file_id LIMIT $1`
	sqlFileOrphaned = `SELECT extract(epoch FROM now() - o.marked_at),
			NOT EXISTS (SELECT 1 FROM {s}.message_files m WHERE m.file_id = o.file_id)
		FROM {s}.file_orphans o WHERE o.file_id = $1`
	sqlLockOrphans = `SELECT file_id FROM {s}.file_orphans WHERE file_id = ANY($1::text[]) ORDER BY file_id FOR UPDATE`
	// Runs after sqlLockOrphans, in a statement of its own: it sees what
	// committed while the locks were awaited.
	sqlDropStale = `DELETE FROM {s}.file_orphans o WHERE o.file_id = ANY($1::text[])
		AND (EXISTS (SELECT 1 FROM {s}.message_files m WHERE m.file_id = o.file_id)
			OR NOT EXISTS (SELECT 1 FROM {s}.files f WHERE f.id = o.file_id))`
	sqlFileCarried = `SELECT EXISTS (SELECT 1 FROM {s}.message_files WHERE file_id = $1)`
	sqlDropOrphan  = `DELETE FROM {s}.file_orphans WHERE file_id = $1`
)

// FileOrphaned implements store.Retention, on the database's clock.
func (s *Store) FileOrphaned(ctx context.Context, id string) (time.Duration, bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, false, err
	}
	defer done()
	var secs float64
	var orphaned bool
	err = s.pool.QueryRow(ctx, s.rsql(sqlFileOrphaned), id).Scan(&secs, &orphaned)
	if err == pgx.ErrNoRows {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, mapErr("file orphaned", err)
	}
	if !orphaned {
		return 0, false, nil
	}
	return time.Duration(secs * float64(time.Second)), true, nil
}

// OrphanedFiles implements store.Retention.
func (s *Store) OrphanedFiles(ctx context.Context, minAge time.Duration, limit int) ([]store.File, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.rsql(sqlOrphanCandidates), limit, minAge.Seconds())
	if err != nil {
		return nil, mapErr("orphaned files", err)
	}
	var orphans, stale []string
	var id string
	var st bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error {
		if st {
			stale = append(stale, id)
		} else {
			orphans = append(orphans, id)
		}
		return nil
	}); err != nil {
		return nil, mapErr("orphaned files", err)
	}
	if len(stale) > 0 {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.rsql(sqlLockOrphans), stale); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, s.rsql(sqlDropStale), stale)
			return err
		})
		if err != nil {
			return nil, mapErr("orphaned files", err)
		}
	}
	var out []store.File
	for _, id := range orphans {
		f, err := scanFile(s.pool.QueryRow(ctx, s.q.getFile, id))
		if err == pgx.ErrNoRows {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, mapErr("orphaned files", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// DeleteOrphanedFile implements store.Retention: one transaction, with the
// candidate's row locked, so a deletion adding it again waits.
func (s *Store) DeleteOrphanedFile(ctx context.Context, id string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	deleted := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		deleted = false
		if _, err := tx.Exec(ctx, s.rsql(sqlLockOrphans), []string{id}); err != nil {
			return err
		}
		var carried bool
		if err := tx.QueryRow(ctx, s.rsql(sqlFileCarried), id).Scan(&carried); err != nil {
			return err
		}
		if !carried {
			tag, err := tx.Exec(ctx, s.q.deleteFile, id)
			if err != nil {
				return err
			}
			deleted = tag.RowsAffected() > 0
		}
		_, err := tx.Exec(ctx, s.rsql(sqlDropOrphan), id)
		return err
	})
	if err != nil {
		return false, mapErr("delete orphaned file", err)
	}
	return deleted, nil
}
