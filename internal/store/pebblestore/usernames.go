package pebblestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
)

// The username index ('U' lp(name key) -> user id) makes NameKey unique.
// The bare key "U" marks that every user record is indexed: stores from
// before the index are indexed once, at Open.
const nsUserName byte = 'U'

var userNamesIndexed = []byte{nsUserName}

func userNameKey(b []byte, key string) []byte {
	return appendLP(append(b, nsUserName), key)
}

// createUser writes u and its name key in one batch. Called with userMu held
// (which serializes every user write, so the two checks and the write are
// atomic against other creates).
func (s *Store) createUser(u store.User) error {
	key := userKey(nil, u.ID)
	if _, found, err := s.getBody(key); err != nil || found {
		if err == nil {
			err = store.ErrExists
		}
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if u.NameKey != "" {
		nk := userNameKey(nil, u.NameKey)
		if _, found, err := s.getBody(nk); err != nil || found {
			if err == nil {
				err = store.ErrExists
			}
			return err
		}
		if err := b.Set(nk, frame(nk, []byte(u.ID)), nil); err != nil {
			return err
		}
	}
	if err := b.Set(key, frame(key, encodeUser(u)), nil); err != nil {
		return err
	}
	return mapErr(s.commitBatch(b, s.wo, bulk))
}

// UserByName implements store.Store.
func (s *Store) UserByName(ctx context.Context, name string) (store.User, error) {
	if err := s.enter(ctx); err != nil {
		return store.User{}, err
	}
	nk := userNameKey(nil, name)
	body, found, err := s.getBody(nk)
	s.closeMu.RUnlock()
	if err != nil {
		return store.User{}, err
	}
	if !found {
		return store.User{}, store.ErrNotFound
	}
	return s.GetUser(ctx, string(body))
}

// indexUserNames indexes the users of a store written before the username
// index existed, once: each under strings.ToLower(id) (the normalized form
// of every id the server's alphabet allows), the oldest of look-alikes (by
// creation time, then id) keeping the name. The others are left without a
// name: they still log in by their exact id.
func (s *Store) indexUserNames() error {
	if _, found, err := s.getBody(userNamesIndexed); err != nil || found {
		return err
	}
	type owner struct {
		id      string
		created int64 // unix nanoseconds; records without a time sort first
	}
	owners := make(map[string]owner)
	prefix := []byte{nsUser}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return mapErr(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		id, rest, err := readLP(it.Key()[1:])
		if err != nil || len(rest) != 0 {
			_ = it.Close()
			return corruptf(it.Key(), "bad user key")
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return mapErr(err)
		}
		body, err := unframe(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return err
		}
		u, err := decodeUser(it.Key(), id, body)
		if err != nil {
			_ = it.Close()
			return err
		}
		o := owner{id: id}
		if !u.CreatedAt.IsZero() {
			o.created = u.CreatedAt.UnixNano()
		}
		name := strings.ToLower(id)
		if prev, ok := owners[name]; !ok || cmp.Or(cmp.Compare(o.created, prev.created), strings.Compare(o.id, prev.id)) < 0 {
			owners[name] = o
		}
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return mapErr(err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for name, o := range owners {
		nk := userNameKey(nil, name)
		if err := b.Set(nk, frame(nk, []byte(o.id)), nil); err != nil {
			return err
		}
	}
	if err := b.Set(userNamesIndexed, frame(userNamesIndexed, nil), nil); err != nil {
		return err
	}
	if err := s.commitBatch(b, pebble.Sync, small); err != nil {
		return mapErr(err)
	}
	if len(owners) > 0 {
		s.log.Info("pebblestore: indexed existing usernames", "users", len(owners))
	}
	return nil
}

var errIndexUserNames = errors.New("pebblestore: indexing usernames")

func wrapIndexErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errIndexUserNames, err)
}
