package chat

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/cluster/clusterpb"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Cluster mode: what this node tells the others, and what it does with what
// they tell it. In process (one node) every Publish is a no-op and no
// envelope ever arrives, so none of this costs anything.

// The events (proto/parley/cluster/v1/cluster.proto) and the topics they
// go to: Frame to a user, group, room or every node; Kick, Close,
// GroupChanged and NodeAlive (every peerBeat) to every node; Presence to the
// user's presence subject; Sessions to one node; SessionsQuestion to a user,
// RoomOnlineQuestion to a room.

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
	s.publish(&route.Envelope{Topic: route.TopicPresence, Key: uid, Msg: presenceEvent(true, s.nodeID)})
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
	return &route.Envelope{Topic: route.TopicAll, Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_Kick{Kick: &clusterpb.Kick{
		UserId: sess.UserID, DeviceType: sess.DeviceType, DeviceId: sess.DeviceID, SessionId: sess.ID,
		StartedUnixNano: sess.Started.UnixNano()}}}}
}

func presenceEvent(online bool, node string) *clusterpb.Envelope {
	return &clusterpb.Envelope{Event: &clusterpb.Envelope_Presence{Presence: &clusterpb.Presence{Online: online, Node: node}}}
}

// receiveKick closes this node's sessions that newcomer, a session opened on
// another node, replaces (session.Registry.Evict has the rule), and
// announces again those that rank after it: the newcomer's node may not have
// heard of them (their kick went out before that node subscribed to the
// user), and closes the newcomer when it hears.
func (s *Service) receiveKick(k *clusterpb.Kick) {
	if k.UserId == "" || k.SessionId == "" {
		s.malformedEnvelope()
		return
	}
	now := time.Now()
	newcomer := &session.Session{UserID: k.UserId, DeviceType: k.DeviceType, DeviceID: k.DeviceId, ID: k.SessionId,
		Started: time.Unix(0, k.StartedUnixNano)}
	if k.StartedUnixNano == 0 { // unknown: it ranks as new
		newcomer.Started = now
	}
	kicked, stayed := s.sessions.Evict(newcomer, now, simultaneousLogin)
	for _, old := range kicked {
		s.stats.kicked.Add(1)
		old.Conn.Close(pb.DisconnectCode_DISCONNECT_CODE_KICKED, "signed in on another device of the same type")
		s.deviceKicked(old, k.DeviceId)
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
		s.publish(&route.Envelope{Topic: route.TopicPresence, Key: uid, Msg: presenceEvent(false, s.nodeID)})
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
	ev := &clusterpb.GroupChanged{ConversationId: conv}
	for _, m := range members {
		if m.Left {
			ev.Left = append(ev.Left, m.UserID)
		} else {
			ev.Joined = append(ev.Joined, m.UserID)
		}
	}
	s.publish(&route.Envelope{Topic: route.TopicAll, Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_GroupChanged{GroupChanged: ev}}})
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
	s.publish(&route.Envelope{Topic: route.TopicGroup, Key: conv, Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{
		SkipUsers: direct, Frame: out.Bytes(wire.Proto)}}}})
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
		s.publish(&route.Envelope{Topic: route.TopicAll, Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_Close{Close: &clusterpb.Close{
			UserId: uid, Code: int32(code), Reason: reason, SessionId: sessionID, TokenId: tokenID}}}})
	}
	return n
}

func (s *Service) closeLocal(uid string, code pb.DisconnectCode, reason, sessionID, tokenID string) int {
	s.closes.note(uid)
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

// sessionsAnswer is this node's answer to a SessionsQuestion about uid.
func (s *Service) sessionsAnswer(uid string) *clusterpb.SessionsAnswer {
	var a clusterpb.SessionsAnswer
	for _, x := range s.sessions.Sessions(uid) {
		a.Sessions = append(a.Sessions, &clusterpb.SessionInfo{SessionId: x.ID, UserId: x.UserID, DeviceId: x.DeviceID,
			DeviceType: x.DeviceType, ConnectedUnixNano: x.Started.UnixNano()})
	}
	return &a
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
	answers, err := s.router.Gather(ctx, &route.Envelope{Topic: route.TopicUser, Key: uid,
		Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_SessionsQuestion{SessionsQuestion: &clusterpb.SessionsQuestion{}}}}, gatherWait)
	if err != nil {
		s.log.Warn("cluster: sessions of other nodes not listed", "err", err)
	}
	for _, a := range answers {
		for _, x := range a.GetSessionsAnswer().GetSessions() {
			list = append(list, SessionInfo{SessionID: x.SessionId, UserID: x.UserId, DeviceID: x.DeviceId,
				DeviceType: x.DeviceType, ConnectedAt: time.Unix(0, x.ConnectedUnixNano)})
		}
	}
	return list
}

// RoomOnlineAll is the number of sessions in the room on every node (in a
// cluster, the nodes that answer within gatherWait).
func (s *Service) RoomOnlineAll(ctx context.Context, room string) int {
	n := s.rooms.online(room)
	answers, err := s.router.Gather(ctx, &route.Envelope{Topic: route.TopicRoom, Key: room,
		Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_RoomOnlineQuestion{RoomOnlineQuestion: &clusterpb.RoomOnlineQuestion{}}}}, gatherWait)
	if err != nil {
		s.log.Warn("cluster: room counts of other nodes not read", "err", err)
	}
	for _, a := range answers {
		if k := a.GetRoomOnlineAnswer().GetSessions(); k > 0 {
			n += int(k)
		}
	}
	return n
}

