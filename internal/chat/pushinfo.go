package chat

import (
	"context"

	"github.com/parleyim/parley/internal/session"
)

// What the push notifier (internal/notify) asks of the chat service.

// sessionDevice is the device a session speaks for: "" for a request over
// POST /v1/rpc or the admin API, which have no device of their own.
func sessionDevice(sess *session.Session) string {
	if sess.Conn == nil {
		return ""
	}
	return sess.DeviceID
}

// deviceKicked tells the notifier that old's device was replaced by a login
// of newcomer (its device id): a kicked device no longer gets pushes.
func (s *Service) deviceKicked(old *session.Session, newcomer string) {
	if s.cfg.Notifier != nil {
		s.cfg.Notifier.DeviceKicked(old.UserID, old.DeviceID, newcomer)
	}
}

// GroupMembers lists the group's current members (shared: not to be modified).
func (s *Service) GroupMembers(ctx context.Context, conv string) ([]string, error) {
	g, err := s.group(ctx, conv)
	if err != nil {
		return nil, err
	}
	return g.recipients, nil
}

// GroupName is the group's name, "" when it cannot be read.
func (s *Service) GroupName(ctx context.Context, conv string) string {
	g, err := s.group(ctx, conv)
	if err != nil {
		return ""
	}
	return g.info.Name
}

// ConnectedDevices lists uid's connected device ids on every node. In a
// cluster the other nodes are asked only when one of them holds the user.
func (s *Service) ConnectedDevices(ctx context.Context, uid string) (map[string]bool, error) {
	out := make(map[string]bool)
	for _, x := range s.sessions.Sessions(uid) {
		out[x.DeviceID] = true
	}
	if !s.router.Clustered() {
		return out, nil
	}
	node, err := s.router.OnlineElsewhere(ctx, uid)
	if err != nil || node == "" {
		return out, err
	}
	for _, x := range s.UserSessions(ctx, uid) {
		out[x.DeviceID] = true
	}
	return out, nil
}

// unreadBadgeConversations bounds the conversations the badge counts.
const unreadBadgeConversations = 100

// Unread is uid's unread message count over their most recent
// conversations (at most unreadBadgeConversations): the app badge.
func (s *Service) Unread(ctx context.Context, uid string) (int, error) {
	list, err := s.ConversationList(ctx, uid, unreadBadgeConversations, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list.Conversations {
		n += int(min(c.UnreadCount, 1<<20))
	}
	return n, nil
}
