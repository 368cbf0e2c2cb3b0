// Package presence tells users who is online: subscriptions to other users'
// presence, the online and offline events fanned out to subscribers, the
// rules of whose presence a user may follow, and last-seen times.
//
// Presence exists only in memory, per node. In a cluster each node publishes
// its own users' logins and logouts (the chat service carries those reports
// between nodes and hands them to [Hub.Remote]); a user goes offline for the
// followers on a node only when no node holds a session of theirs.
//
// Errors are package reqerr's, ready to answer a request with.
package presence

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/contacts"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// MaxSubscriptions is the number of users one session may follow.
const MaxSubscriptions = 1000

// Circles is what presence needs to know of a user's conversations, which
// the chat service keeps.
type Circles interface {
	// Conversations returns the peers of uid's 1:1 conversations and the
	// ids of uid's group conversations.
	Conversations(ctx context.Context, uid string) (peers, groups []string, err error)
	// GroupMembers returns the current members of group conv, keyed by user
	// id; reqerr.Denied when the group is gone.
	GroupMembers(ctx context.Context, conv string) (map[string]store.Member, error)
}

// Cluster is what presence needs of the other nodes.
type Cluster interface {
	// OnlineElsewhere returns the id of another node holding a session of
	// uid, or "" when none does.
	OnlineElsewhere(ctx context.Context, uid string) (node string, err error)
	// HeardFrom notes that node is alive (it answered for a user).
	HeardFrom(node string)
}

// Config is what a Hub is built from.
type Config struct {
	Store    store.Store
	Contacts *contacts.Book    // blocks hide a user's presence from the blocked
	Sessions *session.Registry // this node's sessions: who is online here
	Circles  Circles
	// Cluster is nil on a single node.
	Cluster Cluster
	// Watch is told when a user gains (true) or loses (false) their first or
	// last subscriber on this node, so reports about them from other nodes
	// are received. Called with the Hub's lock held: it must not call back
	// into the Hub.
	Watch func(uid string, on bool)
	Log   *slog.Logger
	// Life bounds the Hub's background work (last-seen writes, questions to
	// other nodes): the service's lifetime. nil: never cancelled.
	Life context.Context
}

// Hub is this node's view of who is online and who follows whom.
// One lock covers it all: transitions and subscriptions are ordered, so a
// subscriber sees its PresenceList and then every later change, in order.
type Hub struct {
	cfg      Config
	lastSeen lastSeenWriter

	mu sync.Mutex
	// online holds the users with a session on this node (or, for users
	// followed here, on any node), as last published to subscribers.
	// Guarded by mu.
	online map[string]struct{}
	// subs maps a user to the sessions subscribed to their presence. Guarded by mu.
	subs map[string]map[*session.Session]struct{}
	// bySess maps a subscribing session to the users it follows (at most
	// MaxSubscriptions). Guarded by mu.
	bySess map[*session.Session]map[string]struct{}
	// gen counts the online transitions published for users with
	// subscribers, so a slow offline check (cluster) yields to a later
	// login. Guarded by mu.
	gen map[string]uint64
	// remote maps a followed user to the other nodes known to hold them
	// (cluster), so a node that dies without a word can be written off
	// (NodesGone). Guarded by mu.
	remote map[string]map[string]struct{}
}

// New returns an empty Hub.
func New(cfg Config) *Hub {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Life == nil {
		cfg.Life = context.Background()
	}
	h := &Hub{
		cfg:    cfg,
		online: make(map[string]struct{}),
		subs:   make(map[string]map[*session.Session]struct{}),
		bySess: make(map[*session.Session]map[string]struct{}),
		gen:    make(map[string]uint64),
		remote: make(map[string]map[string]struct{}),
	}
	h.lastSeen.store, h.lastSeen.log, h.lastSeen.life = cfg.Store, cfg.Log, cfg.Life
	h.lastSeen.pending = make(map[string]time.Time)
	return h
}

func (h *Hub) localOnline(uid string) bool { return len(h.cfg.Sessions.Sessions(uid)) > 0 }

// publish brings uid's published state in line with on; on a change it
// pushes a PresenceEvent to uid's subscribers. Called with mu held.
func (h *Hub) publish(uid string, on bool, lastSeen int64) {
	_, was := h.online[uid]
	if on == was {
		return
	}
	if on {
		h.online[uid] = struct{}{}
	} else {
		delete(h.online, uid)
	}
	subs := h.subs[uid]
	if len(subs) == 0 {
		return
	}
	if on {
		h.gen[uid]++
	}
	if !on && lastSeen == 0 {
		lastSeen = time.Now().UnixMilli()
	}
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_PresenceEvent{PresenceEvent: &pb.PresenceEvent{
		Presence: &pb.Presence{UserId: uid, Online: on, LastSeen: lastSeen}}}})
	for sub := range subs {
		sub.Conn.Send(out) // only queues; never calls back into the hub
	}
}

