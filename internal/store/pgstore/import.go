package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/migrate"
	"github.com/parleyim/parley/internal/store"
)

// Import (parley migrate): the store as a migrate.Sink. Each batch is
// loaded with COPY in one transaction that also records the source
// position after it (migrate_progress), so an interrupted migration
// continues from its last committed batch and loads nothing twice.
//
// The two bookkeeping tables belong to the migration, not to the server's
// schema: Start creates them, and they stay afterwards as the record that
// this schema's data came from a migration (and from which source).
//
// Each kind's importer is an entry of importers (adding a kind: see
// internal/migrate/records.go). Rows are written as pgstore's own writes
// write them: message bodies without their seq and with their checksum,
// search columns filled (searchRowOf), zero times as NULL.

// importer loads one kind. Most copy one row per record into one table
// (table, cols, row); the others write with write. count counts the
// target's records of the kind, as the source counts them.
type importer struct {
	table string
	cols  []string
	row   func(rec any) ([]any, error)
	write func(ctx context.Context, tx pgx.Tx, s *Store, recs []any) error
	count string
}

// migrateLockClass is the first key of the advisory lock held by a running
// migration (the second is the schema's hash): two runs never interleave.
const migrateLockClass = 0x50617232 // "Par2"

var importers = map[migrate.Kind]importer{
	"users": {table: "users", cols: []string{"id", "password_hash", "token_epoch", "disabled", "shadow_muted", "created_at", "bot"},
		row: func(rec any) ([]any, error) {
			u := rec.(store.User)
			return []any{u.ID, u.PasswordHash, int64(u.TokenEpoch), u.Disabled, u.ShadowMuted, timestamp(u.CreatedAt), u.Bot}, nil
		}},
	"usernames": {write: writeUsernames, count: `SELECT count(*) FROM {s}.users WHERE name_key IS NOT NULL`},
	// Expired revocations are not copied (the source skips them too): an
	// expired token is refused anyway, and pgstore purges them.
	"revoked_tokens": {table: "revoked_tokens", cols: []string{"id", "expires_at"},
		row: func(rec any) ([]any, error) {
			t := rec.(migrate.RevokedToken)
			return []any{t.ID, t.Expires}, nil
		}, count: `SELECT count(*) FROM {s}.revoked_tokens WHERE expires_at > now()`},
	"last_seqs": {table: "conversations", cols: []string{"id", "last_seq"},
		row: func(rec any) ([]any, error) {
			l := rec.(migrate.LastSeq)
			return []any{l.Conv, int64(l.Seq)}, nil
		}},
	"messages": {write: writeMessages, count: `SELECT count(*) FROM {s}.messages`},
	"dedup":    {write: checkDedup, count: `SELECT count(*) FROM {s}.messages WHERE client_msg_id IS NOT NULL`},
	"conversation_lists": {table: "user_conversations", cols: []string{"user_id", "conversation_id"},
		row: func(rec any) ([]any, error) {
			e := rec.(migrate.ConvEntry)
			return []any{e.User, e.Conv}, nil
		}},
	"cursors": {table: "cursors", cols: []string{"conversation_id", "user_id", "delivered_seq", "read_seq"},
		row: func(rec any) ([]any, error) {
			c := rec.(store.Cursor)
			return []any{c.ConversationID, c.UserID, int64(c.Delivered), int64(c.Read)}, nil
		}},
	"groups": {table: "groups", cols: []string{"conversation_id", "name", "avatar_url", "announcement", "owner_id", "open_join",
		"mute_all", "dissolved", "created_at", "add_policy", "history_visibility", "members_mention_all"},
		row: func(rec any) ([]any, error) {
			g := rec.(store.Group)
			return []any{g.ConversationID, g.Name, g.AvatarURL, g.Announcement, g.Owner, g.OpenJoin, g.MuteAll, g.Dissolved,
				timestamp(g.CreatedAt), int32(g.AddPolicy), int32(g.HistoryVisibility), g.MembersMentionAll}, nil
		}},
	"members":      memberImporter(false),
	"past_members": memberImporter(true),
	"conversation_settings": {table: "conversation_settings", cols: []string{"user_id", "conversation_id", "pinned", "muted", "cleared_seq"},
		row: func(rec any) ([]any, error) {
			c := rec.(migrate.ConvSettings)
			return []any{c.User, c.Conv, c.Pinned, c.Muted, int64(c.ClearedSeq)}, nil
		}},
	"hidden_messages": {table: "hidden_messages", cols: []string{"user_id", "conversation_id", "seq"},
		row: func(rec any) ([]any, error) {
			h := rec.(migrate.Hidden)
			return []any{h.User, h.Conv, int64(h.Seq)}, nil
		}},
	"contacts": {table: "contacts", cols: []string{"owner_id", "user_id", "state", "note", "updated_at"},
		row: func(rec any) ([]any, error) {
			c := rec.(migrate.Contact)
			return []any{c.Owner, c.UserID, int32(c.State), c.Note, timestamp(c.UpdatedAt)}, nil
		}},
	"blocks": {table: "blocks", cols: []string{"owner_id", "user_id"},
		row: func(rec any) ([]any, error) {
			b := rec.(migrate.Block)
			return []any{b.Owner, b.User}, nil
		}},
	"last_seen": {table: "last_seen", cols: []string{"user_id", "seen_at"},
		row: func(rec any) ([]any, error) {
			l := rec.(migrate.LastSeen)
			return []any{l.User, l.At}, nil
		}},
	"storage_usage": {table: "user_storage", cols: []string{"user_id", "bytes"},
		row: func(rec any) ([]any, error) {
			u := rec.(migrate.Usage)
			return []any{u.User, int64(u.Bytes)}, nil
		}},
	"push_targets": {table: "push_targets", cols: []string{"user_id", "device_id", "kind", "token", "topic", "sandbox", "p256dh", "auth",
		"token_id", "updated_at"},
		row: func(rec any) ([]any, error) {
			t := rec.(store.PushTarget)
			return []any{t.UserID, t.DeviceID, t.Kind, t.Token, t.Topic, t.Sandbox, t.P256dh, t.Auth, t.TokenID, t.UpdatedAt}, nil
		}},
	"files": {table: "files", cols: []string{"id", "owner_id", "name", "size", "content_type", "width", "height", "duration_ms",
		"blurhash", "blob_key", "thumb_key", "created_at", "attached"},
		row: func(rec any) ([]any, error) {
			f := rec.(store.File)
			return []any{f.ID, f.Owner, f.Name, f.Size, f.ContentType, f.Width, f.Height, f.DurationMs, f.Blurhash, f.BlobKey,
				f.ThumbKey, f.CreatedAt, f.Attached}, nil
		}},
	"reports": {table: "reports", cols: []string{"id", "reporter", "conversation_id", "seq", "reason", "note", "message", "created_at",
		"status", "closed_by", "closed_at", "resolution"},
		row: func(rec any) ([]any, error) {
			r := rec.(store.Report)
			var msg []byte // NULL: no message
			if r.Message != nil {
				var err error
				if msg, err = proto.Marshal(r.Message); err != nil {
					return nil, fmt.Errorf("report %q: %w", r.ID, err)
				}
				if msg == nil {
					msg = []byte{}
				}
			}
			return []any{r.ID, r.Reporter, r.ConversationID, int64(r.Seq), r.Reason, r.Note, msg, timestamp(r.CreatedAt),
				int16(r.Status), r.ClosedBy, timestamp(r.ClosedAt), r.Resolution}, nil
		}},
	// Ids kept; Finish moves the id sequence past them.
	"audit_log": {table: "audit_log", cols: []string{"id", "at", "actor", "action", "target", "detail"},
		row: func(rec any) ([]any, error) {
			e := rec.(store.AuditEntry)
			return []any{int64(e.ID), timestamp(e.Time), e.Actor, e.Action, e.Target, e.Detail}, nil
		}},
	"settings": {table: "settings", cols: []string{"key", "value"},
		row: func(rec any) ([]any, error) {
			s := rec.(migrate.Setting)
			return []any{s.Key, s.Value}, nil
		}},
	"reactions": {table: "reactions", cols: []string{"conversation_id", "seq", "user_id", "emoji"},
		row: func(rec any) ([]any, error) {
			r := rec.(migrate.Reaction)
			return []any{r.Conv, int64(r.Seq), r.User, r.Emoji}, nil
		}},
	"reaction_counts": {write: writeReactionCounts,
		count: `SELECT (SELECT count(*) FROM {s}.reaction_counts) + (SELECT count(*) FROM {s}.reaction_messages)`},
	"reaction_versions": {table: "reaction_versions", cols: []string{"conversation_id", "version"},
		row: func(rec any) ([]any, error) {
			v := rec.(migrate.ReactionVersion)
			return []any{v.Conv, int64(v.Version)}, nil
		}},
	"pins": {table: "pins", cols: []string{"conversation_id", "seq", "pinned_by", "pinned_at", "event_seq"},
		row: func(rec any) ([]any, error) {
			p := rec.(migrate.Pin)
			return []any{p.Conv, int64(p.Seq), p.By, timestamp(p.At), int64(p.Order)}, nil
		}},
	"thread_replies": {table: "thread_replies", cols: []string{"conversation_id", "root", "seq"},
		row: func(rec any) ([]any, error) {
			t := rec.(migrate.ThreadReply)
			return []any{t.Conv, int64(t.Root), int64(t.Seq)}, nil
		}},
	"threads": {table: "threads", cols: []string{"conversation_id", "root", "reply_count", "last_reply_seq", "last_reply_at"},
		row: func(rec any) ([]any, error) {
			t := rec.(migrate.Thread)
			return []any{t.Conv, int64(t.Root), int64(t.ReplyCount), int64(t.LastReplySeq), t.LastReplyAt}, nil
		}},
	"thread_participants": {table: "thread_participants", cols: []string{"conversation_id", "root", "user_id"},
		row: func(rec any) ([]any, error) {
			t := rec.(migrate.ThreadUser)
			return []any{t.Conv, int64(t.Root), t.User}, nil
		}},
	"mentions": {table: "mentions", cols: []string{"user_id", "conversation_id", "seq"},
		row: func(rec any) ([]any, error) {
			m := rec.(migrate.Mention)
			return []any{m.User, m.Conv, int64(m.Seq)}, nil
		}},
	"message_floors": {table: "message_floors", cols: []string{"conversation_id", "floor"},
		row: func(rec any) ([]any, error) {
			f := rec.(migrate.Floor)
			return []any{f.Conv, int64(f.Floor)}, nil
		}},
	"mentions_all": {table: "mentions_all", cols: []string{"conversation_id", "seq", "sender"},
		row: func(rec any) ([]any, error) {
			m := rec.(migrate.MentionAll)
			return []any{m.Conv, int64(m.Seq), m.Sender}, nil
		}},
}

