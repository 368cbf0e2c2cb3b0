package chat

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Cluster mode: what this node tells the others, and what it does with what
// they tell it. In process (one node) every Publish is a no-op and no
// envelope ever arrives, so none of this costs anything.

// Envelope kinds (route.Envelope.Kind); 0 is a frame to deliver.
const (
	kindFrame        = 0
	kindKick         = 1 // TopicAll: a session opened elsewhere; Keys: user, device type, device id, session id, start (Unix ns). (TopicUser, without the user key: from older nodes)
	kindClose        = 2 // TopicAll: close a user's sessions; Keys: user, code, reason, session id ("": any), token id ("": any)
	kindGroupChanged = 3 // TopicAll: Keys: conv, then "+uid" (joined) or "-uid" (left) per changed member
	kindPresence     = 4 // TopicPresence: Keys: "1" (online here) or "0" (offline here)
	kindSessions     = 5 // TopicNode: push Data to the sessions with the ids in Keys
	kindNodeAlive    = 6 // TopicAll: Keys: the node's id; every peerBeat
	kindListSessions = 7 // TopicUser, a question: the user's sessions on the answering node (JSON)
	kindRoomOnline   = 8 // TopicRoom, a question: the room's sessions on the answering node (decimal)
)

// gatherWait is how long a question to the other nodes waits for answers.
// Nobody knows how many will come (only nodes with an interest hear it, and
// the heartbeats may not have told of every node yet), so it always waits
// this long: for admin reads only.
const gatherWait = 100 * time.Millisecond

// A node says it is alive every peerBeat; one silent for peerTimeout is
// taken for dead, and the users only it held go offline for their followers.
const (
	peerBeat    = 2 * time.Second
	peerTimeout = 3 * peerBeat
)

// simultaneousLogin is how young a session must be for a kick from another
// node to count as a crossing login (the kicks of both may be in flight);
// an older session always yields to the newcomer.
const simultaneousLogin = 2 * time.Second

// clusterState is which interests this node holds for its online users.
type clusterState struct {
	mu    sync.Mutex
	users map[string]*userInterest // guarded by mu; users with a session here
	peers map[string]time.Time     // guarded by mu; other nodes, when last heard of
	// twinAt is when another node last said it had this node's id (a
	// misconfiguration that would mix up session and message ids). Guarded by mu.
	twinAt time.Time
	// loading holds, per group being loaded from storage for a delivery
	// from another node, the frames that arrived meanwhile, in order: the
	// receive goroutine never waits on storage. Guarded by mu.
	loading map[string][]remoteGroupFrame
}

// remoteGroupFrame is a group frame from another node waiting for its group to load.
type remoteGroupFrame struct {
	out    *wire.Outbound
	except string
	skip   []string // sorted: users it was delivered to individually
}

type userInterest struct {
	sessions int
	groups   map[string]struct{} // the groups watched for this user
}

