package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
)

var errEmptyID = errors.New("pebblestore: empty id")

// SetConversationSettings implements store.Store.
func (s *Store) SetConversationSettings(ctx context.Context, userID, conversationID string, cs store.ConversationSettings) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	return s.put(settingsKey(nil, userID, conversationID), encodeSettings(cs), bulk)
}

// GetConversationSettings implements store.Store.
func (s *Store) GetConversationSettings(ctx context.Context, userID, conversationID string) (store.ConversationSettings, error) {
	if err := s.enter(ctx); err != nil {
		return store.ConversationSettings{}, err
	}
	defer s.closeMu.RUnlock()
	key := settingsKey(nil, userID, conversationID)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return store.ConversationSettings{}, err
	}
	return decodeSettings(key, body)
}

// HideMessages implements store.Store: one batch of (user, conversation,
// seq) keys; hiding a seq again rewrites the same key.
func (s *Store) HideMessages(ctx context.Context, userID, conversationID string, seqs []uint64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if len(seqs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, seq := range seqs {
		key := hiddenKey(nil, userID, conversationID, seq)
		if err := b.Set(key, frame(key, nil), nil); err != nil {
			return err
		}
	}
	return mapErr(s.commitBatch(b, s.wo, bulk))
}

// HiddenMessages implements store.Store: a range scan of [from, to].
func (s *Store) HiddenMessages(ctx context.Context, userID, conversationID string, from, to uint64) ([]uint64, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if from > to {
		return nil, nil
	}
	prefix := hiddenPrefix(nil, userID, conversationID)
	lower := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), from)
	upper := prefixEnd(prefix)
	if to != math.MaxUint64 {
		upper = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), to+1)
	}
	var out []uint64
	err := s.iterate(ctx, lower, upper, func(key, body []byte) (bool, error) {
		seq, ok := seqFromMessageKey(key, prefix) // same layout: prefix, then 8 bytes
		if !ok || len(body) != 0 {
			return false, corruptf(key, "bad hidden-message record")
		}
		out = append(out, seq)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutContact implements store.Store.
func (s *Store) PutContact(ctx context.Context, owner string, c store.Contact) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if c.UserID == "" {
		return errEmptyID
	}
	return s.put(ownedKey(nil, nsContact, owner, c.UserID), encodeContact(c), bulk)
}

// DeleteContact implements store.Store.
func (s *Store) DeleteContact(ctx context.Context, owner, userID string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if userID == "" {
		return nil // no record can exist
	}
	return s.del(ownedKey(nil, nsContact, owner, userID))
}

// GetContact implements store.Store.
func (s *Store) GetContact(ctx context.Context, owner, userID string) (store.Contact, error) {
	if err := s.enter(ctx); err != nil {
		return store.Contact{}, err
	}
	defer s.closeMu.RUnlock()
	if userID == "" {
		return store.Contact{}, store.ErrNotFound
	}
	key := ownedKey(nil, nsContact, owner, userID)
	body, found, err := s.getBody(key)
	if err != nil {
		return store.Contact{}, err
	}
	if !found {
		return store.Contact{}, store.ErrNotFound
	}
	return decodeContact(key, userID, body)
}

// Contacts implements store.Store: a prefix scan of owner's contact keys.
func (s *Store) Contacts(ctx context.Context, owner string) ([]store.Contact, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	prefix := ownedPrefix(nil, nsContact, owner)
	var out []store.Contact
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		c, err := decodeContact(key, string(key[len(prefix):]), body)
		if err != nil {
			return false, err
		}
		out = append(out, c)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetBlocked implements store.Store.
func (s *Store) SetBlocked(ctx context.Context, owner, userID string, blocked bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if userID == "" {
		return errEmptyID
	}
	key := ownedKey(nil, nsBlock, owner, userID)
	if !blocked {
		return s.del(key)
	}
	return s.put(key, nil, small)
}

// Blocked implements store.Store: a prefix scan of owner's block keys.
func (s *Store) Blocked(ctx context.Context, owner string) ([]string, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	prefix := ownedPrefix(nil, nsBlock, owner)
	var out []string
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		if len(body) != 0 {
			return false, corruptf(key, "bad block record")
		}
		out = append(out, string(key[len(prefix):]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IsBlocked implements store.Store.
func (s *Store) IsBlocked(ctx context.Context, owner, userID string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	if userID == "" {
		return false, nil
	}
	key := ownedKey(nil, nsBlock, owner, userID)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return false, err
	}
	if len(body) != 0 {
		return false, corruptf(key, "bad block record")
	}
	return true, nil
}

// SetLastSeen implements store.Store.
func (s *Store) SetLastSeen(ctx context.Context, userID string, t time.Time) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	// No fsync of its own (like cursors): an approximate time a crash may
	// set back a little, while a sync per disconnect cost ~6 % of a login.
	key := lastSeenKey(nil, userID)
	v := frame(key, appendTime(nil, t))
	return mapErr(s.write(small, len(key)+len(v), func() error { return s.db.Set(key, v, pebble.NoSync) }))
}

// LastSeen implements store.Store.
func (s *Store) LastSeen(ctx context.Context, userID string) (time.Time, error) {
	if err := s.enter(ctx); err != nil {
		return time.Time{}, err
	}
	defer s.closeMu.RUnlock()
	key := lastSeenKey(nil, userID)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return time.Time{}, err
	}
	return decodeLastSeen(key, body)
}
