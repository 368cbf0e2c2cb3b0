package chat

import (
	"slices"
	"strings"
	"sync"

	"github.com/parleyim/parley/internal/cluster/clusterpb"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Chat rooms and pushes (goim's semantics). Nothing here is stored or
// synced: a push reaches the sessions online when it is sent, if their send
// queues have room for it (see PushResult).

// MaxRoomsPerSession bounds the rooms one session may be in.
const MaxRoomsPerSession = 64

// maxRoomName is the longest room name.
const maxRoomName = 128

// ValidRoom reports whether name is a valid room name: 1-128 chars [A-Za-z0-9_.:-].
func ValidRoom(name string) bool {
	if len(name) == 0 || len(name) > maxRoomName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// roomIndex holds the rooms of this node and which sessions are in them.
//
// Lock order: roomIndex.mu before room.mu. Joins and leaves take
// roomIndex.mu for writing; a broadcast takes it for reading only to find the
// room, then iterates the room under room.mu (read), so broadcasts to
// different rooms, or the same one, run in parallel.
type roomIndex struct {
	// watch is told when a room appears on (true) or leaves (false) this node. Called under mu.
	watch  func(name string, on bool)
	mu     sync.RWMutex
	rooms  map[string]*room                      // guarded by mu; a room is removed when its last member leaves
	bySess map[*session.Session]map[string]*room // guarded by mu; the rooms each session is in
}

type room struct {
	mu      sync.RWMutex
	members map[*session.Session]struct{} // guarded by mu
}

func (x *roomIndex) init() {
	x.rooms = make(map[string]*room)
	x.bySess = make(map[*session.Session]map[string]*room)
}

// join adds sess to the room and returns the room's member count; false when
// sess is already in MaxRoomsPerSession other rooms.
func (x *roomIndex) join(sess *session.Session, name string) (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	mine := x.bySess[sess]
	r := mine[name]
	if r == nil {
		if len(mine) >= MaxRoomsPerSession {
			return 0, false
		}
		if mine == nil {
			mine = make(map[string]*room)
			x.bySess[sess] = mine
		}
		r = x.rooms[name]
		if r == nil {
			r = &room{members: make(map[*session.Session]struct{})}
			x.rooms[name] = r
			x.watch(name, true)
		}
		mine[name] = r
		r.mu.Lock()
		r.members[sess] = struct{}{}
		r.mu.Unlock()
	}
	r.mu.RLock()
	n := len(r.members)
	r.mu.RUnlock()
	return n, true
}

// leave removes sess from the room (nothing if it was not in it).
func (x *roomIndex) leave(sess *session.Session, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	mine := x.bySess[sess]
	r := mine[name]
	if r == nil {
		return
	}
	delete(mine, name)
	if len(mine) == 0 {
		delete(x.bySess, sess)
	}
	x.drop(r, name, sess)
}

// leaveAll removes sess from every room it is in (when it closes).
func (x *roomIndex) leaveAll(sess *session.Session) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for name, r := range x.bySess[sess] {
		x.drop(r, name, sess)
	}
	delete(x.bySess, sess)
}

// drop removes sess from r, and r from the index when it empties. x.mu is held.
func (x *roomIndex) drop(r *room, name string, sess *session.Session) {
	r.mu.Lock()
	delete(r.members, sess)
	empty := len(r.members) == 0
	r.mu.Unlock()
	if empty {
		delete(x.rooms, name)
		x.watch(name, false)
	}
}

// in reports whether sess is in the room.
func (x *roomIndex) in(sess *session.Session, name string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.bySess[sess][name] != nil
}

func (x *roomIndex) get(name string) *room {
	x.mu.RLock()
	r := x.rooms[name]
	x.mu.RUnlock()
	return r
}

// online is the number of sessions in the room.
func (x *roomIndex) online(name string) int {
	r := x.get(name)
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.members)
}

// broadcast queues out (one Outbound, encoded at most once per codec, shared
// by every listener) on every session in the room except except, and returns
// how many took it.
func (x *roomIndex) broadcast(name string, out *wire.Outbound, except *session.Session) int {
	return x.offer(name, out, except).Taken
}

// offer is broadcast with the refusals counted. Send never blocks, so
// holding the room's read lock while queuing is fine; a join or leave of
// this room waits for it.
func (x *roomIndex) offer(name string, out *wire.Outbound, except *session.Session) PushResult {
	var res PushResult
	r := x.get(name)
	if r == nil {
		return res
	}
	r.mu.RLock()
	for s := range r.members {
		if s != except {
			res.add(offer(s.Conn, out))
		}
	}
	r.mu.RUnlock()
	return res
}

// PushResult is what a push did on this node. A push is best effort: it is
// queued on the sessions online when it is sent, never stored, and a
// session whose send queue is already half full refuses it (and stays
// connected) rather than being closed as slow.
type PushResult struct {
	// Taken counts the sessions on this node that queued the push.
	Taken int
	// Refused counts the sessions on this node that refused it because
	// their send queue was backed up.
	Refused int
	// Forwarded reports that the push was also published to the cluster's
	// other nodes; their sessions are not counted here (each node counts
	// its own in its metrics).
	Forwarded bool
}

func (r *PushResult) add(o wire.Offered) {
	switch o {
	case wire.Taken:
		r.Taken++
	case wire.Refused:
		r.Refused++
	}
}

// offerer is implemented by gateway.Conn: it tells a refused push from a
// closed connection, which Send's bool cannot.
type offerer interface {
	Offer(o *wire.Outbound) wire.Offered
}

// offer queues a push on c.
func offer(c session.Conn, out *wire.Outbound) wire.Offered {
	if oc, ok := c.(offerer); ok {
		return oc.Offer(out)
	}
	if c.Send(out) {
		return wire.Taken
	}
	return wire.Gone
}

// PushOutbound builds the frame of a push; the caller must not modify body afterwards.
func PushOutbound(op int32, body []byte, roomName string) *wire.Outbound {
	return wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Push{Push: &pb.Push{Op: op, Body: body, Room: roomName}}})
}

