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

// SetConversationSettings implements store.Store.
func (s *Store) SetConversationSettings(ctx context.Context, userID, conversationID string, cs store.ConversationSettings) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.pool.Exec(ctx, s.q.setSettings, userID, conversationID, cs.Pinned, cs.Muted, int64(cs.ClearedSeq))
	return mapErr("set settings", err)
}

// GetConversationSettings implements store.Store.
func (s *Store) GetConversationSettings(ctx context.Context, userID, conversationID string) (store.ConversationSettings, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.ConversationSettings{}, err
	}
	defer done()
	var cs store.ConversationSettings
	var cleared int64
	err = s.pool.QueryRow(ctx, s.q.getSettings, userID, conversationID).Scan(&cs.Pinned, &cs.Muted, &cleared)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ConversationSettings{}, nil
	}
	if err != nil {
		return store.ConversationSettings{}, mapErr("get settings", err)
	}
	cs.ClearedSeq = uint64(cleared)
	return cs, nil
}

// HideMessages implements store.Store in one statement. Seqs above
// math.MaxInt64 are skipped: no message can have them.
func (s *Store) HideMessages(ctx context.Context, userID, conversationID string, seqs []uint64) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	vals := make([]int64, 0, len(seqs))
	for _, seq := range seqs {
		if seq <= math.MaxInt64 {
			vals = append(vals, int64(seq))
		}
	}
	if len(vals) == 0 {
		return nil
	}
	_, err = s.pool.Exec(ctx, s.q.hideMessages, userID, conversationID, vals)
	return mapErr("hide messages", err)
}

// HiddenMessages implements store.Store.
func (s *Store) HiddenMessages(ctx context.Context, userID, conversationID string, from, to uint64) ([]uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if from > to || from > math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.hiddenMessages, userID, conversationID, int64(from), clampSeq(to))
	if err != nil {
		return nil, mapErr("hidden messages", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (uint64, error) {
		var v int64
		err := r.Scan(&v)
		return uint64(v), err
	})
	if err != nil {
		return nil, mapErr("hidden messages", err)
	}
	return out, nil
}

// PutContact implements store.Store.
func (s *Store) PutContact(ctx context.Context, owner string, c store.Contact) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if c.UserID == "" {
		return errEmptyID
	}
	_, err = s.pool.Exec(ctx, s.q.putContact, owner, c.UserID, int32(c.State), c.Note, timestamp(c.UpdatedAt))
	return mapErr("put contact", err)
}

// DeleteContact implements store.Store.
func (s *Store) DeleteContact(ctx context.Context, owner, userID string) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.pool.Exec(ctx, s.q.deleteContact, owner, userID)
	return mapErr("delete contact", err)
}

// GetContact implements store.Store.
func (s *Store) GetContact(ctx context.Context, owner, userID string) (store.Contact, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.Contact{}, err
	}
	defer done()
	rows, err := s.pool.Query(ctx, s.q.getContact, owner, userID)
	if err != nil {
		return store.Contact{}, mapErr("get contact", err)
	}
	c, err := pgx.CollectExactlyOneRow(rows, scanContact)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Contact{}, store.ErrNotFound
	}
	return c, mapErr("get contact", err)
}

// Contacts implements store.Store, by user id (bytewise).
func (s *Store) Contacts(ctx context.Context, owner string) ([]store.Contact, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.pool.Query(ctx, s.q.contacts, owner)
	if err != nil {
		return nil, mapErr("contacts", err)
	}
	out, err := pgx.CollectRows(rows, scanContact)
	if err != nil {
		return nil, mapErr("contacts", err)
	}
	return out, nil
}

func scanContact(r pgx.CollectableRow) (store.Contact, error) {
	var c store.Contact
	var state int32
	var updated pgtype.Timestamptz
	err := r.Scan(&c.UserID, &state, &c.Note, &updated)
	c.State, c.UpdatedAt = pb.ContactState(state), fromTimestamp(updated)
	return c, err
}

// SetBlocked implements store.Store.
func (s *Store) SetBlocked(ctx context.Context, owner, userID string, blocked bool) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if userID == "" {
		return errEmptyID
	}
	sql := s.q.unblock
	if blocked {
		sql = s.q.block
	}
	_, err = s.pool.Exec(ctx, sql, owner, userID)
	return mapErr("set blocked", err)
}

// Blocked implements store.Store, by user id (bytewise).
func (s *Store) Blocked(ctx context.Context, owner string) ([]string, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.strings(ctx, "blocked", s.q.blocked, owner)
}

// IsBlocked implements store.Store.
func (s *Store) IsBlocked(ctx context.Context, owner, userID string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	return s.exists(ctx, "is blocked", s.q.isBlocked, owner, userID)
}

// SetLastSeen implements store.Store.
func (s *Store) SetLastSeen(ctx context.Context, userID string, t time.Time) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.pool.Exec(ctx, s.q.setLastSeen, userID, t)
	return mapErr("set last seen", err)
}

// LastSeen implements store.Store.
func (s *Store) LastSeen(ctx context.Context, userID string) (time.Time, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer done()
	var t time.Time
	err = s.pool.QueryRow(ctx, s.q.lastSeen, userID).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, mapErr("last seen", err)
	}
	return t.UTC(), nil
}
