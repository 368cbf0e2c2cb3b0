package pebblestore

import (
	"context"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
)

// getBody reads and verifies key's value; found is false when there is none.
// The body is a copy, valid after the call.
func (s *Store) getBody(key []byte) (body []byte, found bool, err error) {
	return getBodyFrom(s.db, key)
}

// getBodyFrom is getBody reading from r (the DB or a snapshot).
func getBodyFrom(r pebble.Reader, key []byte) (body []byte, found bool, err error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapErr(err)
	}
	defer closer.Close()
	b, err := unframe(key, v)
	if err != nil {
		return nil, false, err
	}
	return append([]byte(nil), b...), true, nil
}

// put writes one record durably (under the sync policy), if admitted.
func (s *Store) put(key, body []byte, class writeClass) error {
	v := frame(key, body)
	return mapErr(s.write(class, len(key)+len(v), func() error { return s.db.Set(key, v, s.wo) }))
}

// del deletes one record durably, if admitted (a small write).
func (s *Store) del(key []byte) error {
	return mapErr(s.write(small, len(key), func() error { return s.db.Delete(key, s.wo) }))
}

// SetCursors implements store.Store. The whole call is one atomic batch,
// written without its own fsync: cursors only grow and clients re-send them,
// so a machine crash losing the newest moves costs nothing, while fsyncing
// every cursor flush competed with message commits. (The next durable
// message batch fsyncs the shared WAL, cursors included.) Recently written
// cursors are kept in memory so raising one rarely reads the disk.
//
// A cursor is clamped to its conversation's last seq (as LastSeq reports
// it): a client cannot mark messages read that do not exist yet. A stored
// value above the last seq (written before this clamp existed) is lowered
// by the next move, so one bad ACK cannot hide every later message.
func (s *Store) SetCursors(ctx context.Context, cursors []store.Cursor) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()

	// Values raised earlier in this call, so repeats of one cursor combine.
	raised := make(map[string]cursorValue, len(cursors))
	b := s.db.NewBatch()
	defer b.Close()
	for _, c := range cursors {
		key := cursorKey(nil, c.ConversationID, c.UserID)
		cur, ok := raised[string(key)]
		if !ok {
			cur, ok = s.cursorCache.get(string(key))
		}
		if !ok {
			body, found, err := s.getBody(key)
			if err != nil {
				return err
			}
			if found {
				if cur.delivered, cur.read, err = decodeCursor(key, body); err != nil {
					return err
				}
			}
		}
		last, err := s.lastSeq(c.ConversationID)
		if err != nil {
			return err
		}
		next := cursorValue{min(max(cur.delivered, c.Delivered), last), min(max(cur.read, c.Read), last)}
		if next == cur {
			continue
		}
		raised[string(key)] = next
		if err := b.Set(key, frame(key, encodeCursor(next.delivered, next.read)), nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	if err := s.commitBatch(b, pebble.NoSync, small); err != nil {
		// Unknown whether it landed: forget what this call raised.
		for k := range raised {
			s.cursorCache.del(k)
		}
		return mapErr(err)
	}
	for k, v := range raised {
		s.cursorCache.put(k, v)
	}
	return nil
}

// GetCursor implements store.Store; the returned Cursor names the conversation and user.
func (s *Store) GetCursor(ctx context.Context, conversationID, userID string) (store.Cursor, error) {
	c := store.Cursor{ConversationID: conversationID, UserID: userID}
	if err := s.enter(ctx); err != nil {
		return store.Cursor{}, err
	}
	defer s.closeMu.RUnlock()
	key := cursorKey(nil, conversationID, userID)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return c, err
	}
	c.Delivered, c.Read, err = decodeCursor(key, body)
	if err != nil {
		return store.Cursor{}, err
	}
	return c, nil
}

var errEmptyUserID = errors.New("pebblestore: empty user id")

// CreateUser implements store.Store.
func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	return s.writeUser(ctx, u, false)
}

// UpdateUser implements store.Store.
func (s *Store) UpdateUser(ctx context.Context, u store.User) error {
	return s.writeUser(ctx, u, true)
}

func (s *Store) writeUser(ctx context.Context, u store.User, mustExist bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if u.ID == "" {
		return errEmptyUserID
	}
	s.userMu.Lock()
	defer s.userMu.Unlock()
	if !mustExist {
		return s.createUser(u)
	}
	key := userKey(nil, u.ID)
	_, found, err := s.getBody(key)
	if err != nil {
		return err
	}
	if !found {
		return store.ErrNotFound
	}
	// An update (password change, disable) must still work on a nearly
	// full disk; the name index is not touched.
	return s.put(key, encodeUser(u), small)
}

// GetUser implements store.Store.
func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	if err := s.enter(ctx); err != nil {
		return store.User{}, err
	}
	defer s.closeMu.RUnlock()
	key := userKey(nil, id)
	body, found, err := s.getBody(key)
	if err != nil {
		return store.User{}, err
	}
	if !found {
		return store.User{}, store.ErrNotFound
	}
	return decodeUser(key, id, body)
}

// RevokeToken implements store.Store. Revoking an id twice keeps the later
// expiry. Expired records are purged at Open and at most hourly here.
func (s *Store) RevokeToken(ctx context.Context, tokenID string, expires time.Time) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	key := tokenKey(nil, tokenID)
	body, found, err := s.getBody(key)
	if err != nil {
		return err
	}
	if found {
		prev, err := decodeToken(key, body)
		if err != nil {
			return err
		}
		if prev.After(expires) {
			expires = prev
		}
	}
	if err := s.put(key, encodeToken(expires), small); err != nil {
		return err
	}
	if now := time.Now(); now.Sub(s.lastPurge) > tokenPurgeInterval {
		s.purgeTokens(now)
	}
	return nil
}

// TokenRevoked implements store.Store. A record past its expiry still
// answers true until purged: the token has expired anyway, and erring
// towards "revoked" is the safe side.
func (s *Store) TokenRevoked(ctx context.Context, tokenID string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	key := tokenKey(nil, tokenID)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return false, err
	}
	if _, err := decodeToken(key, body); err != nil {
		return false, err
	}
	return true, nil
}

// purgeTokens deletes revoked-token records that expired before now. A
// corrupt record is kept (and reported when read) rather than guessed at.
// Failing to purge only keeps expired records longer, so it is logged, not
// returned: it must not fail Open or a revocation that was stored.
func (s *Store) purgeTokens(now time.Time) {
	if err := s.purgeTokensErr(now); err != nil {
		s.log.Error("pebblestore: purging expired token revocations", "err", err)
	}
}

func (s *Store) purgeTokensErr(now time.Time) error {
	s.lastPurge = now
	prefix := []byte{nsToken}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return mapErr(err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break
		}
		body, err := unframe(it.Key(), v)
		if err != nil {
			continue
		}
		if exp, err := decodeToken(it.Key(), body); err == nil && exp.Before(now) {
			_ = b.Delete(it.Key(), nil)
		}
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return mapErr(err)
	}
	if b.Empty() {
		return nil
	}
	// Losing a purge in a crash only keeps expired records a little longer.
	return mapErr(s.commitBatch(b, pebble.NoSync, small))
}

// cursorValue is a cursor's two positions (the cursor cache's value).
type cursorValue struct{ delivered, read uint64 }