// joinRoom: JoinRoom, answered with RoomInfo.
func (s *Service) joinRoom(c Replier, sess *session.Session, id uint64, m *pb.JoinRoom) error {
	if !ValidRoom(m.Room) {
		return errBadRequest
	}
	n, ok := s.rooms.join(sess, m.Room)
	if !ok {
		return errTooMany
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Room{Room: &pb.RoomInfo{Room: m.Room, Online: uint32(n)}}})
	return nil
}

// leaveRoom: LeaveRoom, answered with Ok.
func (s *Service) leaveRoom(c Replier, sess *session.Session, id uint64, m *pb.LeaveRoom) error {
	if !ValidRoom(m.Room) {
		return errBadRequest
	}
	s.rooms.leave(sess, m.Room)
	s.replyOK(c, id)
	return nil
}

// roomSend: RoomSend, a Push to the room's other members when the server
// allows clients to broadcast and the sender is in the room. Answered with Ok.
func (s *Service) roomSend(c Replier, sess *session.Session, id uint64, m *pb.RoomSend) error {
	if !ValidRoom(m.Room) {
		return errBadRequest
	}
	if !s.cfg.RoomClientSend || !s.rooms.in(sess, m.Room) {
		return errDenied
	}
	if len(m.Body) > int(s.cfg.MaxFrameBytes) {
		return errTooLarge
	}
	out := PushOutbound(m.Op, m.Body, m.Room)
	n := s.rooms.broadcast(m.Room, out, sess)
	s.publishFrame(route.TopicRoom, m.Room, out)
	s.stats.deliveries.Add(uint64(n))
	s.replyOK(c, id)
	return nil
}

