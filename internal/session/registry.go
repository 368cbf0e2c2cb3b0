// Package session tracks the authenticated sessions (one per connection) held
// by this node, per user and device, and applies the multi-device kick policy.
package session

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Conn is what a session needs of its connection.
type Conn interface {
	Send(o *wire.Outbound) bool
	// SendHeld is Send with the flush deferred to h.Release (h may be nil).
	SendHeld(o *wire.Outbound, h *wire.Hold) bool
	Close(code pb.DisconnectCode, reason string)
}

// KickPolicy decides which older sessions a new login replaces.
type KickPolicy uint8

const (
	// KickSameDeviceType: a login kicks the user's sessions with the same device type (the default).
	KickSameDeviceType KickPolicy = iota
	// KickSameDevice: a login kicks only sessions with the same device id (a reconnect of the same install).
	KickSameDevice
	// KickNone: any number of sessions per user and device type.
	KickNone
)

// ParseKickPolicy maps a config word to a policy.
func ParseKickPolicy(s string) (KickPolicy, bool) {
	switch s {
	case "", "device_type":
		return KickSameDeviceType, true
	case "device":
		return KickSameDevice, true
	case "none":
		return KickNone, true
	}
	return 0, false
}

// Session is one authenticated connection. Fields are set before Add and never change.
type Session struct {
	ID           string
	UserID       string
	DeviceID     string
	DeviceType   string
	TokenID      string
	TokenExpires time.Time
	Conn         Conn
	Started      time.Time
	// System marks the admin API acting for the operator (never a
	// connection): it has a group owner's rights in every group.
	System bool
	// ShadowMuted: what the user sends reaches only themselves.
	ShadowMuted bool
	// Moderating is the chat service's: the session's writes held for the
	// app's before-send hooks (set by the session's frame handler, one
	// frame at a time, on first use).
	Moderating any
}

const shardCount = 64

type shard struct {
	mu    sync.RWMutex
	users map[string][]*Session // guarded by mu; slices are replaced, never mutated in place
}

// idShard indexes registered sessions by Session.ID.
type idShard struct {
	mu  sync.RWMutex
	ids map[string]*Session // guarded by mu
}

// Registry holds this node's sessions. Safe for concurrent use.
type Registry struct {
	policy KickPolicy
	seed   maphash.Seed
	shards [shardCount]shard
	byID   [shardCount]idShard
	count  atomic.Int64
	// delivered counts frames DeliverLocal queued (one add per call).
	delivered atomic.Uint64
}

// NewRegistry returns an empty registry.
func NewRegistry(policy KickPolicy) *Registry {
	r := &Registry{policy: policy, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].users = make(map[string][]*Session)
		r.byID[i].ids = make(map[string]*Session)
	}
	return r
}

func (r *Registry) shard(uid string) *shard {
	return &r.shards[maphash.String(r.seed, uid)%shardCount]
}

// Add registers s and returns the sessions it replaces under the kick policy;
// they are already removed, and the caller closes them (outside any lock).
func (r *Registry) Add(s *Session) (kicked []*Session) {
	sh := r.shard(s.UserID)
	sh.mu.Lock()
	old := sh.users[s.UserID]
	next := make([]*Session, 0, len(old)+1)
	for _, o := range old {
		if r.kicks(o, s) {
			kicked = append(kicked, o)
			continue
		}
		next = append(next, o)
	}
	next = append(next, s)
	sh.users[s.UserID] = next
	// Index by id while the user's shard is still locked, so a concurrent
	// Remove of a kicked session cannot interleave with this update.
	for _, k := range kicked {
		r.unindex(k)
	}
	is := r.idShard(s.ID)
	is.mu.Lock()
	is.ids[s.ID] = s
	is.mu.Unlock()
	sh.mu.Unlock()
	r.count.Add(int64(1 - len(kicked)))
	return kicked
}

// Kept is how many of s's user's sessions Add(s) would leave in place (those
// the kick policy does not replace): with s, the user would hold one more.
func (r *Registry) Kept(s *Session) int {
	sh := r.shard(s.UserID)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	n := 0
	for _, o := range sh.users[s.UserID] {
		if !r.kicks(o, s) {
			n++
		}
	}
	return n
}