func memberImporter(left bool) importer {
	cond := "NOT has_left"
	if left {
		cond = "has_left"
	}
	return importer{table: "members", cols: []string{"conversation_id", "user_id", "role", "muted_until", "joined_at", "has_left",
		"left_seq", "join_seq"},
		row: func(rec any) ([]any, error) {
			m := rec.(migrate.Member)
			if m.Left != left {
				return nil, fmt.Errorf("member %q of %q: left is %v", m.UserID, m.Conv, m.Left)
			}
			return []any{m.Conv, m.UserID, int32(m.Role), timestamp(m.MutedUntil), timestamp(m.JoinedAt), m.Left,
				int64(m.LeftSeq), int64(m.JoinSeq)}, nil
		}, count: `SELECT count(*) FROM {s}.members WHERE ` + cond}
}

// writeMessages copies messages as Append stores them.
func writeMessages(ctx context.Context, tx pgx.Tx, s *Store, recs []any) error {
	rows := make([][]any, len(recs))
	var fileIDs, fileConvs []string // message_files, rebuilt from the attachments
	var fileSeqs []int64
	for i, rec := range recs {
		m := rec.(migrate.Message).Msg
		for _, a := range m.Attachments {
			if a.GetId() != "" && strings.IndexByte(a.Id, 0) < 0 {
				fileIDs, fileConvs, fileSeqs = append(fileIDs, a.Id), append(fileConvs, m.ConversationId), append(fileSeqs, int64(m.Seq))
			}
		}
		body, crc, err := s.encode(m)
		if err != nil {
			return err
		}
		var cmid *string // NULL: never a duplicate
		if m.ClientMsgId != "" {
			cmid = &m.ClientMsgId
		}
		var exp *int64 // NULL: never disappears (as Append stores it)
		if m.ExpiresAt != 0 {
			exp = &m.ExpiresAt
		}
		r := searchRowOf(m)
		rows[i] = []any{m.ConversationId, int64(m.Seq), m.From, cmid, body, crc, r.norm, r.time, r.ctype, r.att, r.senderOnly, exp}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"messages"}, []string{"conversation_id", "seq", "sender", "client_msg_id", "body", "crc",
		"search_norm", "server_time", "content_type", "has_attachment", "sender_only", "expires_at"}, pgx.CopyFromRows(rows))
	if err != nil || len(fileIDs) == 0 {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO message_files (file_id, conversation_id, seq)
		SELECT * FROM unnest($1::text[], $2::text[], $3::int8[]) ON CONFLICT DO NOTHING`, fileIDs, fileConvs, fileSeqs)
	return err
}

// checkDedup checks that each de-dup record names a copied message with
// its sender and client id: a resend after the move is then answered with
// the original (Append's lookup finds it by the message row's columns).
func checkDedup(ctx context.Context, tx pgx.Tx, s *Store, recs []any) error {
	n := len(recs)
	froms, ids, convs, seqs := make([]string, n), make([]string, n), make([]string, n), make([]int64, n)
	for i, rec := range recs {
		d := rec.(migrate.Dedup)
		froms[i], ids[i], convs[i], seqs[i] = d.From, d.ClientMsgID, d.Conv, int64(d.Seq)
	}
	// Index probes, whatever the fresh table's statistics say (a hash
	// join scanned the whole messages table for every batch).
	if _, err := tx.Exec(ctx, s.q.probeJoins); err != nil {
		return err
	}
	var found int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[]) AS k(f, c, cv, s)
		JOIN messages m ON m.conversation_id = k.cv AND m.seq = k.s AND m.sender = k.f AND m.client_msg_id = k.c`,
		froms, ids, convs, seqs).Scan(&found)
	if err != nil {
		return err
	}
	if found != n {
		return fmt.Errorf("%d of %d de-dup records do not name a message with their sender and client id", n-found, n)
	}
	return nil
}

