package pgstore

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Values above math.MaxInt64 do not fit PostgreSQL's bigint. Seqs never
// get there; a client could send such a cursor, which is passed as
// MaxInt64 and clamped to the conversation's last seq by SetCursors. Fields that are only stored and read
// back (epochs, LeftSeq, ClearedSeq) keep all 64 bits as two's complement.
func clampSeq(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

var errEmptyID = errors.New("pgstore: empty id")

// SetCursors implements store.Store: one statement for the whole call,
// committed without waiting for the WAL flush (synchronous_commit off for
// this transaction only): cursors only grow and clients send them again, so
// losing the newest moves in a database crash costs nothing. Values are
// clamped to the conversation's last seq in the statement itself.
func (s *Store) SetCursors(ctx context.Context, cursors []store.Cursor) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if len(cursors) == 0 {
		return nil
	}
	n := len(cursors)
	convs, users, delivered, read := make([]string, n), make([]string, n), make([]int64, n), make([]int64, n)
	for i, c := range cursors {
		convs[i], users[i], delivered[i], read[i] = c.ConversationID, c.UserID, clampSeq(c.Delivered), clampSeq(c.Read)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
	b.Queue(s.q.setCursors, convs, users, delivered, read)
	return mapErr("set cursors", s.pool.SendBatch(ctx, b).Close())
}

// GetCursor implements store.Store.
func (s *Store) GetCursor(ctx context.Context, conversationID, userID string) (store.Cursor, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.Cursor{}, err
	}
	defer done()
	c := store.Cursor{ConversationID: conversationID, UserID: userID}
	var d, r int64
	err = s.pool.QueryRow(ctx, s.q.getCursor, conversationID, userID).Scan(&d, &r)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, nil
	}
	if err != nil {
		return store.Cursor{}, mapErr("get cursor", err)
	}
	c.Delivered, c.Read = uint64(d), uint64(r)
	return c, nil
}

// Cursors implements store.Store.
func (s *Store) Cursors(ctx context.Context, conversationID string) ([]store.Cursor, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.pool.Query(ctx, s.q.cursorsOf, conversationID)
	if err != nil {
		return nil, mapErr("cursors", err)
	}
	var out []store.Cursor
	var user string
	var d, r int64
	_, err = pgx.ForEachRow(rows, []any{&user, &d, &r}, func() error {
		out = append(out, store.Cursor{ConversationID: conversationID, UserID: user, Delivered: uint64(d), Read: uint64(r)})
		return nil
	})
	if err != nil {
		return nil, mapErr("cursors", err)
	}
	return out, nil
}

// CreateUser implements store.Store.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	return s.writeUser(ctx, "create user", s.q.createUser, u, store.ErrExists, u.NameKey)
}

// UserByName implements store.Store.
func (s *Store) UserByName(ctx context.Context, key string) (store.User, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.User{}, err
	}
	defer done()
	var u store.User
	var epoch int64
	var created pgtype.Timestamptz
	err = s.pool.QueryRow(ctx, s.q.userByName, key).Scan(&u.ID, &u.PasswordHash, &epoch, &u.Disabled, &u.ShadowMuted, &created, &u.Bot)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.User{}, store.ErrNotFound
	}
	if err != nil {
		return store.User{}, mapErr("user by name", err)
	}
	u.TokenEpoch, u.CreatedAt = uint64(epoch), fromTimestamp(created)
	return u, nil
}

// UpdateUser implements store.Store.
func (s *Store) UpdateUser(ctx context.Context, u store.User) error {
	return s.writeUser(ctx, "update user", s.q.updateUser, u, store.ErrNotFound)
}

// writeUser runs an insert or update of u; noRow is the error when it
// touched no row (the user exists, or does not).
func (s *Store) writeUser(ctx context.Context, op, sql string, u store.User, noRow error, extra ...any) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if u.ID == "" {
		return errEmptyID
	}
	args := append([]any{u.ID, u.PasswordHash, int64(u.TokenEpoch), u.Disabled, u.ShadowMuted, timestamp(u.CreatedAt), u.Bot}, extra...)
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return noRow
	}
	return nil
}

// GetUser implements store.Store.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.User{}, err
	}
	defer done()
	u := store.User{ID: id}
	var epoch int64
	var created pgtype.Timestamptz
	err = s.pool.QueryRow(ctx, s.q.getUser, id).Scan(&u.PasswordHash, &epoch, &u.Disabled, &u.ShadowMuted, &created, &u.Bot)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.User{}, store.ErrNotFound
	}
	if err != nil {
		return store.User{}, mapErr("get user", err)
	}
	u.TokenEpoch, u.CreatedAt = uint64(epoch), fromTimestamp(created)
	return u, nil
}

