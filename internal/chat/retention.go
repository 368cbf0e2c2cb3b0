package chat

import (
	"errors"
	"time"

	"context"

	"github.com/parleyim/parley/internal/retention"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Retention is what the chat service needs of retention and disappearing
// messages (package retention, docs/retention.md).
type Retention interface {
	// Floor is the conversation's lowest servable seq (0 or 1: all).
	Floor(ctx context.Context, conv string) (uint64, error)
	// ExpiresAt is the expiry of a message of conv stored at serverTime
	// (unix ms), 0 for none; an error when the timer cannot be read.
	ExpiresAt(ctx context.Context, conv string, serverTime int64) (int64, error)
	// Disappearing is conv's timer in seconds (0: off).
	Disappearing(ctx context.Context, conv string) (uint32, error)
	// SetDisappearing records conv's timer once its event is stored.
	SetDisappearing(ctx context.Context, conv string, seconds uint32) error
	// MayHaveExpiring: conv ever had a timer.
	MayHaveExpiring(ctx context.Context, conv string) (bool, error)
}

// expired reports whether m disappeared by now (unix ms).
func expired(m *pb.Message, now int64) bool { return m.ExpiresAt != 0 && m.ExpiresAt <= now }

// aboveFloor raises readRange's lower bound to the conversation's floor:
// nothing below it is served, deleted from disk yet or not.
func (s *Service) aboveFloor(ctx context.Context, conv string, since, upTo uint64) (uint64, uint64, error) {
	if s.cfg.Retention == nil {
		return since, upTo, nil
	}
	f, err := s.cfg.Retention.Floor(ctx, conv)
	if err != nil {
		return 0, 0, storeErr(err)
	}
	if f > 1 {
		since = max(since, f-1)
	}
	return since, upTo, nil
}

// stampExpiry gives a message being committed its expiry when its
// conversation's timer is on. Group events and the timer's own event do
// not disappear (the conversation's history of who is in it stays). An
// error (the timer unread) fails the message's write: stored without its
// expiry, it would be kept for good.
func (s *Service) stampExpiry(ctx context.Context, m *pb.Message) error {
	if s.cfg.Retention == nil || m.Kind == pb.MessageKind_MESSAGE_KIND_DISAPPEARING_SET ||
		m.Kind >= pb.MessageKind_MESSAGE_KIND_GROUP_CREATED {
		return nil
	}
	var err error
	m.ExpiresAt, err = s.cfg.Retention.ExpiresAt(ctx, m.ConversationId, m.ServerTime)
	return err
}

// appliedTimer runs on the committer right after a change is stored: a
// stored DISAPPEARING_SET takes effect for every message committed after it.
func (s *Service) appliedTimer(r store.AppendResult) {
	m := r.Msg
	if s.cfg.Retention == nil || r.Duplicate || m == nil || m.Kind != pb.MessageKind_MESSAGE_KIND_DISAPPEARING_SET {
		return
	}
	if err := s.cfg.Retention.SetDisappearing(s.life, m.ConversationId, m.GetEvent().GetDisappearingSeconds()); err != nil {
		s.log.Warn("disappearing timer stored as an event but not as the setting", "conversation", m.ConversationId, "err", err)
	}
}

// setDisappearing sets a conversation's disappearing-messages timer: either
// side of a 1:1, a group's owner or admins. The DISAPPEARING_SET event is
// sequenced with the conversation's messages.
func (s *Service) setDisappearing(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.SetDisappearing) error {
	if s.cfg.Retention == nil {
		return errUnavail
	}
	uid, conv := sess.UserID, r.ConversationId
	if !retention.DisappearingAllowed(r.Seconds) || len(r.ClientMsgId) > maxClientMsgID {
		return errBadRequest
	}
	g, peer, err := s.changeTarget(ctx, uid, conv)
	if err != nil {
		return err
	}
	if g != nil {
		if role, _ := g.role(uid); !isAdmin(role) {
			return errDenied
		}
	}
	ev := &pb.Message{ConversationId: conv, From: uid, To: peer, ClientMsgId: r.ClientMsgId,
		Kind: pb.MessageKind_MESSAGE_KIND_DISAPPEARING_SET, Event: &pb.MessageEvent{DisappearingSeconds: r.Seconds}}
	return s.submitChange(ctx, s.changeWrite(c, sess, id, ev, nil))
}

// describeRetention fills in a conversation's timer and floor.
func (s *Service) describeRetention(ctx context.Context, c *pb.Conversation) error {
	if s.cfg.Retention == nil {
		return nil
	}
	var err error
	if c.DisappearingSeconds, err = s.cfg.Retention.Disappearing(ctx, c.ConversationId); err != nil {
		return storeErr(err)
	}
	if c.FirstSeq, err = s.cfg.Retention.Floor(ctx, c.ConversationId); err != nil {
		return storeErr(err)
	}
	return nil
}

// disappeared reports whether a search hit's message is gone or expired
// (the index may still hold it for a moment after the sweeper deleted it).
func (s *Service) disappeared(ctx context.Context, conv string, seq uint64) (bool, error) {
	if s.cfg.Retention == nil {
		return false, nil
	}
	if may, err := s.cfg.Retention.MayHaveExpiring(ctx, conv); err != nil || !may {
		return false, err
	}
	m, err := s.store.GetMessage(ctx, conv, seq)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, storeErr(err)
	}
	return expired(m, time.Now().UnixMilli()), nil
}
