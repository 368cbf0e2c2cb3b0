package chat

// Contacts, blocks, typing indicators and presence.
//
// Contact records live in the store, one per side (each user has their own
// record about the other). Blocks live in the store too; the per-send check
// ("may from message to?") is answered from an in-memory cache of relations.
// Typing limits and presence subscriptions exist only in memory, per node.

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Limits and tuning of the social features.
const (
	maxFriendNote   = 256  // bytes of a friend request's note
	maxPresenceSubs = 1000 // presence subscriptions per session

	// typingInterval: at most one typing indicator per user and conversation
	// is forwarded per interval; the rest are dropped.
	typingInterval = 2 * time.Second
	// typingSweepMin is the size of the typing table below which it is never swept.
	typingSweepMin = 4096

	relShards   = 32
	relShardMax = 4096 // cached relations per shard (131,072 in all)
	// relTTL bounds how long a cached relation is trusted: blocks and
	// friendships changed on this node update the cache at once; changes
	// made through another node of a cluster take effect within relTTL.
	relTTL = time.Minute

	pairLockCount = 64

	// lastSeenWriters bounds the concurrent last-seen writes (the store
	// commits concurrent writes together).
	lastSeenWriters = 16
)

// social is the per-node state of contacts, blocks, typing and presence.
type social struct {
	seed maphash.Seed // set by init, read-only afterwards

	// rel caches relations for mayMessage; each shard has its own lock.
	rel [relShards]relShard

	// pairMu serialises contact and block changes of one pair of users on
	// this node, so the two records of a pair are read and written together.
	// Index with pairLock.
	pairMu [pairLockCount]sync.Mutex

	typing   typingLimiter
	pres     presence
	lastSeen lastSeenWriter
}

func (s *social) init() {
	s.seed = maphash.MakeSeed()
	for i := range s.rel {
		s.rel[i].m = make(map[relKey]relEntry)
	}
	s.typing.last = make(map[typingKey]time.Time)
	s.typing.sweepAt = typingSweepMin
	s.pres.online = make(map[string]struct{})
	s.pres.subs = make(map[string]map[*session.Session]struct{})
	s.pres.bySess = make(map[*session.Session]map[string]struct{})
	s.pres.gen = make(map[string]uint64)
	s.pres.remote = make(map[string]map[string]struct{})
	s.lastSeen.pending = make(map[string]time.Time)
}

// ---- Relations cache (blocks, friendship) ----

// relKey is an ordered pair: may from message to?
type relKey struct{ from, to string }

// relEntry is what the store said about a relKey when it was loaded.
type relEntry struct {
	blocked bool      // to has blocked from
	friend  bool      // to's record says from is a friend (loaded only when DenyStrangers)
	at      time.Time // when it was loaded
}

type relShard struct {
	mu  sync.RWMutex
	m   map[relKey]relEntry // guarded by mu; at most relShardMax entries
	gen uint64              // guarded by mu; bumped by every invalidation of this shard
}

func (s *social) relShard(k relKey) *relShard {
	return &s.rel[maphash.Comparable(s.seed, k)%relShards]
}

