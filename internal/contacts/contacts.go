// Package contacts keeps who is whose friend and who blocked whom, and
// answers the per-message question "may this user message that one?".
//
// Contact records live in the store, one per side (each user has their own
// record about the other). Blocks live in the store too; MayMessage answers
// from an in-memory cache of relations, which every change made through this
// node updates at once.
//
// A [Book] is the one place these rules are kept: the chat service decodes a
// request, calls the Book and answers with what it returns. Errors are
// package reqerr's, ready to answer a request with.
package contacts

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// MaxNote is the longest friend request note, in bytes.
const MaxNote = 256

// Tuning of the relation cache and the pair locks.
const (
	relShards   = 32
	relShardMax = 4096 // cached relations per shard (131,072 in all)
	// RelationTTL bounds how long a cached relation is trusted: blocks and
	// friendships changed on this node update the cache at once; changes
	// made through another node of a cluster take effect within RelationTTL.
	RelationTTL = time.Minute

	pairLockCount = 64
)

// Config is the part of the server's configuration contacts follow.
type Config struct {
	// DenyStrangers: only friends may send each other 1:1 messages.
	DenyStrangers bool
	// RefuseUnknown: a message to a user id without an account is refused
	// with reqerr.NoSuchUser.
	RefuseUnknown bool
}

// Notify tells owner's devices of owner's record about c.UserID, except
// the session except (the one that made the change, told by its reply). A
// removed record has state UNSPECIFIED. It is called with the pair's lock
// held, so the events of one pair reach the devices in the order of the
// changes; it must not call back into the Book.
type Notify func(ctx context.Context, owner string, c store.Contact, except string)

// Book is one node's contacts and blocks: the store's records, the relation
// cache and the locks that serialise changes to one pair of users.
type Book struct {
	store  store.Store
	cfg    Config
	notify Notify
	seed   maphash.Seed // read-only after New

	// rel caches relations for MayMessage; each shard has its own lock.
	rel [relShards]relShard

	// pairMu serialises contact and block changes of one pair of users on
	// this node, so the two records of a pair are read and written together.
	// Index with lockPair.
	pairMu [pairLockCount]sync.Mutex
}

// New returns the Book of st. notify is told of every changed record.
func New(st store.Store, cfg Config, notify Notify) *Book {
	b := &Book{store: st, cfg: cfg, notify: notify, seed: maphash.MakeSeed()}
	for i := range b.rel {
		b.rel[i].m = make(map[relKey]Relation)
	}
	return b
}

// ---- Relations cache (blocks, friendship) ----

// relKey is an ordered pair: may from message to?
type relKey struct{ from, to string }

// Relation is what the store said about an ordered pair (from, to) when it
// was loaded.
type Relation struct {
	Blocked bool      // to has blocked from
	Friend  bool      // to's record says from is a friend (loaded only when DenyStrangers)
	Unknown bool      // to has no account (loaded only when RefuseUnknown; never cached)
	at      time.Time // when it was loaded
}

type relShard struct {
	mu  sync.RWMutex
	m   map[relKey]Relation // guarded by mu; at most relShardMax entries
	gen uint64              // guarded by mu; bumped by every invalidation of this shard
}

func (b *Book) relShard(k relKey) *relShard {
	return &b.rel[maphash.Comparable(b.seed, k)%relShards]
}

// Relation returns whether to blocked from (and, when strangers are denied,
// whether to counts from as a friend), from the cache or else the store.
func (b *Book) Relation(ctx context.Context, from, to string) (Relation, error) {
	k := relKey{from, to}
	sh := b.relShard(k)
	now := time.Now()
	sh.mu.RLock()
	e, ok := sh.m[k]
	gen := sh.gen
	sh.mu.RUnlock()
	if ok && now.Sub(e.at) < RelationTTL {
		return e, nil
	}
	blocked, err := b.store.IsBlocked(ctx, to, from)
	if err != nil {
		return Relation{}, reqerr.Store(err)
	}
	e = Relation{Blocked: blocked, at: now}
	if b.cfg.DenyStrangers {
		c, err := b.store.GetContact(ctx, to, from)
		switch {
		case err == nil:
			e.Friend = c.State == pb.ContactState_CONTACT_STATE_FRIEND
		case !errors.Is(err, store.ErrNotFound):
			return Relation{}, reqerr.Store(err)
		}
	}
	if b.cfg.RefuseUnknown {
		_, err := b.store.GetUser(ctx, to)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Not cached: the user may register a moment later.
			e.Unknown = true
			return e, nil
		case err != nil:
			return Relation{}, reqerr.Store(err)
		}
	}
	sh.mu.Lock()
	// A change invalidated this shard while we read the store: what we read
	// may be stale, so answer with it but do not cache it.
	if sh.gen == gen {
		if len(sh.m) >= relShardMax {
			// Evict an eighth, chosen by map order (effectively at random).
			n := relShardMax / 8
			for k := range sh.m {
				delete(sh.m, k)
				if n--; n == 0 {
					break
				}
			}
		}
		sh.m[k] = e
	}
	sh.mu.Unlock()
	return e, nil
}