// clusterOpened watches sess's user and, for the user's first session here,
// the user's groups (so group messages cross to this node), and waits until
// NATS has the interests. It runs before AuthOk.
func (s *Service) clusterOpened(sess *session.Session) {
	if !s.router.Clustered() {
		return
	}
	uid := sess.UserID
	s.router.Watch(route.TopicUser, uid)
	c := &s.cluster
	c.mu.Lock()
	ui := c.users[uid]
	first := ui == nil
	if first {
		ui = &userInterest{groups: make(map[string]struct{})}
		c.users[uid] = ui
	}
	ui.sessions++
	c.mu.Unlock()
	if !first {
		return
	}
	s.publish(&route.Envelope{Topic: route.TopicPresence, Key: uid, Kind: kindPresence, Keys: []string{"1", s.nodeID}})
	convs, err := s.store.Conversations(s.life, uid)
	if err != nil {
		// The client's sync still brings every message; live group
		// delivery to this session waits for its next login.
		s.log.Warn("cluster: user's groups not loaded", "err", err)
	}
	c.mu.Lock()
	if c.users[uid] == ui { // else closed meanwhile
		for _, conv := range convs {
			if _, ok := ui.groups[conv]; isGroup(conv) && !ok {
				ui.groups[conv] = struct{}{}
				s.router.Watch(route.TopicGroup, conv)
			}
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.life, 2*time.Second)
	defer cancel()
	if err := s.router.Barrier(ctx); err != nil {
		s.log.Warn("cluster: interests not confirmed", "err", err)
	}
}

// clusterKick tells the other nodes that sess opened, so they close the
// user's sessions it replaces under the kick policy. It runs once sess is in
// the registry, so a kick crossing it from another node finds it: of two
// crossing logins, each node then hears the other's kick while holding its
// own session, and both rank the two the same way (receiveKick).
func (s *Service) clusterKick(sess *session.Session) {
	if s.router.Clustered() {
		s.publish(kickEnvelope(sess))
	}
}

// kickEnvelope goes to every node, not to the user's subject: a node's
// interest in a user it just subscribed to reaches the other NATS servers
// over their routes a moment later, so two logins crossing on two nodes
// could each miss the other's kick. Every node has long subscribed to
// TopicAll.
func kickEnvelope(sess *session.Session) *route.Envelope {
	return &route.Envelope{Topic: route.TopicAll, Kind: kindKick,
		Keys: []string{sess.UserID, sess.DeviceType, sess.DeviceID, sess.ID, strconv.FormatInt(sess.Started.UnixNano(), 10)}}
}

// receiveKick closes this node's sessions that newcomer, a session opened on
// another node, replaces (session.Registry.Evict has the rule), and
// announces again those that rank after it: the newcomer's node may not have
// heard of them (their kick went out before that node subscribed to the
// user), and closes the newcomer when it hears.
func (s *Service) receiveKick(uid string, keys []string) {
	if len(keys) != 3 && len(keys) != 4 {
		s.malformedEnvelope()
		return
	}
	now := time.Now()
	newcomer := &session.Session{UserID: uid, DeviceType: keys[0], DeviceID: keys[1], ID: keys[2], Started: now}
	if len(keys) == 4 { // else from a node that predates start times: it ranks as new
		ns, err := strconv.ParseInt(keys[3], 10, 64)
		if err != nil {
			s.malformedEnvelope()
			return
		}
		newcomer.Started = time.Unix(0, ns)
	}
	kicked, stayed := s.sessions.Evict(newcomer, now, simultaneousLogin)
	for _, old := range kicked {
		s.stats.kicked.Add(1)
		old.Conn.Close(pb.DisconnectCode_DISCONNECT_CODE_KICKED, "signed in on another device of the same type")
	}
	for _, o := range stayed {
		s.publish(kickEnvelope(o))
	}
}

// clusterClosed drops the interests sess held.
func (s *Service) clusterClosed(sess *session.Session) {
	if !s.router.Clustered() {
		return
	}
	uid := sess.UserID
	s.router.Unwatch(route.TopicUser, uid)
	c := &s.cluster
	c.mu.Lock()
	ui := c.users[uid]
	if ui == nil {
		c.mu.Unlock()
		return
	}
	ui.sessions--
	last := ui.sessions == 0
	if last {
		delete(c.users, uid)
		for conv := range ui.groups {
			s.router.Unwatch(route.TopicGroup, conv)
		}
	}
	c.mu.Unlock()
	if last {
		s.publish(&route.Envelope{Topic: route.TopicPresence, Key: uid, Kind: kindPresence, Keys: []string{"0", s.nodeID}})
	}
}

// groupChanged follows a membership change: this node watches the group for
// its online users who joined and stops for those who left; other nodes are
// told to drop their cached copy (and do the same).
func (s *Service) groupChanged(conv string, members []store.Member) {
	if !s.router.Clustered() {
		return
	}
	s.memberInterests(conv, members)
	keys := make([]string, 0, 1+len(members))
	keys = append(keys, conv)
	for _, m := range members {
		if m.Left {
			keys = append(keys, "-"+m.UserID)
		} else {
			keys = append(keys, "+"+m.UserID)
		}
	}
	s.publish(&route.Envelope{Topic: route.TopicAll, Kind: kindGroupChanged, Keys: keys})
}

func (s *Service) memberInterests(conv string, members []store.Member) {
	c := &s.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range members {
		ui := c.users[m.UserID]
		if ui == nil {
			continue
		}
		_, watched := ui.groups[conv]
		switch {
		case m.Left && watched:
			delete(ui.groups, conv)
			s.router.Unwatch(route.TopicGroup, conv)
		case !m.Left && !watched:
			ui.groups[conv] = struct{}{}
			s.router.Watch(route.TopicGroup, conv)
		}
	}
}

// dropGroup forgets this node's copy of a group another node changed.
func (s *Service) dropGroup(conv string) {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	if old := s.groups.m[conv]; old != nil {
		s.online.untrack(conv, old.members) // lock order: groups.mu, then online.mu
	}
	delete(s.groups.m, conv)
	s.groups.gen++
}

// deliverGroupChange delivers a group change's event: the users it concerns
// (changed members, extra) individually, as nodes may not yet watch the
// group for them; the other online members through the group.
func (s *Service) deliverGroupChange(conv string, g *groupState, changed []store.Member, extra []string, out *wire.Outbound) {
	ctx := s.life
	direct := slices.Clone(extra)
	for _, m := range changed {
		direct = append(direct, m.UserID)
	}
	slices.Sort(direct)
	direct = slices.Compact(direct)
	if !s.router.Clustered() {
		users := append(slices.Clone(g.recipients), extra...)
		if err := s.router.DeliverToUsers(ctx, users, out, "", nil); err != nil {
			s.deliveryFailed("group event", err)
		}
		return
	}
	if err := s.router.DeliverToUsers(ctx, direct, out, "", nil); err != nil {
		s.deliveryFailed("group event", err)
	}
	local, _ := s.online.online(conv)
	s.sessions.DeliverLocal(without(local, direct), out, "", nil)
	s.publish(&route.Envelope{Topic: route.TopicGroup, Key: conv, Keys: direct, Data: out.Bytes(wire.Proto)})
}

// without returns users minus the sorted list skip.
func without(users, skip []string) []string {
	if len(skip) == 0 {
		return users
	}
	out := make([]string, 0, len(users))
	for _, u := range users {
		if _, found := slices.BinarySearch(skip, u); !found {
			out = append(out, u)
		}
	}
	return out
}

// publish sends an envelope to the other nodes; a failure is logged, as
// what it carries is best effort (clients sync what they missed).
func (s *Service) publish(env *route.Envelope) {
	if err := s.router.Publish(s.life, env); err != nil {
		s.deliveryFailed("cluster event", err)
	}
}

// deliveryFailed logs a delivery to other nodes that could not go out,
// except for a lost NATS connection: the router logs that once and counts
// what it could not send, where a line per message would flood the log.
func (s *Service) deliveryFailed(what string, err error) {
	if !errors.Is(err, route.ErrNotConnected) {
		s.log.Warn("delivery to other nodes failed", "what", what, "err", err)
	}
}

// CloseUserSessions closes the user's sessions on every node, all of them or
// only the one with sessionID, or only those opened with tokenID. It returns
// how many it closed on this node.
func (s *Service) CloseUserSessions(uid string, code pb.DisconnectCode, reason, sessionID, tokenID string) int {
	n := s.closeLocal(uid, code, reason, sessionID, tokenID)
	if s.router.Clustered() {
		// To every node, not the user's subject: a session that opened a
		// moment ago may not have its interest known across the cluster
		// yet, and closes are rare.
		s.publish(&route.Envelope{Topic: route.TopicAll, Kind: kindClose,
			Keys: []string{uid, strconv.Itoa(int(code)), reason, sessionID, tokenID}})
	}
	return n
}

func (s *Service) closeLocal(uid string, code pb.DisconnectCode, reason, sessionID, tokenID string) int {
	var match func(*session.Session) bool
	if sessionID != "" || tokenID != "" {
		match = func(x *session.Session) bool {
			return (sessionID == "" || x.ID == sessionID) && (tokenID == "" || x.TokenID == tokenID)
		}
	}
	return s.sessions.CloseUser(uid, code, reason, match)
}

// SessionInfo is one online session, as the admin API lists them.
type SessionInfo struct {
	SessionID   string    `json:"session_id"`
	UserID      string    `json:"user_id"`
	DeviceID    string    `json:"device_id"`
	DeviceType  string    `json:"device_type"`
	ConnectedAt time.Time `json:"connected_at"`
}

func (s *Service) localSessions(uid string) []SessionInfo {
	list := []SessionInfo{}
	for _, x := range s.sessions.Sessions(uid) {
		list = append(list, SessionInfo{SessionID: x.ID, UserID: x.UserID, DeviceID: x.DeviceID,
			DeviceType: x.DeviceType, ConnectedAt: x.Started})
	}
	return list
}

// UserSessions lists the user's sessions on every node (in a cluster, the
// nodes that answer within gatherWait).
func (s *Service) UserSessions(ctx context.Context, uid string) []SessionInfo {
	list := s.localSessions(uid)
	answers, err := s.router.Gather(ctx, &route.Envelope{Topic: route.TopicUser, Key: uid, Kind: kindListSessions}, gatherWait)
	if err != nil {
		s.log.Warn("cluster: sessions of other nodes not listed", "err", err)
	}
	for _, a := range answers {
		var more []SessionInfo
		if json.Unmarshal(a, &more) == nil {
			list = append(list, more...)
		}
	}
	return list
}

// RoomOnlineAll is the number of sessions in the room on every node (in a
// cluster, the nodes that answer within gatherWait).
func (s *Service) RoomOnlineAll(ctx context.Context, room string) int {
	n := s.rooms.online(room)
	answers, err := s.router.Gather(ctx, &route.Envelope{Topic: route.TopicRoom, Key: room, Kind: kindRoomOnline}, gatherWait)
	if err != nil {
		s.log.Warn("cluster: room counts of other nodes not read", "err", err)
	}
	for _, a := range answers {
		if k, err := strconv.Atoi(string(a)); err == nil && k > 0 {
			n += k
		}
	}
	return n
}

// Answer implements route.Node.
func (s *Service) Answer(env *route.Envelope) ([]byte, bool) {
	switch {
	case env.Kind == kindListSessions && env.Topic == route.TopicUser:
		list := s.localSessions(env.Key)
		if len(list) == 0 {
			return nil, false
		}
		b, err := json.Marshal(list)
		return b, err == nil
	case env.Kind == kindRoomOnline && env.Topic == route.TopicRoom:
		return []byte(strconv.Itoa(s.rooms.online(env.Key))), true
	}
	return nil, false
}

// HasUser implements route.Node.
func (s *Service) HasUser(uid string) bool { return s.isOnline(uid) }

// Receive implements route.Node: an envelope from another node.
func (s *Service) Receive(env *route.Envelope, hold *wire.Hold) {
	switch env.Kind {
	case kindFrame:
		s.receiveFrame(env, hold)
	case kindKick:
		uid, keys := env.Key, env.Keys
		if env.Topic == route.TopicAll {
			if len(keys) == 0 {
				s.malformedEnvelope()
				return
			}
			uid, keys = keys[0], keys[1:]
		}
		s.receiveKick(uid, keys)
	case kindClose:
		if len(env.Keys) != 5 {
			s.malformedEnvelope()
			return
		}
		code, err := strconv.Atoi(env.Keys[1])
		if err != nil {
			s.malformedEnvelope()
			return
		}
		s.closeLocal(env.Keys[0], pb.DisconnectCode(code), env.Keys[2], env.Keys[3], env.Keys[4])
	case kindGroupChanged:
		if len(env.Keys) == 0 {
			s.malformedEnvelope()
			return
		}
		conv := env.Keys[0]
		s.dropGroup(conv)
		members := make([]store.Member, 0, len(env.Keys)-1)
		for _, k := range env.Keys[1:] {
			if len(k) > 1 {
				members = append(members, store.Member{UserID: k[1:], Left: k[0] == '-'})
			}
		}
		s.memberInterests(conv, members)
	case kindPresence:
		if len(env.Keys) != 2 {
			s.malformedEnvelope()
			return
		}
		s.heardFrom(env.Keys[1])
		s.remotePresence(env.Key, env.Keys[1], env.Keys[0] == "1")
	case kindNodeAlive:
		if len(env.Keys) != 1 {
			s.malformedEnvelope()
			return
		}
		if env.Keys[0] == s.nodeID { // NATS does not echo this node's own
			s.cluster.mu.Lock()
			s.cluster.twinAt = time.Now()
			s.cluster.mu.Unlock()
			s.log.Error("cluster: another node has this node's node_id; give every node its own", "node_id", s.nodeID)
			return
		}
		s.heardFrom(env.Keys[0])
	case kindSessions:
		out := wire.OutboundFromProto(env.Data) // NATS gives each message its own copy
		n := 0
		for _, id := range env.Keys {
			if sess := s.sessions.ByID(id); sess != nil && sess.Conn.Send(out) {
				n++
			}
		}
		s.stats.deliveries.Add(uint64(n))
	default:
		s.malformedEnvelope() // a kind this node does not know
	}
}

// malformedEnvelope counts an envelope from another node that decoded but
// does not hold what its kind needs: dropped, counted, never logged one by
// one (a faulty node would flood the log).
func (s *Service) malformedEnvelope() { s.stats.malformed.Add(1) }

func (s *Service) receiveFrame(env *route.Envelope, hold *wire.Hold) {
	out := wire.OutboundFromProto(env.Data)
	switch env.Topic {
	case route.TopicUser:
		s.sessions.DeliverLocal([]string{env.Key}, out, env.Except, hold)
	case route.TopicGroup:
		f := remoteGroupFrame{out: out, except: env.Except}
		if len(env.Keys) > 0 {
			f.skip = slices.Clone(env.Keys)
			slices.Sort(f.skip)
		}
		s.receiveGroupFrame(env.Key, f, hold)
	case route.TopicRoom:
		s.stats.deliveries.Add(uint64(s.rooms.broadcast(env.Key, out, nil)))
	case route.TopicAll:
		s.stats.deliveries.Add(uint64(s.pushAllLocal(out)))
	}
}

// ClusterError reports a cluster misconfiguration this node has seen
// lately (nil when none): the node is then not ready.
func (s *Service) ClusterError() error {
	c := &s.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.twinAt.IsZero() && time.Since(c.twinAt) < peerTimeout {
		return errors.New("another node uses this node's node_id")
	}
	return nil
}

func (s *Service) heardFrom(node string) {
	c := &s.cluster
	c.mu.Lock()
	c.peers[node] = time.Now()
	c.mu.Unlock()

}

// peerLoop says this node is alive every peerBeat and writes off the nodes
// silent for peerTimeout: the users only they held go offline for their
// followers here (a killed node sends no offline reports).
func (s *Service) peerLoop() {
	defer s.wg.Done()
	t := time.NewTicker(peerBeat)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.publish(&route.Envelope{Topic: route.TopicAll, Kind: kindNodeAlive, Keys: []string{s.nodeID}})
		s.sweepPeers(time.Now())
	}
}

