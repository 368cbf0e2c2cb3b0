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
	// EventMessageOffline: messages of a conversation reached recipients'
	// devices only by push, or not at all: the recipients the server pushed
	// or would have pushed (internal/notify decides).
	EventMessageOffline EventType = "message.offline"
)

// OfflineRecipient is one user of a message.offline event.
type OfflineRecipient struct {
	UserID string
	// DeviceIDs are the user's registered devices that were due a
	// notification; empty when the user registered none.
	DeviceIDs []string
}

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
	// For message.offline: the conversation, the seqs of the messages
	// (FirstSeq to LastSeq; the recipient's own are never counted) and
	// who was not reached.
	ConversationID    string
	FirstSeq, LastSeq uint64
	Recipients        []OfflineRecipient
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