// unsubscribe removes sess's subscription to target. Called with mu held.
func (h *Hub) unsubscribe(sess *session.Session, target string) {
	if subs := h.subs[target]; subs != nil {
		if _, in := subs[sess]; in {
			delete(subs, sess)
			if len(subs) == 0 {
				delete(h.subs, target)
				delete(h.gen, target)
				delete(h.remote, target)
				h.cfg.Watch(target, false)
			}
		}
	}
	if mine := h.bySess[sess]; mine != nil {
		delete(mine, target)
		if len(mine) == 0 {
			delete(h.bySess, sess)
		}
	}
}

// Unsubscribe ends sess's subscriptions to users; none named ends them all.
func (h *Hub) Unsubscribe(sess *session.Session, users []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(users) == 0 {
		for target := range h.bySess[sess] {
			h.unsubscribe(sess, target)
		}
		return
	}
	for _, u := range users {
		h.unsubscribe(sess, u)
	}
}

// DropSubscriber ends the subscriptions of subscriber's sessions to target
// (target blocked subscriber).
func (h *Hub) DropSubscriber(target, subscriber string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sess := range h.subs[target] {
		if sess.UserID == subscriber {
			h.unsubscribe(sess, target)
		}
	}
}

// Opened runs after a session of uid was added to the registry.
func (h *Hub) Opened(uid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publish(uid, h.localOnline(uid), 0)
}