func (s *Service) sweepPeers(now time.Time) {
	c := &s.cluster
	var dead []string
	c.mu.Lock()
	for node, at := range c.peers {
		if now.Sub(at) > peerTimeout {
			dead = append(dead, node)
			delete(c.peers, node)
		}
	}
	c.mu.Unlock()
	if len(dead) == 0 {
		return
	}
	s.log.Warn("cluster: nodes silent, taken for dead", "nodes", dead)
	p := &s.social.pres
	var check []string
	p.mu.Lock()
	for uid, nodes := range p.remote {
		had := len(nodes)
		for _, node := range dead {
			delete(nodes, node)
		}
		if had > 0 && len(nodes) == 0 {
			check = append(check, uid)
		}
	}
	p.mu.Unlock()
	for _, uid := range check {
		s.checkOffline(uid, 0)
	}
}

// receiveGroupFrame delivers a group frame from another node to this node's
// online members. A group not in the cache is loaded on its own goroutine,
// frames for it queueing meanwhile, so the receive goroutine never waits on
// storage (a large group's members can take many queries).
func (s *Service) receiveGroupFrame(conv string, f remoteGroupFrame, hold *wire.Hold) {
	c := &s.cluster
	c.mu.Lock()
	if q, busy := c.loading[conv]; busy {
		c.loading[conv] = append(q, f)
		c.mu.Unlock()
		return
	}
	s.groups.mu.RLock()
	cached := s.groups.m[conv] != nil
	s.groups.mu.RUnlock()
	if cached {
		c.mu.Unlock()
		s.deliverGroupFrame(conv, f, hold)
		return
	}
	c.loading[conv] = []remoteGroupFrame{f}
	c.mu.Unlock()
	go func() {
		_, _ = s.group(s.life, conv) // errors: groupRecipients below finds none
		for {
			c.mu.Lock()
			q := c.loading[conv]
			if len(q) == 0 {
				delete(c.loading, conv)
				c.mu.Unlock()
				return
			}
			c.loading[conv] = q[:0:0]
			c.mu.Unlock()
			for _, f := range q {
				s.deliverGroupFrame(conv, f, nil)
			}
		}
	}()
}

func (s *Service) deliverGroupFrame(conv string, f remoteGroupFrame, hold *wire.Hold) {
	users := s.groupRecipients(conv)
	if len(f.skip) > 0 {
		users = without(users, f.skip)
	}
	s.sessions.DeliverLocal(users, f.out, f.except, hold)
}

// publishFrame sends a frame to the other nodes with an interest in t/key.
func (s *Service) publishFrame(t route.Topic, key string, out *wire.Outbound) {
	if s.router.Clustered() {
		s.publish(&route.Envelope{Topic: t, Key: key, Data: out.Bytes(wire.Proto)})
	}
}

// sessionNode is the node id a session id ("<node>-<n>") was issued by.
func sessionNode(id string) string {
	node, _, _ := strings.Cut(id, "-")
	return node
}