// relation returns whether to blocked from (and, when strangers are denied,
// whether they are friends), from the cache or else the store.
func (s *Service) relation(ctx context.Context, from, to string) (relEntry, error) {
	k := relKey{from, to}
	sh := s.social.relShard(k)
	now := time.Now()
	sh.mu.RLock()
	e, ok := sh.m[k]
	gen := sh.gen
	sh.mu.RUnlock()
	if ok && now.Sub(e.at) < relTTL {
		return e, nil
	}
	blocked, err := s.store.IsBlocked(ctx, to, from)
	if err != nil {
		return relEntry{}, storeErr(err)
	}
	e = relEntry{blocked: blocked, at: now}
	if s.cfg.DenyStrangers {
		c, err := s.store.GetContact(ctx, to, from)
		switch {
		case err == nil:
			e.friend = c.State == pb.ContactState_CONTACT_STATE_FRIEND
		case !errors.Is(err, store.ErrNotFound):
			return relEntry{}, storeErr(err)
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

// invalidateRel forgets the cached relations of a and b (both directions).
// Call it after the store was changed.
func (s *Service) invalidateRel(a, b string) {
	for _, k := range [2]relKey{{a, b}, {b, a}} {
		sh := s.social.relShard(k)
		sh.mu.Lock()
		delete(sh.m, k)
		sh.gen++
		sh.mu.Unlock()
	}
}

// mayMessage checks that from may send a 1:1 message to to. A blocked sender
// gets the same generic refusal as a stranger when strangers are denied.
func (s *Service) mayMessage(ctx context.Context, from, to string) error {
	if from == to {
		return nil // notes to self
	}
	e, err := s.relation(ctx, from, to)
	if err != nil {
		return err
	}
	if e.blocked || (s.cfg.DenyStrangers && !e.friend) {
		return errDenied
	}
	return nil
}

// ---- Contacts ----

// lockPair locks the pair (a, b) against other contact changes on this node.
func (s *Service) lockPair(a, b string) func() {
	if b < a {
		a, b = b, a
	}
	var h maphash.Hash
	h.SetSeed(s.social.seed)
	h.WriteString(a)
	h.WriteByte(0)
	h.WriteString(b)
	mu := &s.social.pairMu[h.Sum64()%pairLockCount]
	mu.Lock()
	return mu.Unlock
}

// checkPeer validates the user a contact request acts on.
func checkPeer(me, other string) error {
	if !auth.ValidUserID(other) || other == me {
		return errBadRequest
	}
	return nil
}

// getContact returns owner's record about uid; the zero Contact (state
// UNSPECIFIED) when there is none.
func (s *Service) getContact(ctx context.Context, owner, uid string) (store.Contact, error) {
	c, err := s.store.GetContact(ctx, owner, uid)
	if errors.Is(err, store.ErrNotFound) {
		return store.Contact{UserID: uid}, nil
	}
	if err != nil {
		return store.Contact{}, storeErr(err)
	}
	return c, nil
}

func contactProto(c store.Contact) *pb.Contact {
	pc := &pb.Contact{UserId: c.UserID, State: c.State, Note: c.Note}
	if !c.UpdatedAt.IsZero() {
		pc.UpdatedAt = c.UpdatedAt.UnixMilli()
	}
	return pc
}

// pushContact sends owner's record about the other user to owner's devices,
// except the session except. A removed record has state UNSPECIFIED.
func (s *Service) pushContact(ctx context.Context, owner string, c store.Contact, except string) {
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_ContactEvent{
		ContactEvent: &pb.ContactEvent{Contact: contactProto(c)}}})
	if err := s.router.DeliverToUsers(ctx, []string{owner}, out, except, nil); err != nil {
		s.deliveryFailed("contact event", err)
	}
}

func contactNow() time.Time { return time.Now().Truncate(time.Millisecond) }

func (s *Service) friendRequest(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.FriendRequest) error {
	me, other := sess.UserID, r.UserId
	if err := checkPeer(me, other); err != nil {
		return err
	}
	if len(r.Note) > maxFriendNote {
		return errTooLarge
	}
	defer s.lockPair(me, other)()
	mine, err := s.getContact(ctx, me, other)
	if err != nil {
		return err
	}
	if mine.State == pb.ContactState_CONTACT_STATE_FRIEND {
		s.replyOK(c, id) // already friends: nothing changes
		return nil
	}
	// A request to someone who blocked this user looks the same to the
	// requester, but the other side gets no record and no event.
	blocked, err := s.store.IsBlocked(ctx, other, me)
	if err != nil {
		return storeErr(err)
	}
	now := contactNow()
	var theirs store.Contact
	if mine.State == pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED {
		// The other user had asked already: both become friends.
		mine = store.Contact{UserID: other, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}
		theirs = store.Contact{UserID: me, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}
	} else {
		mine = store.Contact{UserID: other, State: pb.ContactState_CONTACT_STATE_REQUEST_SENT, Note: r.Note, UpdatedAt: now}
		theirs = store.Contact{UserID: me, State: pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED, Note: r.Note, UpdatedAt: now}
	}
	if !blocked {
		if err := s.store.PutContact(ctx, other, theirs); err != nil {
			return storeErr(err)
		}
	}
	if err := s.store.PutContact(ctx, me, mine); err != nil {
		return storeErr(err)
	}
	s.invalidateRel(me, other)
	s.replyOK(c, id)
	s.pushContact(ctx, me, mine, sess.ID)
	if !blocked {
		s.pushContact(ctx, other, theirs, "")
	}
	return nil
}

func (s *Service) respondFriend(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.RespondFriend) error {
	me, other := sess.UserID, r.UserId
	if err := checkPeer(me, other); err != nil {
		return err
	}
	defer s.lockPair(me, other)()
	mine, err := s.getContact(ctx, me, other)
	if err != nil {
		return err
	}
	if r.Accept && mine.State == pb.ContactState_CONTACT_STATE_FRIEND {
		s.replyOK(c, id) // accepted already (a retry)
		return nil
	}
	if mine.State != pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED {
		return errConflict // no request from that user to answer
	}
	now := contactNow()
	if !r.Accept {
		return s.dropContacts(ctx, c, sess, id, other, now)
	}
	mine = store.Contact{UserID: other, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}
	theirs := store.Contact{UserID: me, State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}
	if err := s.store.PutContact(ctx, other, theirs); err != nil {
		return storeErr(err)
	}
	if err := s.store.PutContact(ctx, me, mine); err != nil {
		return storeErr(err)
	}
	s.invalidateRel(me, other)
	s.replyOK(c, id)
	s.pushContact(ctx, me, mine, sess.ID)
	s.pushContact(ctx, other, theirs, "")
	return nil
}

func (s *Service) removeFriend(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.RemoveFriend) error {
	me, other := sess.UserID, r.UserId
	if err := checkPeer(me, other); err != nil {
		return err
	}
	defer s.lockPair(me, other)()
	return s.dropContacts(ctx, c, sess, id, other, contactNow())
}

// dropContacts deletes both records of the pair (sess's user, other), replies
// ok and tells each side whose record existed. The caller holds the pair lock.
func (s *Service) dropContacts(ctx context.Context, c Replier, sess *session.Session, id uint64, other string, now time.Time) error {
	me := sess.UserID
	mine, err := s.getContact(ctx, me, other)
	if err != nil {
		return err
	}
	theirs, err := s.getContact(ctx, other, me)
	if err != nil {
		return err
	}
	if err := s.store.DeleteContact(ctx, other, me); err != nil {
		return storeErr(err)
	}
	if err := s.store.DeleteContact(ctx, me, other); err != nil {
		return storeErr(err)
	}
	s.invalidateRel(me, other)
	s.replyOK(c, id)
	if mine.State != pb.ContactState_CONTACT_STATE_UNSPECIFIED {
		s.pushContact(ctx, me, store.Contact{UserID: other, UpdatedAt: now}, sess.ID)
	}
	if theirs.State != pb.ContactState_CONTACT_STATE_UNSPECIFIED {
		s.pushContact(ctx, other, store.Contact{UserID: me, UpdatedAt: now}, "")
	}
	return nil
}

func (s *Service) listContacts(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.ListContacts) error {
	list, err := s.store.Contacts(ctx, sess.UserID)
	if err != nil {
		return storeErr(err)
	}
	blocked, err := s.store.Blocked(ctx, sess.UserID)
	if err != nil {
		return storeErr(err)
	}
	cl := &pb.ContactList{Contacts: make([]*pb.Contact, 0, len(list)), Blocked: blocked}
	for _, ct := range list {
		cl.Contacts = append(cl.Contacts, contactProto(ct))
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Contacts{Contacts: cl}})
	return nil
}

