package chat

import (
	"slices"
	"strings"
	"sync"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/route"
	"github.com/parleyim/parley/session"
	"github.com/parleyim/parley/wire"
)

// Chat rooms and pushes (goim's semantics). Nothing here is stored or
// synced: a push reaches the sessions online on this node when it is sent.

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
// how many it was queued on. Send never blocks, so holding the room's read
// lock while queuing is fine; a join or leave of this room waits for it.
func (x *roomIndex) broadcast(name string, out *wire.Outbound, except *session.Session) int {
	r := x.get(name)
	if r == nil {
		return 0
	}
	n := 0
	r.mu.RLock()
	for s := range r.members {
		if s != except && s.Conn.Send(out) {
			n++
		}
	}
	r.mu.RUnlock()
	return n
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
// returns how many sessions it was queued on on this node. users must be valid ids.
func (s *Service) PushUsers(users []string, op int32, body []byte) int {
	out := PushOutbound(op, body, "")
	n := s.sessions.DeliverLocal(users, out, "", nil) // counted by the registry
	if s.router.Clustered() {
		for _, u := range users {
			s.publishFrame(route.TopicUser, u, out)
		}
	}
	return n
}

// PushSessions queues a Push on the sessions with these ids ("device keys",
// AuthOk.session_id), on whichever node holds them; it returns how many it
// queued on this node.
func (s *Service) PushSessions(ids []string, op int32, body []byte) int {
	out := PushOutbound(op, body, "")
	n := 0
	var remote map[string][]string // node id → its session ids
	for _, id := range ids {
		if sess := s.sessions.ByID(id); sess != nil {
			if sess.Conn.Send(out) {
				n++
			}
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
		s.publish(&route.Envelope{Topic: route.TopicNode, Key: node, Kind: kindSessions, Keys: list, Data: out.Bytes(wire.Proto)})
	}
	s.stats.deliveries.Add(uint64(n))
	return n
}

// PushRoom queues a Push (with its room set) on every session in the room,
// on every node; it returns how many on this node.
func (s *Service) PushRoom(roomName string, op int32, body []byte) int {
	out := PushOutbound(op, body, roomName)
	n := s.rooms.broadcast(roomName, out, nil)
	s.stats.deliveries.Add(uint64(n))
	s.publishFrame(route.TopicRoom, roomName, out)
	return n
}

// PushAll queues a Push on every session of every node; it returns how many on this node.
func (s *Service) PushAll(op int32, body []byte) int {
	out := PushOutbound(op, body, "")
	n := s.pushAllLocal(out)
	s.stats.deliveries.Add(uint64(n))
	s.publishFrame(route.TopicAll, "", out)
	return n
}

func (s *Service) pushAllLocal(out *wire.Outbound) int {
	n := 0
	s.sessions.ForEach(func(sess *session.Session) {
		if sess.Conn.Send(out) {
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