// Closed runs after sess was removed from the registry (or kicked): it ends
// sess's subscriptions and, when it was the user's last session on this
// node, records last seen and tells subscribers the user went offline.
func (h *Hub) Closed(sess *session.Session) {
	h.Unsubscribe(sess, nil)
	uid := sess.UserID
	var lastSeen int64
	if !h.localOnline(uid) {
		now := time.Now()
		lastSeen = now.UnixMilli()
		h.lastSeen.record(uid, now)
	}
	if lastSeen != 0 && h.cfg.Cluster != nil {
		h.CheckOffline(uid, lastSeen) // the user may be online on another node
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The registry, not this call, decides: a session opened meanwhile
	// keeps the user online.
	h.publish(uid, h.localOnline(uid), lastSeen)
}

// queryOnline asks the other nodes whether the users not online here and
// not followed here are online there: a node holding each, or "" (nil on a
// single node).
func (h *Hub) queryOnline(ctx context.Context, users []string) map[string]string {
	cl := h.cfg.Cluster
	if cl == nil {
		return nil
	}
	var ask []string
	h.mu.Lock()
	for _, u := range users {
		if len(h.subs[u]) == 0 && !h.localOnline(u) {
			ask = append(ask, u)
		}
	}
	h.mu.Unlock()
	res := make(map[string]string, len(ask))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, u := range ask {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			node, err := cl.OnlineElsewhere(ctx, u)
			if err != nil {
				node = ""
			} else if node != "" {
				cl.HeardFrom(node) // it may die before its first heartbeat reaches us
			}
			mu.Lock()
			res[u] = node
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res
}

// Remote applies node's report that uid came online there (on) or has no
// session left there.
func (h *Hub) Remote(uid, node string, on bool) {
	h.mu.Lock()
	if !on {
		if nodes := h.remote[uid]; nodes != nil {
			delete(nodes, node)
		}
		h.mu.Unlock()
		h.CheckOffline(uid, 0)
		return
	}
	defer h.mu.Unlock()
	if len(h.subs[uid]) > 0 {
		h.remoteOn(uid, node)
	}
	h.publish(uid, true, 0)
}

// remoteOn records that node holds uid (a user followed here). Called with mu held.
func (h *Hub) remoteOn(uid, node string) {
	nodes := h.remote[uid]
	if nodes == nil {
		nodes = make(map[string]struct{}, 1)
		h.remote[uid] = nodes
	}
	nodes[node] = struct{}{}
}

// NodesGone writes off nodes taken for dead: the followed users that only
// they were known to hold are checked, and go offline unless found elsewhere.
func (h *Hub) NodesGone(dead []string) {
	var check []string
	h.mu.Lock()
	for uid, nodes := range h.remote {
		had := len(nodes)
		for _, node := range dead {
			delete(nodes, node)
		}
		if had > 0 && len(nodes) == 0 {
			check = append(check, uid)
		}
	}
	h.mu.Unlock()
	for _, uid := range check {
		h.CheckOffline(uid, 0)
	}
}

// CheckOffline publishes uid offline (last seen at lastSeen, unix ms; 0:
// now) unless a session of uid is left here or on another node. The question
// goes over the network, so it runs on its own goroutine; a login published
// meanwhile wins. On a single node it decides at once.
func (h *Hub) CheckOffline(uid string, lastSeen int64) {
	cl := h.cfg.Cluster
	h.mu.Lock()
	if cl == nil {
		defer h.mu.Unlock()
		h.publish(uid, h.localOnline(uid), lastSeen)
		return
	}
	gen := h.gen[uid]
	h.mu.Unlock()
	go func() {
		node, err := cl.OnlineElsewhere(h.cfg.Life, uid)
		if err != nil {
			return // cannot tell: leave the state as it is
		}
		if node != "" {
			cl.HeardFrom(node)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.gen[uid] != gen {
			return
		}
		if node != "" && len(h.subs[uid]) > 0 {
			h.remoteOn(uid, node)
		}
		h.publish(uid, node != "" || h.localOnline(uid), lastSeen)
	}()
}

// Visible returns the users of ids (valid, distinct) that uid may see the
// presence of, in order: uid itself, friends, 1:1 peers and members of
// groups uid is in, except users who blocked uid.
func (h *Hub) Visible(ctx context.Context, uid string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ok := make(map[string]bool, len(ids))
	friends, err := h.cfg.Contacts.Friends(ctx, uid)
	if err != nil {
		return nil, err
	}
	for _, f := range friends {
		ok[f] = true
	}
	peers, groups, err := h.cfg.Circles.Conversations(ctx, uid)
	if err != nil {
		return nil, err
	}
	for _, p := range peers {
		ok[p] = true
	}
	var rest []string
	for _, t := range ids {
		if t == uid || ok[t] {
			ok[t] = true
		} else {
			rest = append(rest, t)
		}
	}
	for _, conv := range groups {
		if len(rest) == 0 {
			break
		}
		members, err := h.cfg.Circles.GroupMembers(ctx, conv)
		if errors.Is(err, reqerr.Denied) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if _, member := members[uid]; !member {
			continue
		}
		left := rest[:0]
		for _, t := range rest {
			if _, in := members[t]; in {
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
			e, err := h.cfg.Contacts.Relation(ctx, uid, t)
			if err != nil {
				return nil, err
			}
			if e.Blocked {
				continue
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// Subscribe makes sess follow those of ids (valid, distinct) whose presence
// its user may see, and hands reply their current state. reply is called
// with the Hub's lock held, so no PresenceEvent of these users can overtake
// it; it must only queue. Following more than MaxSubscriptions users in all
// fails with reqerr.TooLarge, and nothing changes.
func (h *Hub) Subscribe(ctx context.Context, sess *session.Session, ids []string, reply func(*pb.PresenceList)) error {
	visible, err := h.Visible(ctx, sess.UserID, ids)
	if err != nil {
		return err
	}
	// Ask the other nodes about users nobody here follows yet; the answers
	// (like last seen, read before the lock) may age, the watch then
	// taken brings every later change.
	remote := h.queryOnline(ctx, visible)
	// Read last-seen times before taking the lock: the store is slow next to it.
	last := make([]int64, len(visible))
	for i, u := range visible {
		t, err := h.LastSeen(ctx, u)
		if err != nil {
			return reqerr.Store(err)
		}
		if !t.IsZero() {
			last[i] = t.UnixMilli()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	mine := h.bySess[sess]
	n := len(mine)
	for _, u := range visible {
		if _, have := mine[u]; !have {
			n++
		}
	}
	if n > MaxSubscriptions {
		return reqerr.TooLarge
	}
	list := &pb.PresenceList{Users: make([]*pb.Presence, 0, len(visible))}
	if len(visible) > 0 && mine == nil {
		mine = make(map[string]struct{}, len(visible))
		h.bySess[sess] = mine
	}
	for i, u := range visible {
		mine[u] = struct{}{}
		subs := h.subs[u]
		if subs == nil {
			subs = make(map[*session.Session]struct{})
			h.subs[u] = subs
			h.cfg.Watch(u, true)
			if node, ok := remote[u]; ok {
				// Nobody here followed u: what the other nodes said is the state.
				if node != "" {
					h.remoteOn(u, node)
				}
				if node != "" || h.localOnline(u) {
					h.online[u] = struct{}{}
				} else {
					delete(h.online, u)
				}
			}
		}
		subs[sess] = struct{}{}
		_, on := h.online[u]
		list.Users = append(list.Users, &pb.Presence{UserId: u, Online: on, LastSeen: last[i]})
	}
	reply(list)
	return nil
}