func (s *Service) block(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Block) error {
	return s.setBlocked(ctx, c, sess, id, r.UserId, true)
}

func (s *Service) unblock(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Unblock) error {
	return s.setBlocked(ctx, c, sess, id, r.UserId, false)
}

// setBlocked changes the block list. The other user is never told; a block
// also ends their presence subscriptions to this user on this node.
func (s *Service) setBlocked(ctx context.Context, c Replier, sess *session.Session, id uint64, other string, blocked bool) error {
	me := sess.UserID
	if err := checkPeer(me, other); err != nil {
		return err
	}
	unlock := s.lockPair(me, other)
	err := s.store.SetBlocked(ctx, me, other, blocked)
	if err == nil {
		s.invalidateRel(me, other)
	}
	unlock()
	if err != nil {
		return storeErr(err)
	}
	if blocked {
		s.social.pres.dropSubscriber(me, other)
	}
	s.replyOK(c, id)
	return nil
}

// ---- Typing ----

type typingKey struct{ user, conv string }

// typingLimiter remembers when each (user, conversation) last had a typing
// indicator forwarded.
type typingLimiter struct {
	mu      sync.Mutex
	last    map[typingKey]time.Time // guarded by mu; swept of expired entries as it grows
	sweepAt int                     // guarded by mu; the size that triggers the next sweep
}