// writeUsernames sets the users' name keys (users are copied first).
func writeUsernames(ctx context.Context, tx pgx.Tx, s *Store, recs []any) error {
	names, ids := make([]string, len(recs)), make([]string, len(recs))
	for i, rec := range recs {
		u := rec.(migrate.UserName)
		names[i], ids[i] = u.NameKey, u.UserID
	}
	tag, err := tx.Exec(ctx, `UPDATE users u SET name_key = k.n FROM unnest($1::text[], $2::text[]) AS k(n, id) WHERE u.id = k.id`,
		names, ids)
	if err != nil {
		return err
	}
	if int(tag.RowsAffected()) != len(recs) {
		return fmt.Errorf("%d of %d usernames name no user", len(recs)-int(tag.RowsAffected()), len(recs))
	}
	return nil
}

// writeReactionCounts copies a message's reaction version and its emoji
// counts, which share the source's namespace, to their two tables.
func writeReactionCounts(ctx context.Context, tx pgx.Tx, s *Store, recs []any) error {
	var vers, counts [][]any
	for _, rec := range recs {
		switch r := rec.(type) {
		case migrate.MessageReactionVersion:
			vers = append(vers, []any{r.Conv, int64(r.Seq), int64(r.Version)})
		case migrate.ReactionCount:
			counts = append(counts, []any{r.Conv, int64(r.Seq), r.Emoji, int64(r.Count), int64(r.Order)})
		default:
			return fmt.Errorf("unexpected record %T", rec)
		}
	}
	if len(vers) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"reaction_messages"}, []string{"conversation_id", "seq", "version"},
			pgx.CopyFromRows(vers)); err != nil {
			return err
		}
	}
	if len(counts) > 0 {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"reaction_counts"}, []string{"conversation_id", "seq", "emoji", "count", "first_version"},
			pgx.CopyFromRows(counts))
		return err
	}
	return nil
}