// Evict applies newcomer, a session opened on another node, to this node's
// sessions: it removes and returns (kicked) those it replaces under the kick
// policy, for the caller to close, and returns (stayed) those that win
// instead, which the caller announces again so that the newcomer's node
// closes the newcomer.
//
// Every node ranks two sessions the same way (LoginAfter: start times as
// their own nodes stamped them, then ids), so when two logins cross and
// both nodes compare them, both keep the same one; when only one node sees
// both, it closes its own loser, or has the other node close it. A local
// session older than window (by now, this node's clock) always goes: its
// login cannot have crossed the newcomer's, so another node's clock running
// behind cannot keep an old session over a new login.
func (r *Registry) Evict(newcomer *Session, now time.Time, window time.Duration) (kicked, stayed []*Session) {
	sh := r.shard(newcomer.UserID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := sh.users[newcomer.UserID]
	next := make([]*Session, 0, len(old))
	for _, o := range old {
		if o.ID == newcomer.ID || !r.kicks(o, newcomer) {
			next = append(next, o)
			continue
		}
		if now.Sub(o.Started) < window && o.LoginAfter(newcomer) {
			stayed = append(stayed, o)
			next = append(next, o)
			continue
		}
		kicked = append(kicked, o)
		r.unindex(o)
	}
	if len(kicked) == 0 {
		return nil, stayed
	}
	if len(next) == 0 {
		delete(sh.users, newcomer.UserID)
	} else {
		sh.users[newcomer.UserID] = next
	}
	r.count.Add(-int64(len(kicked)))
	return kicked, stayed
}

// LoginAfter ranks s's login after o's: by start time, then by id, a total
// order, so two nodes comparing the same two sessions always agree. It
// compares wall-clock nanoseconds: a start time received from another node
// has no monotonic reading.
func (s *Session) LoginAfter(o *Session) bool {
	if sn, on := s.Started.UnixNano(), o.Started.UnixNano(); sn != on {
		return sn > on
	}
	return s.ID > o.ID
}

func (r *Registry) idShard(id string) *idShard {
	return &r.byID[maphash.String(r.seed, id)%shardCount]
}

// unindex drops s from the id index (if it is the session indexed under its id).
func (r *Registry) unindex(s *Session) {
	is := r.idShard(s.ID)
	is.mu.Lock()
	if is.ids[s.ID] == s {
		delete(is.ids, s.ID)
	}
	is.mu.Unlock()
}

// ByID returns the registered session with that id, or nil. O(1).
func (r *Registry) ByID(id string) *Session {
	is := r.idShard(id)
	is.mu.RLock()
	s := is.ids[id]
	is.mu.RUnlock()
	return s
}

// ForEach calls fn for every registered session, a shard at a time under
// that shard's read lock: fn must not block or call back into the registry.
func (r *Registry) ForEach(fn func(*Session)) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.RLock()
		for _, list := range sh.users {
			for _, s := range list {
				fn(s)
			}
		}
		sh.mu.RUnlock()
	}
}

func (r *Registry) kicks(old, s *Session) bool {
	switch r.policy {
	case KickSameDeviceType:
		return old.DeviceType == s.DeviceType || old.DeviceID == s.DeviceID
	case KickSameDevice:
		return old.DeviceID == s.DeviceID
	}
	return false
}

// Remove unregisters s; false if it was not registered (for example already kicked).
func (r *Registry) Remove(s *Session) bool {
	sh := r.shard(s.UserID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := sh.users[s.UserID]
	for i, o := range old {
		if o == s {
			if len(old) == 1 {
				delete(sh.users, s.UserID)
			} else {
				next := make([]*Session, 0, len(old)-1)
				next = append(next, old[:i]...)
				sh.users[s.UserID] = append(next, old[i+1:]...)
			}
			r.unindex(s)
			r.count.Add(-1)
			return true
		}
	}
	return false
}

// Sessions returns a snapshot of the user's sessions on this node.
func (r *Registry) Sessions(uid string) []*Session {
	sh := r.shard(uid)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.users[uid] // never mutated in place, so safe to share
}

// Len is the number of sessions on this node.
func (r *Registry) Len() int { return int(r.count.Load()) }

// DeliverLocal queues out on every local session of the users except the
// session with id except, deferring flushes to hold (nil: flush at once). It
// returns the number of sessions it was queued on.
// Short lists may repeat a user (each gets the frame once); long lists (group
// members) must not repeat users, so the check stays linear.
func (r *Registry) DeliverLocal(users []string, out *wire.Outbound, except string, hold *wire.Hold) int {
	n := 0
	for i, uid := range users {
		if i < 8 && dupBefore(users, i) {
			continue
		}
		for _, s := range r.Sessions(uid) {
			if s.ID != except && s.Conn.SendHeld(out, hold) {
				n++
			}
		}
	}
	r.delivered.Add(uint64(n))
	return n
}

// Delivered is the number of frames DeliverLocal has queued on sessions.
func (r *Registry) Delivered() uint64 { return r.delivered.Load() }

func dupBefore(users []string, i int) bool {
	for j := 0; j < i; j++ {
		if users[j] == users[i] {
			return true
		}
	}
	return false
}

// CloseUser closes every local session of uid for which match returns true
// (match nil: all of them).
func (r *Registry) CloseUser(uid string, code pb.DisconnectCode, reason string, match func(*Session) bool) int {
	n := 0
	for _, s := range r.Sessions(uid) {
		if match == nil || match(s) {
			s.Conn.Close(code, reason)
			n++
		}
	}
	return n
}