// allow reports whether a typing indicator of (user, conv) may be forwarded
// now, and if so records it.
func (l *typingLimiter) allow(user, conv string, now time.Time) bool {
	k := typingKey{user, conv}
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[k]; ok && now.Sub(t) < typingInterval {
		return false
	}
	if len(l.last) >= l.sweepAt {
		for k, t := range l.last {
			if now.Sub(t) >= typingInterval {
				delete(l.last, k)
			}
		}
		// The table holds only users who typed in the last interval; sweep
		// again once it has doubled.
		l.sweepAt = max(typingSweepMin, 2*len(l.last))
	}
	l.last[k] = now
	return true
}

// quietDrop reports whether err is a refusal that a typing indicator is
// dropped for silently (the sender cannot tell from the reply).
func quietDrop(err error) bool {
	return err == errDenied || err == errMuted || err == errConflict
}

func (s *Service) typing(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Typing) error {
	uid, conv := sess.UserID, r.ConversationId
	upTo, err := s.readLimit(ctx, uid, conv)
	if err != nil {
		return err
	}
	if upTo != 0 {
		return errDenied // a former member: may read, not take part
	}
	var users []string
	if isGroup(conv) {
		err = s.maySendToGroup(ctx, uid, conv)
		// Typing fans out to every online member; above the receipt-list
		// size it is dropped (answered ok), as big groups would drown in it.
		if rs := s.groupRecipients(conv); err == nil && len(rs) <= s.cfg.ReceiptListMax {
			users = rs
		}
	} else {
		peer, _ := directPeer(conv, uid)
		if err = s.mayMessage(ctx, uid, peer); err == nil && peer != uid {
			users = []string{peer}
		}
	}
	switch {
	case err != nil && !quietDrop(err):
		return err
	case err == nil && len(users) > 0 && s.social.typing.allow(uid, conv, time.Now()):
		out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Typing{
			Typing: &pb.TypingEvent{ConversationId: conv, UserId: uid}}})
		if isGroup(conv) {
			err = s.router.DeliverGroup(ctx, conv, users, out, sess.ID, nil)
		} else {
			err = s.router.DeliverToUsers(ctx, users, out, sess.ID, nil)
		}
		if err != nil {
			s.deliveryFailed("typing", err)
		}
	}
	s.replyOK(c, id)
	return nil
}

// ---- Presence ----

// presence is this node's view of who is online and who subscribed to whom.
// One lock covers it all: transitions and subscriptions are ordered, so a
// subscriber sees its PresenceList and then every later change, in order.
type presence struct {
	mu sync.Mutex
	// online holds the users with a session on this node, as last
	// published to subscribers. Guarded by mu.
	online map[string]struct{}
	// subs maps a user to the sessions subscribed to their presence. Guarded by mu.
	subs map[string]map[*session.Session]struct{}
	// bySess maps a subscribing session to the users it follows (at most
	// maxPresenceSubs). Guarded by mu.
	bySess map[*session.Session]map[string]struct{}
	// gen counts the online transitions published for users with
	// subscribers, so a slow offline check (cluster) yields to a later
	// login. Guarded by mu.
	gen map[string]uint64
	// watch is told when a user gains (true) or loses (false) their first
	// or last subscriber here. Set at init; called with mu held.
	watch func(uid string, on bool)
	// remote maps a followed user to the other nodes known to hold them
	// (cluster), so a node that dies without a word can be written off
	// (cluster.go sweepPeers). Guarded by mu.
	remote map[string]map[string]struct{}
}

