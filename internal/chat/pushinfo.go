package chat

import (
	"context"
	"errors"

	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
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
const unreadBadgeConversations = 1000

// Unread is uid's unread message count (the app badge): the sum of the
// unread counts the conversation list shows, over at most
// unreadBadgeConversations of their conversations. It reads per
// conversation only what the count needs (no last message, no peer), and
// takes hint's conversation state as given.
func (s *Service) Unread(ctx context.Context, uid string, hint *UnreadHint) (int, error) {
	ids, err := s.store.Conversations(ctx, uid)
	if err != nil {
		return 0, storeErr(err)
	}
	total := 0
	for _, id := range ids[:min(len(ids), unreadBadgeConversations)] {
		n, err := s.conversationUnread(ctx, uid, id, hint)
		if err != nil {
			return 0, err
		}
		total += int(min(n, 1<<20))
	}
	return total, nil
}

// UnreadHint is uid's state in one conversation as the caller has just
// read it from the store, so that Unread does not read it again.
type UnreadHint struct {
	ConversationID string
	Cursor         store.Cursor
	Settings       store.ConversationSettings
	// Heads, when set, keeps the conversation's message heads read for
	// one user's count for the next ones: the members of a group who read
	// up to the same seq count the same heads. Used by one goroutine.
	Heads *HeadsMemo
}

// HeadsMemo remembers a conversation's message heads after a few read
// positions (the zero value is ready). It keeps at most memoPositions of
// them: members whose cursors all differ read their own.
type HeadsMemo struct {
	after map[uint64]memoHeads
}

// memoHeads are the heads after a seq, read when the conversation's last
// seq was last: good for counts up to it.
type memoHeads struct {
	heads []store.MessageHead
	last  uint64
}

const memoPositions = 8

func (m *HeadsMemo) get(after, last uint64) ([]store.MessageHead, bool) {
	if m == nil {
		return nil, false
	}
	h, ok := m.after[after]
	return h.heads, ok && last <= h.last
}

func (m *HeadsMemo) put(after, last uint64, heads []store.MessageHead) {
	if m == nil {
		return
	}
	if m.after == nil {
		m.after = make(map[uint64]memoHeads, memoPositions)
	}
	if _, ok := m.after[after]; ok || len(m.after) < memoPositions {
		m.after[after] = memoHeads{heads: heads, last: last}
	}
}

// conversationUnread is the unread count of one conversation as the
// conversation list computes it.
func (s *Service) conversationUnread(ctx context.Context, uid, id string, hint *UnreadHint) (uint64, error) {
	since, upTo, err := s.readRange(ctx, uid, id)
	if errors.Is(err, errDenied) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	last, err := s.store.LastSeq(ctx, id)
	if err != nil {
		return 0, storeErr(err)
	}
	if upTo > 0 {
		last = min(last, upTo)
	}
	var cur store.Cursor
	var settings store.ConversationSettings
	var memo *HeadsMemo
	if hint != nil && hint.ConversationID == id {
		cur, settings, memo = hint.Cursor, hint.Settings, hint.Heads
	} else {
		if cur, err = s.store.GetCursor(ctx, id, uid); err != nil {
			return 0, storeErr(err)
		}
		if settings, err = s.store.GetConversationSettings(ctx, uid, id); err != nil {
			return 0, storeErr(err)
		}
	}
	read := max(cur.Read, settings.ClearedSeq, since)
	if last <= read {
		return 0, nil
	}
	return s.unreadMemo(ctx, uid, id, read, last, memo)
}