// Answer implements route.Node.
func (s *Service) Answer(env *route.Envelope) (*clusterpb.Envelope, bool) {
	switch {
	case env.Msg.GetSessionsQuestion() != nil && env.Topic == route.TopicUser:
		a := s.sessionsAnswer(env.Key)
		if len(a.Sessions) == 0 {
			return nil, false
		}
		return &clusterpb.Envelope{Event: &clusterpb.Envelope_SessionsAnswer{SessionsAnswer: a}}, true
	case env.Msg.GetRoomOnlineQuestion() != nil && env.Topic == route.TopicRoom:
		return &clusterpb.Envelope{Event: &clusterpb.Envelope_RoomOnlineAnswer{RoomOnlineAnswer: &clusterpb.RoomOnlineAnswer{
			Sessions: int64(s.rooms.online(env.Key))}}}, true
	}
	return nil, false
}

// HasUser implements route.Node.
func (s *Service) HasUser(uid string) bool { return s.isOnline(uid) }

// Receive implements route.Node: an envelope from another node.
func (s *Service) Receive(env *route.Envelope, hold *wire.Hold) {
	switch ev := env.Msg.Event.(type) {
	case *clusterpb.Envelope_Frame:
		s.receiveFrame(env, ev.Frame, hold)
	case *clusterpb.Envelope_Kick:
		s.receiveKick(ev.Kick)
	case *clusterpb.Envelope_Close:
		c := ev.Close
		if c.UserId == "" {
			s.malformedEnvelope()
			return
		}
		s.closeLocal(c.UserId, pb.DisconnectCode(c.Code), c.Reason, c.SessionId, c.TokenId)
	case *clusterpb.Envelope_GroupChanged:
		g := ev.GroupChanged
		if g.ConversationId == "" {
			s.malformedEnvelope()
			return
		}
		s.dropGroup(g.ConversationId)
		members := make([]store.Member, 0, len(g.Joined)+len(g.Left))
		for _, uid := range g.Joined {
			members = append(members, store.Member{UserID: uid})
		}
		for _, uid := range g.Left {
			members = append(members, store.Member{UserID: uid, Left: true})
		}
		s.memberInterests(g.ConversationId, members)
	case *clusterpb.Envelope_Presence:
		p := ev.Presence
		if p.Node == "" || env.Topic != route.TopicPresence {
			s.malformedEnvelope()
			return
		}
		s.heardFrom(p.Node)
		s.remotePresence(env.Key, p.Node, p.Online)
	case *clusterpb.Envelope_NodeAlive:
		node := ev.NodeAlive.Node
		if node == "" {
			s.malformedEnvelope()
			return
		}
		if node == s.nodeID { // NATS does not echo this node's own
			s.cluster.mu.Lock()
			s.cluster.twinAt = time.Now()
			s.cluster.mu.Unlock()
			s.log.Error("cluster: another node has this node's node_id; give every node its own", "node_id", s.nodeID)
			return
		}
		s.heardFrom(node)
	case *clusterpb.Envelope_Sessions:
		out := wire.OutboundFromProto(ev.Sessions.Frame) // NATS gives each message its own copy
		n := 0
		for _, id := range ev.Sessions.SessionIds {
			if sess := s.sessions.ByID(id); sess != nil && sess.Conn.Send(out) {
				n++
			}
		}
		s.stats.deliveries.Add(uint64(n))
	default:
		s.malformedEnvelope() // an event this node does not act on
	}
}

// malformedEnvelope counts an envelope from another node that decoded but
// does not hold what its event needs: dropped, counted, never logged one by
// one (a faulty node would flood the log).
func (s *Service) malformedEnvelope() { s.stats.malformed.Add(1) }

// receiveFrame delivers fr, whose message the router reuses: what is kept
// past the call is copied (its frame bytes are the NATS message's own).
func (s *Service) receiveFrame(env *route.Envelope, fr *clusterpb.Frame, hold *wire.Hold) {
	out := wire.OutboundFromProto(fr.Frame)
	switch env.Topic {
	case route.TopicUser:
		s.sessions.DeliverLocal([]string{env.Key}, out, fr.ExceptSession, hold)
	case route.TopicGroup:
		f := remoteGroupFrame{out: out, except: fr.ExceptSession}
		if len(fr.SkipUsers) > 0 {
			f.skip = slices.Clone(fr.SkipUsers)
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
		s.publish(&route.Envelope{Topic: route.TopicAll, Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_NodeAlive{NodeAlive: &clusterpb.NodeAlive{Node: s.nodeID}}}})
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
	s.social.presence.NodesGone(dead)
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
		if err := s.router.PublishFrame(s.life, t, key, out, ""); err != nil {
			s.deliveryFailed("cluster event", err)
		}
	}
}

// sessionNode is the node id a session id ("<node>-<n>") was issued by.
func sessionNode(id string) string {
	node, _, _ := strings.Cut(id, "-")
	return node
}

// recentCloses remembers, for a few seconds, when each user's sessions were
// last closed on this node (by the admin API or a close from another node),
// so that a login that read its token's standing before such a close and
// registered after it checks again (handleAuth).
type recentCloses struct {
	mu sync.Mutex
	at map[string]time.Time
}

// closeMemory is how long a close is remembered: far longer than a login
// takes from its token check to its registration.
const closeMemory = 10 * time.Second

func (r *recentCloses) note(uid string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = make(map[string]time.Time)
	}
	if len(r.at) >= 1024 {
		for u, t := range r.at {
			if now.Sub(t) > closeMemory {
				delete(r.at, u)
			}
		}
	}
	r.at[uid] = now
}

// since reports whether uid's sessions were closed at or after t.
func (r *recentCloses) since(uid string, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[uid]
	return ok && !at.Before(t)
}