// Importer returns the store as a migrate.Sink. Close releases its
// connection (and the migration's lock).
func (s *Store) Importer() *Importer { return &Importer{s: s} }

// Importer is a migrate.Sink on the store's schema.
type Importer struct {
	s *Store
	// conn holds the migration's advisory lock and writes every batch.
	conn *pgxpool.Conn
}

var _ migrate.Sink = (*Importer)(nil)

func (im *Importer) sql(q string) string { return strings.ReplaceAll(q, "{s}", im.s.q.schema) }

// Start implements migrate.Sink.
func (im *Importer) Start(ctx context.Context, fingerprint string) (map[migrate.Kind]migrate.Progress, bool, error) {
	if im.conn == nil {
		c, err := im.s.pool.Acquire(ctx)
		if err != nil {
			return nil, false, mapErr("migrate", err)
		}
		// Waits a little: the session of a run just interrupted may
		// still be ending on the server, with the lock.
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '10s'"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, int32(migrateLockClass), im.s.q.schema)
			return err
		})
		if err != nil {
			c.Release()
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
				return nil, false, errors.New("pgstore: another parley migrate is running against this schema")
			}
			return nil, false, mapErr("migrate", err)
		}
		im.conn = c
	}
	conn := im.conn
	var has bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, im.s.q.schema+".migrate_source").Scan(&has); err != nil {
		return nil, false, mapErr("migrate", err)
	}
	if !has {
		if err := im.checkEmpty(ctx); err != nil {
			return nil, false, err
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, im.sql(`
				CREATE TABLE {s}.migrate_source (
					id          integer PRIMARY KEY CHECK (id = 1),
					fingerprint text NOT NULL,
					started_at  timestamptz NOT NULL DEFAULT now(),
					finished_at timestamptz);
				CREATE TABLE {s}.migrate_progress (
					kind    text PRIMARY KEY,
					resume  bytea,
					done    boolean NOT NULL,
					records bigint NOT NULL)`))
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, im.sql(`INSERT INTO {s}.migrate_source (id, fingerprint) VALUES (1, $1)`), fingerprint)
			return err
		})
		if err != nil {
			return nil, false, mapErr("migrate", err)
		}
	}
	var fp string
	var finished *time.Time
	if err := conn.QueryRow(ctx, im.sql(`SELECT fingerprint, finished_at FROM {s}.migrate_source`)).Scan(&fp, &finished); err != nil {
		return nil, false, mapErr("migrate", err)
	}
	if fp != fingerprint {
		return nil, false, fmt.Errorf("%w: it holds a migration from another source (or from this one before it changed): "+
			"use a fresh schema or database", migrate.ErrTargetInUse)
	}
	rows, err := conn.Query(ctx, im.sql(`SELECT kind, resume, done, records FROM {s}.migrate_progress`))
	if err != nil {
		return nil, false, mapErr("migrate", err)
	}
	progress := make(map[migrate.Kind]migrate.Progress)
	var kind string
	var p migrate.Progress
	if _, err := pgx.ForEachRow(rows, []any{&kind, &p.Resume, &p.Done, &p.Records}, func() error {
		progress[migrate.Kind(kind)] = p
		return nil
	}); err != nil {
		return nil, false, mapErr("migrate", err)
	}
	return progress, finished != nil, nil
}