// publish brings uid's published state in line with on; on a change it
// pushes a PresenceEvent to uid's subscribers. Called with mu held.
func (p *presence) publish(uid string, on bool, lastSeen int64) {
	_, was := p.online[uid]
	if on == was {
		return
	}
	if on {
		p.online[uid] = struct{}{}
	} else {
		delete(p.online, uid)
	}
	subs := p.subs[uid]
	if len(subs) == 0 {
		return
	}
	if on {
		p.gen[uid]++
	}
	if !on && lastSeen == 0 {
		lastSeen = time.Now().UnixMilli()
	}
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_PresenceEvent{PresenceEvent: &pb.PresenceEvent{
		Presence: &pb.Presence{UserId: uid, Online: on, LastSeen: lastSeen}}}})
	for sub := range subs {
		sub.Conn.Send(out) // only queues; never calls back into the service
	}
}

// unsubscribe removes sess's subscription to target. Called with mu held.
func (p *presence) unsubscribe(sess *session.Session, target string) {
	if subs := p.subs[target]; subs != nil {
		if _, in := subs[sess]; in {
			delete(subs, sess)
			if len(subs) == 0 {
				delete(p.subs, target)
				delete(p.gen, target)
				delete(p.remote, target)
				p.watch(target, false)
			}
		}
	}
	if mine := p.bySess[sess]; mine != nil {
		delete(mine, target)
		if len(mine) == 0 {
			delete(p.bySess, sess)
		}
	}
}

// dropSession removes every subscription of sess.
func (p *presence) dropSession(sess *session.Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for target := range p.bySess[sess] {
		p.unsubscribe(sess, target)
	}
}

// dropSubscriber removes the subscriptions of subscriber's sessions to target.
func (p *presence) dropSubscriber(target, subscriber string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sess := range p.subs[target] {
		if sess.UserID == subscriber {
			p.unsubscribe(sess, target)
		}
	}
}

// lastSeenWriter records last-seen times in the store off the connection
// goroutines (HandleClose may run on the gateway's shared writers, which
// must not wait for a durable write). Times not yet written are answered
// from memory.
type lastSeenWriter struct {
	mu       sync.Mutex
	pending  map[string]time.Time // guarded by mu: waiting to be written; one entry per user
	inflight map[string]time.Time // guarded by mu: being written by the running flush
	running  bool                 // guarded by mu: a flush goroutine is running
}

// record queues uid's last-seen time t, starting a flush if none runs.
func (s *Service) recordLastSeen(uid string, t time.Time) {
	w := &s.social.lastSeen
	w.mu.Lock()
	w.pending[uid] = t
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go s.flushLastSeen()
	}
}

// flushLastSeen writes queued last-seen times until none are left, then exits.
func (s *Service) flushLastSeen() {
	w := &s.social.lastSeen
	for {
		w.mu.Lock()
		w.inflight = nil
		if len(w.pending) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		batch := w.pending
		w.pending = make(map[string]time.Time)
		w.inflight = batch
		w.mu.Unlock()

		sem := make(chan struct{}, lastSeenWriters)
		var wg sync.WaitGroup
		for uid, t := range batch {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := s.store.SetLastSeen(s.life, uid, t)
				if err != nil && !errors.Is(err, store.ErrClosed) && !errors.Is(err, store.ErrNoSpace) {
					s.log.Warn("last seen not recorded", "user", uid, "err", err)
				}
			}()
		}
		wg.Wait()
	}
}

// lastSeenOf returns uid's last-seen time: one not yet written, else the store's.
func (s *Service) lastSeenOf(ctx context.Context, uid string) (time.Time, error) {
	w := &s.social.lastSeen
	w.mu.Lock()
	t, ok := w.pending[uid]
	if !ok {
		t, ok = w.inflight[uid]
	}
	w.mu.Unlock()
	if ok {
		return t, nil
	}
	return s.store.LastSeen(ctx, uid)
}

