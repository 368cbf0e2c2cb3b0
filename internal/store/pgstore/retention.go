package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
)

// Retention (store.Retention, docs/retention.md): floors in message_floors,
// expiries in messages.expires_at (migration 0011). Deleting messages
// deletes their rows and the rows derived from them (reactions, pins,
// threads, mentions) in one transaction per batch; the messages_dedup
// entries go with the rows. ReclaimSpace runs a plain VACUUM: the space
// becomes reusable by new rows, but is not returned to the operating
// system (see docs/retention.md).

// retentionSQL is the SQL of this file with the schema filled in.
func retentionSQL(schema, sql string) string { return strings.ReplaceAll(sql, "{s}", schema) }

const (
	sqlFloor      = `SELECT floor FROM {s}.message_floors WHERE conversation_id = $1`
	sqlBelowFloor = `SELECT EXISTS (SELECT 1 FROM {s}.messages m JOIN {s}.message_floors f USING (conversation_id)
		WHERE m.conversation_id = $1 AND m.seq < f.floor)`
	// Raises the floor, clamped to the conversation's last seq + 1, and
	// returns it (NULL: no such conversation).
	sqlRaiseFloor = `INSERT INTO {s}.message_floors (conversation_id, floor)
		SELECT $1, LEAST($2::int8, c.last_seq + 1) FROM {s}.conversations c WHERE c.id = $1
		ON CONFLICT (conversation_id) DO UPDATE SET floor = GREATEST({s}.message_floors.floor, excluded.floor)
		RETURNING floor`
	sqlExpireBatch = `DELETE FROM {s}.messages WHERE conversation_id = $1 AND seq IN (
			SELECT seq FROM {s}.messages WHERE conversation_id = $1 AND seq < $2 ORDER BY seq LIMIT $3)
		RETURNING seq, body, crc`
	sqlDeleteRefs = `DELETE FROM {s}.messages m USING unnest($1::text[], $2::int8[]) AS r(conv, seq)
		WHERE m.conversation_id = r.conv AND m.seq = r.seq
		RETURNING m.conversation_id, m.seq, m.body, m.crc`
	sqlExpiring = `SELECT conversation_id, seq FROM {s}.messages
		WHERE expires_at IS NOT NULL AND expires_at <= $1 ORDER BY expires_at LIMIT $2`
	sqlStoredConvs = `SELECT id FROM {s}.conversations WHERE id > $1 ORDER BY id LIMIT $2`
)

// derivedBelow deletes the rows derived from a conversation's messages
// below a seq ($1 conversation, $2 seq).
var derivedBelow = []string{
	`DELETE FROM {s}.reactions WHERE conversation_id = $1 AND seq < $2`,
	`DELETE FROM {s}.reaction_counts WHERE conversation_id = $1 AND seq < $2`,
	`DELETE FROM {s}.reaction_messages WHERE conversation_id = $1 AND seq < $2`,
	`DELETE FROM {s}.pins WHERE conversation_id = $1 AND seq < $2`,
	`DELETE FROM {s}.mentions_all WHERE conversation_id = $1 AND seq < $2`,
	`DELETE FROM {s}.thread_replies WHERE conversation_id = $1 AND root < $2`,
	`DELETE FROM {s}.threads WHERE conversation_id = $1 AND root < $2`,
	`DELETE FROM {s}.thread_participants WHERE conversation_id = $1 AND root < $2`,
	sqlDropFilesBelow,
}

// derivedOf deletes the rows derived from given messages ($1 conversations,
// $2 seqs).
var derivedOf = []string{
	`DELETE FROM {s}.reactions t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.seq = r.q`,
	`DELETE FROM {s}.reaction_counts t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.seq = r.q`,
	`DELETE FROM {s}.reaction_messages t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.seq = r.q`,
	`DELETE FROM {s}.pins t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.seq = r.q`,
	`DELETE FROM {s}.mentions_all t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.seq = r.q`,
	`DELETE FROM {s}.thread_replies t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND (t.root = r.q OR t.seq = r.q)`,
	`DELETE FROM {s}.threads t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.root = r.q`,
	`DELETE FROM {s}.thread_participants t USING unnest($1::text[], $2::int8[]) AS r(c, q) WHERE t.conversation_id = r.c AND t.root = r.q`,
	sqlDropFilesOf,
}

// sqlDeleteMentions deletes mentions by name ($1 users, $2 conversations, $3 seqs).
const sqlDeleteMentions = `DELETE FROM {s}.mentions t USING unnest($1::text[], $2::text[], $3::int8[]) AS r(u, c, q)
	WHERE t.user_id = r.u AND t.conversation_id = r.c AND t.seq = r.q`

func (s *Store) rsql(sql string) string { return retentionSQL(s.q.schema, sql) }

// MessageFloor implements store.Retention.
func (s *Store) MessageFloor(ctx context.Context, conv string) (uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var f int64
	err = s.pool.QueryRow(ctx, s.rsql(sqlFloor), conv).Scan(&f)
	if err == pgx.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, mapErr("message floor", err)
	}
	return uint64(f), nil
}

// ExpiryUnfinished implements store.Retention: a message is still stored
// below the floor.
func (s *Store) ExpiryUnfinished(ctx context.Context, conv string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	var left bool
	if err := s.pool.QueryRow(ctx, s.rsql(sqlBelowFloor), conv).Scan(&left); err != nil {
		return false, mapErr("expiry unfinished", err)
	}
	return left, nil
}

// mentionRows collects the mentions by name of deleted messages.
type mentionRows struct {
	users, convs []string
	seqs         []int64
}