// RevokeToken implements store.Store. Revoking an id twice keeps the later
// expiry. Expired rows are purged at Open and at most hourly here.
func (s *Store) RevokeToken(ctx context.Context, tokenID string, expires time.Time) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.pool.Exec(ctx, s.q.revokeToken, tokenID, expires); err != nil {
		return mapErr("revoke token", err)
	}
	s.purgeTokens(ctx, time.Now())
	return nil
}

// TokenRevoked implements store.Store. A row past its expiry answers true
// until purged: the token has expired anyway.
func (s *Store) TokenRevoked(ctx context.Context, tokenID string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	return s.exists(ctx, "token revoked", s.q.tokenRevoked, tokenID)
}

// purgeTokens deletes expired revocations unless done less than
// tokenPurgeInterval ago. A failure only keeps expired rows longer, so it
// is logged and not returned.
func (s *Store) purgeTokens(ctx context.Context, now time.Time) {
	s.purgeMu.Lock()
	due := now.Sub(s.lastPurge) >= tokenPurgeInterval
	if due {
		s.lastPurge = now
	}
	s.purgeMu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q.purgeTokens, now); err != nil {
		s.log.Warn("pgstore: purging expired token revocations", "err", err)
	}
}

// exists runs a SELECT EXISTS query.
func (s *Store) exists(ctx context.Context, op, sql string, args ...any) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&ok); err != nil {
		return false, mapErr(op, err)
	}
	return ok, nil
}

// GetGroup implements store.Store.
func (s *Store) GetGroup(ctx context.Context, conversationID string) (store.Group, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.Group{}, err
	}
	defer done()
	g := store.Group{ConversationID: conversationID}
	var created pgtype.Timestamptz
	var addPolicy, visibility int32
	err = s.pool.QueryRow(ctx, s.q.getGroup, conversationID).Scan(
		&g.Name, &g.AvatarURL, &g.Announcement, &g.Owner, &g.OpenJoin, &g.MuteAll, &g.Dissolved, &created, &addPolicy, &visibility,
		&g.MembersMentionAll)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Group{}, store.ErrNotFound
	}
	if err != nil {
		return store.Group{}, mapErr("get group", err)
	}
	g.CreatedAt = fromTimestamp(created)
	g.AddPolicy, g.HistoryVisibility = pb.GroupAddPolicy(addPolicy), pb.HistoryVisibility(visibility)
	return g, nil
}

// memberScanner scans the member columns of getMember and membersAfter.
type memberScanner struct {
	m             store.Member
	role          int32
	muted, joined pgtype.Timestamptz
	leftSeq       int64
	joinSeq       int64
}

func (ms *memberScanner) dest() []any {
	return []any{&ms.m.UserID, &ms.role, &ms.muted, &ms.joined, &ms.m.Left, &ms.leftSeq, &ms.joinSeq}
}

func (ms *memberScanner) member() store.Member {
	m := ms.m
	m.Role, m.MutedUntil, m.JoinedAt, m.LeftSeq = pb.GroupRole(ms.role), fromTimestamp(ms.muted), fromTimestamp(ms.joined), uint64(ms.leftSeq)
	m.JoinSeq = uint64(ms.joinSeq)
	return m
}

// GetMember implements store.Store.
func (s *Store) GetMember(ctx context.Context, conversationID, userID string) (store.Member, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.Member{}, err
	}
	defer done()
	var ms memberScanner
	err = s.pool.QueryRow(ctx, s.q.getMember, conversationID, userID).Scan(ms.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Member{}, store.ErrNotFound
	}
	if err != nil {
		return store.Member{}, mapErr("get member", err)
	}
	return ms.member(), nil
}

// Members implements store.Store: an index range scan of the current
// members (members_current) from after. limit <= 0 returns none.
func (s *Store) Members(ctx context.Context, conversationID, after string, limit int) ([]store.Member, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.membersAfter, conversationID, after, limit)
	if err != nil {
		return nil, mapErr("members", err)
	}
	var out []store.Member
	var ms memberScanner
	_, err = pgx.ForEachRow(rows, ms.dest(), func() error {
		out = append(out, ms.member())
		return nil
	})
	if err != nil {
		return nil, mapErr("members", err)
	}
	return out, nil
}