// Invalidate forgets the cached relations of u and v (both directions).
// Call it after the store was changed.
func (b *Book) Invalidate(u, v string) {
	for _, k := range [2]relKey{{u, v}, {v, u}} {
		sh := b.relShard(k)
		sh.mu.Lock()
		delete(sh.m, k)
		sh.gen++
		sh.mu.Unlock()
	}
}

// MayMessage checks that from may send a 1:1 message to to: not if to
// blocked from, nor, when strangers are denied, unless to counts from as a
// friend. A blocked sender gets the same generic refusal (reqerr.Denied) as
// a stranger. Notes to oneself are always allowed.
func (b *Book) MayMessage(ctx context.Context, from, to string) error {
	if from == to {
		return nil
	}
	e, err := b.Relation(ctx, from, to)
	if err != nil {
		return err
	}
	if e.Unknown {
		return reqerr.NoSuchUser
	}
	if e.Blocked || (b.cfg.DenyStrangers && !e.Friend) {
		return reqerr.Denied
	}
	return nil
}

// ---- Contacts ----

// lockPair locks the pair (u, v) against other contact changes on this node.
func (b *Book) lockPair(u, v string) func() {
	if v < u {
		u, v = v, u
	}
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(u)
	h.WriteByte(0)
	h.WriteString(v)
	mu := &b.pairMu[h.Sum64()%pairLockCount]
	mu.Lock()
	return mu.Unlock
}

// checkPeer validates the user a contact request acts on.
func checkPeer(me, other string) error {
	if !auth.ValidUserID(other) || other == me {
		return reqerr.BadRequest
	}
	return nil
}

// get returns owner's record about uid; the zero Contact (state
// UNSPECIFIED) when there is none.
func (b *Book) get(ctx context.Context, owner, uid string) (store.Contact, error) {
	c, err := b.store.GetContact(ctx, owner, uid)
	if errors.Is(err, store.ErrNotFound) {
		return store.Contact{UserID: uid}, nil
	}
	if err != nil {
		return store.Contact{}, reqerr.Store(err)
	}
	return c, nil
}

// Proto is the wire form of a contact record.
func Proto(c store.Contact) *pb.Contact {
	pc := &pb.Contact{UserId: c.UserID, State: c.State, Note: c.Note}
	if !c.UpdatedAt.IsZero() {
		pc.UpdatedAt = c.UpdatedAt.UnixMilli()
	}
	return pc
}

func now() time.Time { return time.Now().Truncate(time.Millisecond) }

// Request is me asking other to be friends, with a note (at most MaxNote
// bytes), from session sess. Already friends: nothing changes. If other had
// asked me already, both become friends. A request to someone who blocked me
// looks the same to me, but other gets no record and no event.
func (b *Book) Request(ctx context.Context, me, other, note, sess string) error {
	if err := checkPeer(me, other); err != nil {
		return err
	}
	if len(note) > MaxNote {
		return reqerr.TooLarge
	}
	defer b.lockPair(me, other)()
	mine, err := b.get(ctx, me, other)
	if err != nil {
		return err
	}
	if mine.State == pb.ContactState_CONTACT_STATE_FRIEND {
		return nil
	}
	blocked, err := b.store.IsBlocked(ctx, other, me)
	if err != nil {
		return reqerr.Store(err)
	}
	t := now()
	var theirs store.Contact
	if mine.State == pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED {
		mine = store.Contact{UserID: other, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: t}
		theirs = store.Contact{UserID: me, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: t}
	} else {
		mine = store.Contact{UserID: other, State: pb.ContactState_CONTACT_STATE_REQUEST_SENT, Note: note, UpdatedAt: t}
		theirs = store.Contact{UserID: me, State: pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED, Note: note, UpdatedAt: t}
	}
	if !blocked {
		if err := b.store.PutContact(ctx, other, theirs); err != nil {
			return reqerr.Store(err)
		}
	}
	if err := b.store.PutContact(ctx, me, mine); err != nil {
		return reqerr.Store(err)
	}
	b.Invalidate(me, other)
	b.notify(ctx, me, mine, sess)
	if !blocked {
		b.notify(ctx, other, theirs, "")
	}
	return nil
}