func (r *mentionRows) add(s *Store, conv string, seq int64, body []byte, crc int32) {
	m, err := s.decode(conv, seq, body, crc)
	if err != nil || m == nil {
		return // corrupt: no mentions to find (its row is gone all the same)
	}
	for _, u := range m.Mentions {
		r.users, r.convs, r.seqs = append(r.users, u), append(r.convs, conv), append(r.seqs, seq)
	}
}

// ExpireBefore implements store.Retention: one transaction raises the floor
// and deletes one batch with its derived rows. Another node doing the same
// waits for the row locks and then finds the rows gone.
func (s *Store) ExpireBefore(ctx context.Context, conv string, floor uint64, limit int) (removed []store.MessageRef, more bool, err error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, false, err
	}
	defer done()
	limit = max(limit, 1)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		removed, more = nil, false
		var f *int64
		if err := tx.QueryRow(ctx, s.rsql(sqlRaiseFloor), conv, int64(min(floor, 1<<62))).Scan(&f); err != nil {
			if err == pgx.ErrNoRows {
				return nil // no such conversation
			}
			return err
		}
		if f == nil || *f <= 1 {
			return nil
		}
		rows, err := tx.Query(ctx, s.rsql(sqlExpireBatch), conv, *f, limit)
		if err != nil {
			return err
		}
		var ments mentionRows
		top := int64(0)
		for rows.Next() {
			var seq int64
			var body []byte
			var crc int32
			if err := rows.Scan(&seq, &body, &crc); err != nil {
				rows.Close()
				return err
			}
			ments.add(s, conv, seq, body, crc)
			removed = append(removed, store.MessageRef{ConversationID: conv, Seq: uint64(seq)})
			top = max(top, seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		upTo := *f
		if len(removed) == limit {
			more, upTo = true, top+1
		}
		for _, q := range derivedBelow {
			if _, err := tx.Exec(ctx, s.rsql(q), conv, upTo); err != nil {
				return err
			}
		}
		if len(ments.users) > 0 {
			if _, err := tx.Exec(ctx, s.rsql(sqlDeleteMentions), ments.users, ments.convs, ments.seqs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, mapErr("expire messages", err)
	}
	sortRefs(removed)
	return removed, more, nil
}

func sortRefs(r []store.MessageRef) {
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && (r[j].ConversationID < r[j-1].ConversationID ||
			(r[j].ConversationID == r[j-1].ConversationID && r[j].Seq < r[j-1].Seq)); j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}

// DeleteMessages implements store.Retention.
func (s *Store) DeleteMessages(ctx context.Context, refs []store.MessageRef) ([]store.MessageRef, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if len(refs) == 0 {
		return nil, nil
	}
	convs, seqs := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		convs[i], seqs[i] = r.ConversationID, int64(min(r.Seq, 1<<62))
	}
	var out []store.MessageRef
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, s.rsql(sqlDeleteRefs), convs, seqs)
		if err != nil {
			return err
		}
		var ments mentionRows
		for rows.Next() {
			var conv string
			var seq int64
			var body []byte
			var crc int32
			if err := rows.Scan(&conv, &seq, &body, &crc); err != nil {
				rows.Close()
				return err
			}
			ments.add(s, conv, seq, body, crc)
			out = append(out, store.MessageRef{ConversationID: conv, Seq: uint64(seq)})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, q := range derivedOf {
			if _, err := tx.Exec(ctx, s.rsql(q), convs, seqs); err != nil {
				return err
			}
		}
		if len(ments.users) > 0 {
			if _, err := tx.Exec(ctx, s.rsql(sqlDeleteMentions), ments.users, ments.convs, ments.seqs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, mapErr("delete messages", err)
	}
	sortRefs(out)
	return out, nil
}

// ExpiringMessages implements store.Retention (the messages_expiry index).
func (s *Store) ExpiringMessages(ctx context.Context, t time.Time, limit int) ([]store.MessageRef, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.rsql(sqlExpiring), t.UnixMilli(), limit)
	if err != nil {
		return nil, mapErr("expiring messages", err)
	}
	defer rows.Close()
	var out []store.MessageRef
	for rows.Next() {
		var r store.MessageRef
		var seq int64
		if err := rows.Scan(&r.ConversationID, &seq); err != nil {
			return nil, mapErr("expiring messages", err)
		}
		r.Seq = uint64(seq)
		out = append(out, r)
	}
	return out, mapErr("expiring messages", rows.Err())
}

// StoredConversations implements store.Retention.
func (s *Store) StoredConversations(ctx context.Context, after string, limit int) ([]string, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.rsql(sqlStoredConvs), after, limit)
	if err != nil {
		return nil, mapErr("conversations", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr("conversations", err)
		}
		out = append(out, id)
	}
	return out, mapErr("conversations", rows.Err())
}

// ReclaimSpace implements store.Retention: a plain VACUUM of the tables
// rows were deleted from (not VACUUM FULL, which would lock them against
// every read and write while it copies them). It marks the dead rows'
// space reusable; autovacuum would do the same later on its own schedule.
func (s *Store) ReclaimSpace(ctx context.Context, conv string, floor uint64) error {
	if conv != "" {
		return nil // one VACUUM per sweep round, not per conversation
	}
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.pool.Exec(ctx, s.rsql(`VACUUM (ANALYZE) {s}.messages, {s}.reactions, {s}.reaction_counts, {s}.reaction_messages, {s}.mentions, {s}.mentions_all, {s}.message_files`))
	return mapErr("vacuum", err)
}