// checkEmpty refuses a schema holding any data: every table is checked,
// the ones added after this code too.
func (im *Importer) checkEmpty(ctx context.Context) error {
	rows, err := im.conn.Query(ctx, `SELECT quote_ident(relname) FROM pg_class
		WHERE relnamespace = to_regnamespace($1) AND relkind = 'r' AND relname NOT IN ('schema_migrations', 'search_backfill')
		ORDER BY relname`, im.s.q.schema)
	if err != nil {
		return mapErr("migrate", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return mapErr("migrate", err)
	}
	for _, t := range tables {
		var nonEmpty bool
		if err := im.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+im.s.q.schema+`.`+t+`)`).Scan(&nonEmpty); err != nil {
			return mapErr("migrate", err)
		}
		if nonEmpty {
			return fmt.Errorf("%w: table %s of schema %s holds data that no migration wrote: migrate into a fresh schema or database",
				migrate.ErrTargetInUse, t, im.s.q.schema)
		}
	}
	return nil
}

// Write implements migrate.Sink: the rows and the progress in one
// transaction.
func (im *Importer) Write(ctx context.Context, kind migrate.Kind, recs []any, next []byte, done bool) error {
	imp, ok := importers[kind]
	if !ok {
		return fmt.Errorf("pgstore: no importer for %q: add one in internal/store/pgstore/import.go", kind)
	}
	if im.conn == nil {
		return errors.New("pgstore: import: Start not called")
	}
	err := pgx.BeginFunc(ctx, im.conn, func(tx pgx.Tx) error {
		// A big batch may take longer than a query's usual bound; the
		// schema's tables are named unqualified by COPY.
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0; SET LOCAL search_path = "+im.s.q.schema); err != nil {
			return err
		}
		if len(recs) > 0 {
			var err error
			if imp.write != nil {
				err = imp.write(ctx, tx, im.s, recs)
			} else {
				rows := make([][]any, len(recs))
				for i, rec := range recs {
					if rows[i], err = imp.row(rec); err != nil {
						return err
					}
				}
				_, err = tx.CopyFrom(ctx, pgx.Identifier{imp.table}, imp.cols, pgx.CopyFromRows(rows))
			}
			if err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, im.sql(`INSERT INTO {s}.migrate_progress AS p (kind, resume, done, records) VALUES ($1, $2, $3, $4)
			ON CONFLICT (kind) DO UPDATE SET resume = excluded.resume, done = excluded.done, records = p.records + excluded.records`),
			string(kind), next, done, int64(len(recs)))
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: import %s: %w", kind, err)
	}
	return nil
}

