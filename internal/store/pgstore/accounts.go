package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Account deletion (store.Accounts). The statements are rare and built per
// call from the schema rather than kept in queries.

var _ store.Accounts = (*Store)(nil)

func (s *Store) sql(q string) string { return strings.ReplaceAll(q, "{s}", s.q.schema) }

// FilesOf implements store.Accounts (the files_owner index).
func (s *Store) FilesOf(ctx context.Context, owner, after string, limit int) ([]store.File, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+fileColumns+` FROM {s}.files WHERE owner_id = $1 AND id > $2 ORDER BY id LIMIT $3`),
		owner, after, limit)
	if err != nil {
		return nil, mapErr("files of", err)
	}
	defer rows.Close()
	var out []store.File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, mapErr("files of", err)
		}
		out = append(out, f)
	}
	return out, mapErr("files of", rows.Err())
}

// erase clears what a deleted user wrote in m; it reports whether m changed.
func erase(m *pb.Message) bool {
	before := proto.Clone(m)
	m.Payload, m.SearchText, m.ContentType = nil, "", ""
	m.Attachments, m.Mentions, m.MentionAll = nil, nil, false
	if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
		m.Recalled = true
	}
	return !proto.Equal(before, m)
}

// EraseMessages implements store.Accounts: one transaction that locks the
// page's rows (an edit or recall of one of them waits), rewrites the
// erased ones with empty search columns and drops their mention rows.
func (s *Store) EraseMessages(ctx context.Context, conv, from string, after uint64, limit int) (uint64, int, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	if limit <= 0 {
		return 0, 0, nil
	}
	var next uint64
	var erased int
	err = s.retry(ctx, "erase messages", func() error {
		next, erased = 0, 0
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, s.sql(`SELECT seq, sender, body, crc FROM {s}.messages
			WHERE conversation_id = $1 AND seq > $2 ORDER BY seq LIMIT $3 FOR UPDATE`), conv, clampSeq(after), limit)
		if err != nil {
			return err
		}
		type row struct {
			seq  int64
			body []byte
			crc  int32
		}
		var page []row
		for rows.Next() {
			var r row
			var sender string
			if err := rows.Scan(&r.seq, &sender, &r.body, &r.crc); err != nil {
				rows.Close()
				return err
			}
			next = uint64(r.seq)
			if sender == from {
				page = append(page, r)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, r := range page {
			m, err := s.decode(conv, r.seq, r.body, r.crc)
			if err != nil {
				return err
			}
			old := proto.Clone(m).(*pb.Message)
			if !erase(m) {
				continue
			}
			body, crc, err := s.encode(m)
			if err != nil {
				return err
			}
			erased++
			b.Queue(s.sql(`UPDATE {s}.messages SET body = $3, crc = $4, search_norm = NULL, server_time = NULL,
				content_type = NULL, has_attachment = NULL, sender_only = NULL WHERE conversation_id = $1 AND seq = $2`),
				conv, r.seq, body, crc)
			if len(old.Mentions) > 0 {
				b.Queue(s.q.deleteMentions, old.Mentions, conv, r.seq)
			}
			if old.MentionAll {
				b.Queue(s.q.deleteMentionsAll, conv, r.seq)
			}
			if len(old.Attachments) > 0 { // an erased message carries no file
				b.Queue(s.rsql(sqlDropFilesOf), []string{conv}, []int64{r.seq})
			}
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, 0, mapErr("erase messages", err)
	}
	return next, erased, nil
}

// DeleteUserRecords implements store.Accounts: one transaction.
func (s *Store) DeleteUserRecords(ctx context.Context, user string) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	stmts := []string{
		`DELETE FROM {s}.cursors c USING {s}.user_conversations uc
			WHERE uc.user_id = $1 AND c.conversation_id = uc.conversation_id AND c.user_id = $1`,
		`DELETE FROM {s}.cursors WHERE user_id = $1`,
		`DELETE FROM {s}.user_conversations WHERE user_id = $1`,
		`DELETE FROM {s}.conversation_settings WHERE user_id = $1`,
		`DELETE FROM {s}.hidden_messages WHERE user_id = $1`,
		`DELETE FROM {s}.contacts WHERE owner_id = $1 OR user_id = $1`,
		`DELETE FROM {s}.blocks WHERE owner_id = $1 OR user_id = $1`,
		`DELETE FROM {s}.last_seen WHERE user_id = $1`,
		`DELETE FROM {s}.user_storage WHERE user_id = $1`,
		`DELETE FROM {s}.push_targets WHERE user_id = $1`,
		`DELETE FROM {s}.mentions WHERE user_id = $1`,
	}
	err = s.retry(ctx, "delete user records", func() error {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		b := &pgx.Batch{}
		for _, q := range stmts {
			b.Queue(s.sql(q), user)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	return mapErr("delete user records", err)
}

// PurgeDeleted implements store.Accounts: a plain VACUUM of the tables an
// account deletion rewrites. It takes no lock that blocks reads or writes;
// it makes dead rows' space reusable, which is all PostgreSQL offers short
// of VACUUM FULL (a table rewrite under an exclusive lock: not run here).
func (s *Store) PurgeDeleted(ctx context.Context) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.pool.Exec(ctx, s.sql(`VACUUM {s}.users, {s}.messages, {s}.contacts, {s}.blocks, {s}.files,
		{s}.push_targets, {s}.conversation_settings, {s}.user_conversations, {s}.cursors, {s}.settings`))
	return mapErr("vacuum", err)
}