// PushUsers queues a Push on every session of the users (on every node) and
// says what the sessions on this node did with it. users must be valid ids.
func (s *Service) PushUsers(users []string, op int32, body []byte) PushResult {
	out := PushOutbound(op, body, "")
	var res PushResult
	for i, u := range users {
		if i < 8 && slices.Contains(users[:i], u) {
			continue // short lists may repeat a user; long ones come de-duplicated
		}
		for _, sess := range s.sessions.Sessions(u) {
			res.add(offer(sess.Conn, out))
		}
	}
	s.stats.deliveries.Add(uint64(res.Taken))
	if s.router.Clustered() {
		for _, u := range users {
			s.publishFrame(route.TopicUser, u, out)
		}
		res.Forwarded = true
	}
	return res
}

// PushSessions queues a Push on the sessions with these ids ("device keys",
// AuthOk.session_id), on whichever node holds them; it counts those on this
// node.
func (s *Service) PushSessions(ids []string, op int32, body []byte) PushResult {
	out := PushOutbound(op, body, "")
	var res PushResult
	var remote map[string][]string // node id → its session ids
	for _, id := range ids {
		if sess := s.sessions.ByID(id); sess != nil {
			res.add(offer(sess.Conn, out))
			continue
		}
		if node := sessionNode(id); s.router.Clustered() && node != s.nodeID {
			if remote == nil {
				remote = make(map[string][]string)
			}
			remote[node] = append(remote[node], id)
		}
	}
	for node, list := range remote {
		s.publish(&route.Envelope{Topic: route.TopicNode, Key: node, Msg: &clusterpb.Envelope{Event: &clusterpb.Envelope_Sessions{Sessions: &clusterpb.Sessions{
			SessionIds: list, Frame: out.Bytes(wire.Proto)}}}})
	}
	res.Forwarded = len(remote) > 0
	s.stats.deliveries.Add(uint64(res.Taken))
	return res
}

// PushRoom queues a Push (with its room set) on every session in the room,
// on every node; it counts those on this node.
func (s *Service) PushRoom(roomName string, op int32, body []byte) PushResult {
	out := PushOutbound(op, body, roomName)
	res := s.rooms.offer(roomName, out, nil)
	s.stats.deliveries.Add(uint64(res.Taken))
	s.publishFrame(route.TopicRoom, roomName, out)
	res.Forwarded = s.router.Clustered()
	return res
}

// PushAll queues a Push on every session of every node; it counts those on this node.
func (s *Service) PushAll(op int32, body []byte) PushResult {
	out := PushOutbound(op, body, "")
	var res PushResult
	s.sessions.ForEach(func(sess *session.Session) { res.add(offer(sess.Conn, out)) })
	s.stats.deliveries.Add(uint64(res.Taken))
	s.publishFrame(route.TopicAll, "", out)
	res.Forwarded = s.router.Clustered()
	return res
}

// pushAllLocal queues out on every session of this node and returns how
// many took it (a push from another node).
func (s *Service) pushAllLocal(out *wire.Outbound) int {
	n := 0
	s.sessions.ForEach(func(sess *session.Session) {
		if offer(sess.Conn, out) == wire.Taken {
			n++
		}
	})
	return n
}

// RoomOnline is the number of sessions in the room on this node.
func (s *Service) RoomOnline(roomName string) int { return s.rooms.online(roomName) }

// RoomCount is one room and its sessions on this node.
type RoomCount struct {
	Room   string `json:"room"`
	Online int    `json:"online"`
}

// Rooms lists up to limit rooms of this node, the most listeners first.
func (s *Service) Rooms(limit int) []RoomCount {
	s.rooms.mu.RLock()
	list := make([]RoomCount, 0, len(s.rooms.rooms))
	for name, r := range s.rooms.rooms {
		r.mu.RLock()
		list = append(list, RoomCount{Room: name, Online: len(r.members)})
		r.mu.RUnlock()
	}
	s.rooms.mu.RUnlock()
	slices.SortFunc(list, func(a, b RoomCount) int {
		if a.Online != b.Online {
			return b.Online - a.Online
		}
		return strings.Compare(a.Room, b.Room)
	})
	if len(list) > limit {
		list = list[:limit]
	}
	return list
}