// sessionOpened runs after sess was added to the registry.
func (s *Service) sessionOpened(sess *session.Session) {
	s.emitSession(EventUserOnline, sess)
	p := &s.social.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	p.publish(sess.UserID, len(s.sessions.Sessions(sess.UserID)) > 0, 0)
}

// sessionClosed runs after sess was removed from the registry (or kicked):
// it ends sess's subscriptions and, when it was the user's last session on
// this node, records last seen and tells subscribers the user went offline.
func (s *Service) sessionClosed(sess *session.Session) {
	s.emitSession(EventUserOffline, sess)
	p := &s.social.pres
	p.dropSession(sess)
	uid := sess.UserID
	var lastSeen int64
	if len(s.sessions.Sessions(uid)) == 0 {
		now := time.Now()
		lastSeen = now.UnixMilli()
		s.recordLastSeen(uid, now)
	}
	if lastSeen != 0 && s.router.Clustered() {
		s.checkOffline(uid, lastSeen) // the user may be online on another node
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// The registry, not this call, decides: a session opened meanwhile
	// keeps the user online.
	p.publish(uid, len(s.sessions.Sessions(uid)) > 0, lastSeen)
}

// queryOnline asks the other nodes whether the users not online here and
// not followed here are online there: a node holding each, or "" (nil in process).
func (s *Service) queryOnline(ctx context.Context, users []string) map[string]string {
	if !s.router.Clustered() {
		return nil
	}
	p := &s.social.pres
	var ask []string
	p.mu.Lock()
	for _, u := range users {
		if len(p.subs[u]) == 0 && !s.isOnline(u) {
			ask = append(ask, u)
		}
	}
	p.mu.Unlock()
	res := make(map[string]string, len(ask))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, u := range ask {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			node, err := s.router.OnlineElsewhere(ctx, u)
			if err != nil {
				node = ""
			} else if node != "" {
				s.heardFrom(node) // it may die before its first heartbeat reaches us
			}
			mu.Lock()
			res[u] = node
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res
}

// remotePresence applies node's report that uid came online there or has
// no session left there.
func (s *Service) remotePresence(uid, node string, on bool) {
	p := &s.social.pres
	p.mu.Lock()
	if !on {
		if nodes := p.remote[uid]; nodes != nil {
			delete(nodes, node)
		}
		p.mu.Unlock()
		s.checkOffline(uid, 0)
		return
	}
	defer p.mu.Unlock()
	if len(p.subs[uid]) > 0 {
		p.remoteOn(uid, node)
	}
	p.publish(uid, true, 0)
}

// remoteOn records that node holds uid (a user followed here). Called with mu held.
func (p *presence) remoteOn(uid, node string) {
	nodes := p.remote[uid]
	if nodes == nil {
		nodes = make(map[string]struct{}, 1)
		p.remote[uid] = nodes
	}
	nodes[node] = struct{}{}
}

// checkOffline publishes uid offline unless a session of uid is left here
// or on another node. The question goes over the network, so it runs on its
// own goroutine; a login published meanwhile wins.
func (s *Service) checkOffline(uid string, lastSeen int64) {
	p := &s.social.pres
	p.mu.Lock()
	gen := p.gen[uid]
	p.mu.Unlock()
	go func() {
		node, err := s.router.OnlineElsewhere(s.life, uid)
		if err != nil {
			return // cannot tell: leave the state as it is
		}
		if node != "" {
			s.heardFrom(node)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.gen[uid] != gen {
			return
		}
		if node != "" && len(p.subs[uid]) > 0 {
			p.remoteOn(uid, node)
		}
		p.publish(uid, node != "" || s.isOnline(uid), lastSeen)
	}()
}

// presenceVisible returns the users of ids (valid, distinct) that uid may see
// the presence of, in order: uid itself, friends, 1:1 peers and members of
// groups uid is in, except users who blocked uid.
func (s *Service) presenceVisible(ctx context.Context, uid string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ok := make(map[string]bool, len(ids))
	contacts, err := s.store.Contacts(ctx, uid)
	if err != nil {
		return nil, storeErr(err)
	}
	for _, c := range contacts {
		if c.State == pb.ContactState_CONTACT_STATE_FRIEND {
			ok[c.UserID] = true
		}
	}
	convs, err := s.store.Conversations(ctx, uid)
	if err != nil {
		return nil, storeErr(err)
	}
	direct := make(map[string]bool)
	var groups []string
	for _, conv := range convs {
		if isGroup(conv) {
			groups = append(groups, conv)
		} else if peer, found := directPeer(conv, uid); found {
			direct[peer] = true
		}
	}
	var rest []string
	for _, t := range ids {
		if t == uid || ok[t] || direct[t] {
			ok[t] = true
		} else {
			rest = append(rest, t)
		}
	}
	for _, conv := range groups {
		if len(rest) == 0 {
			break
		}
		g, err := s.group(ctx, conv)
		if errors.Is(err, errDenied) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, member := g.members[uid]; !member {
			continue
		}
		left := rest[:0]
		for _, t := range rest {
			if _, in := g.members[t]; in {
				ok[t] = true
			} else {
				left = append(left, t)
			}
		}
		rest = left
	}
	out := make([]string, 0, len(ids))
	for _, t := range ids {
		if !ok[t] {
			continue
		}
		if t != uid {
			e, err := s.relation(ctx, uid, t)
			if err != nil {
				return nil, err
			}
			if e.blocked {
				continue
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func (s *Service) subscribePresence(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.SubscribePresence) error {
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	visible, err := s.presenceVisible(ctx, sess.UserID, ids)
	if err != nil {
		return err
	}
	// Ask the other nodes about users nobody here follows yet; the answers
	// (like last seen, read before the lock) may age, the watch then
	// taken brings every later change.
	remote := s.queryOnline(ctx, visible)
	// Read last-seen times before taking the lock: the store is slow next to it.
	last := make([]int64, len(visible))
	for i, u := range visible {
		t, err := s.lastSeenOf(ctx, u)
		if err != nil {
			return storeErr(err)
		}
		if !t.IsZero() {
			last[i] = t.UnixMilli()
		}
	}
	p := &s.social.pres
	p.mu.Lock()
	defer p.mu.Unlock()
	mine := p.bySess[sess]
	n := len(mine)
	for _, u := range visible {
		if _, have := mine[u]; !have {
			n++
		}
	}
	if n > maxPresenceSubs {
		return errTooLarge // nothing changed
	}
	list := &pb.PresenceList{Users: make([]*pb.Presence, 0, len(visible))}
	if len(visible) > 0 && mine == nil {
		mine = make(map[string]struct{}, len(visible))
		p.bySess[sess] = mine
	}
	for i, u := range visible {
		mine[u] = struct{}{}
		subs := p.subs[u]
		if subs == nil {
			subs = make(map[*session.Session]struct{})
			p.subs[u] = subs
			p.watch(u, true)
			if node, ok := remote[u]; ok {
				// Nobody here followed u: what the other nodes said is the state.
				if node != "" {
					p.remoteOn(u, node)
				}
				if node != "" || s.isOnline(u) {
					p.online[u] = struct{}{}
				} else {
					delete(p.online, u)
				}
			}
		}
		subs[sess] = struct{}{}
		_, on := p.online[u]
		list.Users = append(list.Users, &pb.Presence{UserId: u, Online: on, LastSeen: last[i]})
	}
	// Sent under the lock, so no PresenceEvent of these users can overtake it.
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Presence{Presence: list}})
	return nil
}

func (s *Service) unsubscribePresence(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.UnsubscribePresence) error {
	ids, err := s.validMembers(r.UserIds)
	if err != nil {
		return err
	}
	p := &s.social.pres
	if len(ids) == 0 {
		p.dropSession(sess) // an empty list ends every subscription
	} else {
		p.mu.Lock()
		for _, u := range ids {
			p.unsubscribe(sess, u)
		}
		p.mu.Unlock()
	}
	s.replyOK(c, id)
	return nil
}
