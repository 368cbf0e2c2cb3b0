package chat

import (
	"time"

	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// EventType names what happened.
type EventType string

// The events Config.Events is told of (the webhook event names).
const (
	// EventMessageStored: a message, recall or edit was stored (not a retry).
	EventMessageStored EventType = "message.stored"
	// EventGroupChanged: a group event was stored (created, members, roles, mutes, settings, owner, dissolved).
	EventGroupChanged EventType = "group.changed"
	// EventUserOnline: a session authenticated on this node.
	EventUserOnline EventType = "user.online"
	// EventUserOffline: a session ended on this node.
	EventUserOffline EventType = "user.offline"
)

// Event is one thing that happened. Message is shared with delivery and must
// not be modified.
type Event struct {
	Type EventType
	Time time.Time
	// Message is the stored entry (message.stored, group.changed).
	Message *pb.Message
	// For user.online / user.offline.
	UserID, SessionID, DeviceID, DeviceType string
	// Sessions is how many sessions the user has on this node after the change.
	Sessions int
}

func (s *Service) emitStored(m *pb.Message) {
	if s.cfg.Events == nil {
		return
	}
	t := EventMessageStored
	if m.Kind >= pb.MessageKind_MESSAGE_KIND_GROUP_CREATED {
		t = EventGroupChanged
	}
	s.cfg.Events(Event{Type: t, Time: time.UnixMilli(m.ServerTime), Message: m})
}

func (s *Service) emitSession(t EventType, sess *session.Session) {
	if s.cfg.Events == nil {
		return
	}
	s.cfg.Events(Event{Type: t, Time: time.Now(), UserID: sess.UserID, SessionID: sess.ID,
		DeviceID: sess.DeviceID, DeviceType: sess.DeviceType, Sessions: len(s.sessions.Sessions(sess.UserID))})
}
