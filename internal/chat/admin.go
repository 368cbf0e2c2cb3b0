package chat

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// CallSystem runs one request for the admin API as the system: group
// management with an owner's rights in any group (events record an empty
// `from`), a system message into a group (Send with conversation_id: stored
// with an empty `from`), reading any group and its members, and recalling
// any message at any time (Recall). Other frames are refused: the admin API
// acts as a user (Call) for everything a user does.
func (s *Service) CallSystem(ctx context.Context, f *pb.ClientFrame) (*pb.ServerFrame, error) {
	switch b := f.Body.(type) {
	case *pb.ClientFrame_UpdateGroup, *pb.ClientFrame_AddMembers, *pb.ClientFrame_RemoveMember,
		*pb.ClientFrame_SetRole, *pb.ClientFrame_MuteMember, *pb.ClientFrame_TransferOwnership,
		*pb.ClientFrame_DissolveGroup, *pb.ClientFrame_GetGroup, *pb.ClientFrame_ListMembers:
	case *pb.ClientFrame_Send:
		if !isGroup(b.Send.ConversationId) || b.Send.To != "" {
			return errorFrame(0, pb.ErrorCode_ERROR_CODE_BAD_REQUEST), nil
		}
	case *pb.ClientFrame_Recall:
	default:
		return errorFrame(0, pb.ErrorCode_ERROR_CODE_BAD_REQUEST), nil
	}
	f.Id = 1
	rep := &callReplier{ch: make(chan *pb.ServerFrame, 1)}
	sess := &session.Session{ID: fmt.Sprintf("%d-admin-%d", s.cfg.NodeID, s.nextSession.Add(1)), System: true}
	var err error
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Send:
		err = s.systemSend(ctx, rep, sess, f.Id, b.Send)
	case *pb.ClientFrame_Recall:
		err = s.systemRecall(ctx, rep, sess, f.Id, b.Recall)
	default:
		err = s.dispatch(ctx, rep, sess, f)
	}
	if err != nil {
		s.replyErr(rep, f.Id, err)
	}
	select {
	case r := <-rep.ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// systemSend stores a system message in a group (no sender, no mute checks).
func (s *Service) systemSend(ctx context.Context, c Replier, sess *session.Session, reqID uint64, m *pb.Send) error {
	if len(m.ClientMsgId) == 0 || len(m.ClientMsgId) > maxClientMsgID {
		return errBadRequest
	}
	if len(m.ContentType) > maxContentType || len(m.Payload) > int(s.cfg.MaxFrameBytes) {
		return errTooLarge
	}
	g, err := s.group(ctx, m.ConversationId)
	if err != nil {
		return err
	}
	if g.info.Dissolved {
		return errConflict
	}
	enc, err := s.isEncrypted(ctx, m.ConversationId)
	if err != nil {
		return err
	}
	if enc {
		return reqerr.MLSRequired // the backend holds no key of an encrypted group (e2ee.go)
	}
	msg := &pb.Message{ConversationId: m.ConversationId, ClientMsgId: m.ClientMsgId,
		ContentType: m.ContentType, Payload: m.Payload, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}
	if !s.submit(ctx, &pendingSend{conn: c, sessID: sess.ID, reqID: reqID, msg: msg, start: time.Now().UnixNano()}) {
		return errUnavail
	}
	return nil
}

// systemRecall recalls any stored message at any time: the app's
// moderators deleting it for everyone (the event says moderated).
func (s *Service) systemRecall(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Recall) error {
	conv := r.ConversationId
	if r.Seq == 0 || len(r.ClientMsgId) > maxClientMsgID || conv == "" {
		return errBadRequest
	}
	ev := &pb.Message{ConversationId: conv, ClientMsgId: r.ClientMsgId,
		Kind: pb.MessageKind_MESSAGE_KIND_RECALL, Event: &pb.MessageEvent{TargetSeq: r.Seq, Moderated: true}}
	return s.commitChange(ctx, c, sess, id, ev, func(m *pb.Message) error {
		if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled {
			return errConflict
		}
		m.Recalled, m.Payload, m.ContentType = true, nil, ""
		// In a 1:1 conversation the event names the sender as `from`
		// (delivery goes to `from` and `to`); in a group `from` is empty,
		// the system.
		if !isGroup(conv) {
			ev.From = m.From
		}
		ev.To = m.To
		return nil
	})
}

// AdminMessages reads any conversation for the admin API: forward from after
// (forward true) or backward before `before` (0: newest), a page bounded by
// count and by bytes like a user's. Recalled messages come without their
// content, as they do for users; nothing is hidden.
func (s *Service) AdminMessages(ctx context.Context, conv string, after, before uint64, limit uint32, forward bool) (*pb.MessagePage, error) {
	last, err := s.store.LastSeq(ctx, conv)
	if err != nil {
		return nil, storeErr(err)
	}
	n := pageLimit(limit)
	release, err := s.ReserveRead(ctx, s.readWeight(n))
	if err != nil {
		return nil, err
	}
	defer release()
	msgs, more, err := s.readPage(ctx, pageSpec{
		conv: conv, forward: forward, after: after, before: before, n: n,
		visible: func(raw []*pb.Message) ([]*pb.Message, error) { return s.scrubEdits(ctx, conv, raw, false) },
	})
	if err != nil {
		return nil, err
	}
	return &pb.MessagePage{ConversationId: conv, Messages: msgs, HasMore: more, LastSeq: last}, nil
}

// removePage is how many messages RemoveUserMessages reads at a time.
const removePage = 100

// RemoveUserMessages deletes for everyone (as systemRecall, moderated) the
// plain messages uid sent since `since`, in every conversation uid is in,
// newest first, at most max. more says there were more to delete.
func (s *Service) RemoveUserMessages(ctx context.Context, uid string, since time.Time, max int) (removed int, more bool, err error) {
	convs, err := s.store.Conversations(ctx, uid)
	if err != nil {
		return 0, false, storeErr(err)
	}
	floor := since.UnixMilli()
	for _, conv := range convs {
		before := uint64(0)
	pages:
		for {
			page, err := s.store.History(ctx, conv, before, removePage)
			if err != nil {
				return removed, false, storeErr(err)
			}
			for i := len(page) - 1; i >= 0; i-- { // History pages ascend
				m := page[i]
				if m.ServerTime < floor {
					break pages
				}
				if m.From != uid || m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled {
					continue
				}
				if removed == max {
					return removed, true, nil
				}
				out, err := s.CallSystem(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Recall{Recall: &pb.Recall{ConversationId: conv, Seq: m.Seq}}})
				if err != nil {
					return removed, false, err
				}
				if e := out.GetError(); e != nil && e.Code != pb.ErrorCode_ERROR_CODE_CONFLICT { // CONFLICT: recalled meanwhile
					return removed, false, &Error{Code: e.Code}
				}
				removed++
			}
			if len(page) < removePage || page[0].Seq <= 1 {
				break
			}
			before = page[0].Seq
		}
	}
	return removed, false, nil
}