// Finish implements migrate.Sink: the audit id sequence continues after
// the copied ids, the tables' statistics are refreshed (a freshly loaded
// table's are empty, and plans made from them are slow), and the
// migration is marked complete.
func (im *Importer) Finish(ctx context.Context) error {
	if im.conn == nil {
		return errors.New("pgstore: import: Start not called")
	}
	err := pgx.BeginFunc(ctx, im.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, im.sql(`SELECT setval(pg_get_serial_sequence($1, 'id'), coalesce(max(id), 0) + 1, false) FROM {s}.audit_log`),
			im.s.q.schema+".audit_log"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ANALYZE "+im.tables()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, im.sql(`UPDATE {s}.migrate_source SET finished_at = now()`))
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: import: finish: %w", mapErr("migrate", err))
	}
	return nil
}

// tables lists the loaded tables, schema-qualified.
func (im *Importer) tables() string {
	seen := map[string]bool{"messages": true, "users": true, "reaction_messages": true, "reaction_counts": true}
	for _, imp := range importers {
		if imp.table != "" {
			seen[imp.table] = true
		}
	}
	var out []string
	for t := range seen {
		out = append(out, im.s.q.schema+"."+pgx.Identifier{t}.Sanitize())
	}
	return strings.Join(out, ", ")
}

// Count implements migrate.Sink.
func (im *Importer) Count(ctx context.Context, kind migrate.Kind) (int64, error) {
	imp, ok := importers[kind]
	if !ok {
		return 0, fmt.Errorf("pgstore: no importer for %q", kind)
	}
	q := imp.count
	if q == "" {
		q = `SELECT count(*) FROM {s}.` + pgx.Identifier{imp.table}.Sanitize()
	}
	var n int64
	if err := im.s.pool.QueryRow(ctx, im.sql(q)).Scan(&n); err != nil {
		return 0, mapErr("migrate", err)
	}
	return n, nil
}

// Conversations implements migrate.Sink.
func (im *Importer) Conversations(ctx context.Context, convs []string) (map[string]migrate.ConvStats, error) {
	rows, err := im.s.pool.Query(ctx, im.sql(`SELECT c.id, c.last_seq,
			(SELECT count(*) FROM {s}.messages m WHERE m.conversation_id = c.id)
		FROM unnest($1::text[]) AS k(id) JOIN {s}.conversations c ON c.id = k.id`), convs)
	if err != nil {
		return nil, mapErr("migrate", err)
	}
	out := make(map[string]migrate.ConvStats, len(convs))
	var c migrate.ConvStats
	var last int64
	if _, err := pgx.ForEachRow(rows, []any{&c.Conv, &last, &c.Messages}, func() error {
		c.LastSeq = uint64(last)
		out[c.Conv] = c
		return nil
	}); err != nil {
		return nil, mapErr("migrate", err)
	}
	return out, nil
}

// ConversationCount implements migrate.Sink.
func (im *Importer) ConversationCount(ctx context.Context) (int64, error) {
	var n int64
	if err := im.s.pool.QueryRow(ctx, im.sql(`SELECT count(*) FROM {s}.conversations`)).Scan(&n); err != nil {
		return 0, mapErr("migrate", err)
	}
	return n, nil
}

// Close releases the importer's connection and the migration's lock.
func (im *Importer) Close() {
	if im.conn != nil {
		// The lock is the session's: unlocked, or the session closed
		// (a connection broken by a cancelled query ends it anyway).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := im.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, int32(migrateLockClass), im.s.q.schema); err != nil {
			_ = im.conn.Conn().Close(ctx)
		}
		im.conn.Release()
		im.conn = nil
	}
}
