package pebblestore

import "github.com/parleyim/parley/internal/store"

// Every login reads its user's record and its token's revocation, and a
// reconnect storm reads the same few again and again (each a point lookup
// through the memtables and every level's filter, a miss for most tokens).
// authCache answers them from memory. Its writers (writeUser, RevokeToken)
// drop the entry once their write is committed, before they return, so a
// ban or a revocation is seen by every login that starts after it; gen,
// raised with each drop, keeps a read that raced a write from caching
// what it read before it. The embedded store serves one node, so nothing
// else writes these records behind its back.
type authCache struct {
	users   *genMap[cachedUser] // user id → record (found false: none)
	revoked *genMap[bool]       // token id → revoked
	gen     uint64
}

type cachedUser struct {
	u     store.User
	found bool
}

// authCacheEntries bounds each of authCache's maps (a user entry is a
// couple of hundred bytes).
const authCacheEntries = 1 << 16

func newAuthCache() authCache {
	return authCache{users: newGenMap[cachedUser](authCacheEntries), revoked: newGenMap[bool](authCacheEntries)}
}

// cachedGetUser is GetUser's read through the cache; closeMu held.
func (s *Store) cachedGetUser(id string) (store.User, error) {
	s.authMu.RLock()
	c, ok := s.auth.users.get(id)
	gen := s.auth.gen
	s.authMu.RUnlock()
	if !ok {
		var err error
		if c.u, c.found, err = s.readUser(id); err != nil {
			return store.User{}, err // errors are not cached
		}
		s.authMu.Lock()
		if s.auth.gen == gen {
			s.auth.users.put(id, c)
		}
		s.authMu.Unlock()
	}
	if !c.found {
		return store.User{}, store.ErrNotFound
	}
	return c.u, nil
}

// cachedTokenRevoked is TokenRevoked's read through the cache; closeMu held.
func (s *Store) cachedTokenRevoked(id string) (bool, error) {
	s.authMu.RLock()
	r, ok := s.auth.revoked.get(id)
	gen := s.auth.gen
	s.authMu.RUnlock()
	if ok {
		return r, nil
	}
	r, err := s.readTokenRevoked(id)
	if err != nil {
		return false, err
	}
	s.authMu.Lock()
	if s.auth.gen == gen {
		s.auth.revoked.put(id, r)
	}
	s.authMu.Unlock()
	return r, nil
}

// userWritten drops id's cached record; called after a write of it.
func (s *Store) userWritten(id string) {
	s.authMu.Lock()
	s.auth.users.del(id)
	s.auth.gen++
	s.authMu.Unlock()
}

// tokenRevokedWritten drops id's cached answer; called after a write of it.
// Purging expired revocations leaves cached answers as they
// are: such a token is refused for its expiry anyway.
func (s *Store) tokenRevokedWritten(id string) {
	s.authMu.Lock()
	s.auth.revoked.del(id)
	s.auth.gen++
	s.authMu.Unlock()
}