// Respond is me answering other's friend request, from session sess:
// accepting makes both friends, declining removes both records. With no
// request from other to answer it fails with reqerr.Conflict, except that
// accepting again once friends succeeds (a retry).
func (b *Book) Respond(ctx context.Context, me, other string, accept bool, sess string) error {
	if err := checkPeer(me, other); err != nil {
		return err
	}
	defer b.lockPair(me, other)()
	mine, err := b.get(ctx, me, other)
	if err != nil {
		return err
	}
	if accept && mine.State == pb.ContactState_CONTACT_STATE_FRIEND {
		return nil
	}
	if mine.State != pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED {
		return reqerr.Conflict
	}
	t := now()
	if !accept {
		return b.drop(ctx, me, other, sess, t)
	}
	mine = store.Contact{UserID: other, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: t}
	theirs := store.Contact{UserID: me, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: t}
	if err := b.store.PutContact(ctx, other, theirs); err != nil {
		return reqerr.Store(err)
	}
	if err := b.store.PutContact(ctx, me, mine); err != nil {
		return reqerr.Store(err)
	}
	b.Invalidate(me, other)
	b.notify(ctx, me, mine, sess)
	b.notify(ctx, other, theirs, "")
	return nil
}

// Remove ends whatever stands between me and other (a friendship or a
// request either way), from session sess. Nothing to remove is no error.
func (b *Book) Remove(ctx context.Context, me, other, sess string) error {
	if err := checkPeer(me, other); err != nil {
		return err
	}
	defer b.lockPair(me, other)()
	return b.drop(ctx, me, other, sess, now())
}

// drop deletes both records of the pair (me, other) and tells each side
// whose record existed. The caller holds the pair lock.
func (b *Book) drop(ctx context.Context, me, other, sess string, t time.Time) error {
	mine, err := b.get(ctx, me, other)
	if err != nil {
		return err
	}
	theirs, err := b.get(ctx, other, me)
	if err != nil {
		return err
	}
	if err := b.store.DeleteContact(ctx, other, me); err != nil {
		return reqerr.Store(err)
	}
	if err := b.store.DeleteContact(ctx, me, other); err != nil {
		return reqerr.Store(err)
	}
	b.Invalidate(me, other)
	if mine.State != pb.ContactState_CONTACT_STATE_UNSPECIFIED {
		b.notify(ctx, me, store.Contact{UserID: other, UpdatedAt: t}, sess)
	}
	if theirs.State != pb.ContactState_CONTACT_STATE_UNSPECIFIED {
		b.notify(ctx, other, store.Contact{UserID: me, UpdatedAt: t}, "")
	}
	return nil
}

// List returns uid's contact records and block list, by user id.
func (b *Book) List(ctx context.Context, uid string) (*pb.ContactList, error) {
	list, err := b.store.Contacts(ctx, uid)
	if err != nil {
		return nil, reqerr.Store(err)
	}
	blocked, err := b.store.Blocked(ctx, uid)
	if err != nil {
		return nil, reqerr.Store(err)
	}
	cl := &pb.ContactList{Contacts: make([]*pb.Contact, 0, len(list)), Blocked: blocked}
	for _, c := range list {
		cl.Contacts = append(cl.Contacts, Proto(c))
	}
	return cl, nil
}

// Friends returns the users uid's records name as friends.
func (b *Book) Friends(ctx context.Context, uid string) ([]string, error) {
	list, err := b.store.Contacts(ctx, uid)
	if err != nil {
		return nil, reqerr.Store(err)
	}
	var out []string
	for _, c := range list {
		if c.State == pb.ContactState_CONTACT_STATE_FRIEND {
			out = append(out, c.UserID)
		}
	}
	return out, nil
}

// SetBlocked adds other to me's block list or takes them off it. The other
// user is never told; contact records are left as they are.
func (b *Book) SetBlocked(ctx context.Context, me, other string, blocked bool) error {
	if err := checkPeer(me, other); err != nil {
		return err
	}
	unlock := b.lockPair(me, other)
	err := b.store.SetBlocked(ctx, me, other, blocked)
	if err == nil {
		b.Invalidate(me, other)
	}
	unlock()
	if err != nil {
		return reqerr.Store(err)
	}
	return nil
}
