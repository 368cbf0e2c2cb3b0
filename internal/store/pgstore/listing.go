package pgstore

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// ListUsers implements store.Store: one index range scan of users by id.
func (s *Store) ListUsers(ctx context.Context, q store.ListQuery) ([]store.User, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if q.Limit <= 0 {
		return nil, nil
	}
	sql, args := listArgs(s.q.listUsers, s.q.listUsersTo, q)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr("list users", err)
	}
	defer rows.Close()
	var out []store.User
	size := 0
	for rows.Next() {
		var u store.User
		var epoch int64
		var created pgtype.Timestamptz
		if err := rows.Scan(&u.ID, &u.PasswordHash, &epoch, &u.Disabled, &u.ShadowMuted, &created, &u.Bot); err != nil {
			return nil, mapErr("list users", err)
		}
		u.TokenEpoch, u.CreatedAt = uint64(epoch), fromTimestamp(created)
		out = append(out, u)
		if size += u.Size(); q.MaxBytes > 0 && size >= q.MaxBytes {
			return out, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list users", err)
	}
	return out, nil
}

// ListGroups implements store.Store, as ListUsers.
func (s *Store) ListGroups(ctx context.Context, q store.ListQuery) ([]store.Group, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if q.Limit <= 0 {
		return nil, nil
	}
	sql, args := listArgs(s.q.listGroups, s.q.listGroupsTo, q)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr("list groups", err)
	}
	defer rows.Close()
	var out []store.Group
	size := 0
	for rows.Next() {
		var g store.Group
		var created pgtype.Timestamptz
		var addPolicy, visibility int32
		if err := rows.Scan(&g.ConversationID, &g.Name, &g.AvatarURL, &g.Announcement, &g.Owner, &g.OpenJoin, &g.MuteAll,
			&g.Dissolved, &created, &addPolicy, &visibility, &g.MembersMentionAll); err != nil {
			return nil, mapErr("list groups", err)
		}
		g.CreatedAt = fromTimestamp(created)
		g.AddPolicy, g.HistoryVisibility = pb.GroupAddPolicy(addPolicy), pb.HistoryVisibility(visibility)
		out = append(out, g)
		if size += g.Size(); q.MaxBytes > 0 && size >= q.MaxBytes {
			return out, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("list groups", err)
	}
	return out, nil
}

// listArgs picks the listing statement for q and its arguments: the
// bounded form when the prefix's range has an end.
func listArgs(open, bounded string, q store.ListQuery) (string, []any) {
	if end, ok := prefixEnd(q.Prefix); ok {
		return bounded, []any{q.After, q.Prefix, q.Limit, end}
	}
	return open, []any{q.After, q.Prefix, q.Limit}
}

// prefixEnd returns the least string above every string that starts with
// prefix, in "C" order (UTF-8 bytes, so code point order): prefix with its
// last code point raised by one, after dropping trailing U+10FFFF. False
// when there is none (an empty prefix, or only U+10FFFF).
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, n := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-n]
		if r == utf8.RuneError && n == 1 {
			return "", false // not UTF-8: PostgreSQL refuses it anyway
		}
		if r == utf8.MaxRune {
			continue
		}
		r++
		if r >= 0xD800 && r <= 0xDFFF { // surrogates are not characters
			r = 0xE000
		}
		var b strings.Builder
		b.WriteString(prefix)
		b.WriteRune(r)
		return b.String(), true
	}
	return "", false
}

// DiskSize implements store.Store: the schema's tables with their indexes
// and TOAST, as PostgreSQL accounts them.
func (s *Store) DiskSize(ctx context.Context) (int64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.diskSize, s.q.schema).Scan(&n); err != nil {
		return 0, mapErr("disk size", err)
	}
	return n, nil
}
