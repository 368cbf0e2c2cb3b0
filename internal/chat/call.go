package chat

import (
	"context"
	"fmt"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// callReplier collects the answer to one HTTP request.
type callReplier struct {
	ch chan *pb.ServerFrame
}

func (r *callReplier) SendFrame(f *pb.ServerFrame) bool {
	select {
	case r.ch <- f:
		return true
	default: // a second frame for a one-shot call: nobody is waiting for it
		return false
	}
}

// Call runs one client request for a user authenticated over HTTP, through
// the same handlers and checks as a socket session, and returns its answer
// (an error frame when refused). Frames that only make sense on a live
// connection (auth, ping, presence subscriptions, rooms) are refused.
func (s *Service) Call(ctx context.Context, claims auth.Claims, f *pb.ClientFrame) (*pb.ServerFrame, error) {
	switch f.Body.(type) {
	case nil:
		return errorFrame(0, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME), nil
	case *pb.ClientFrame_Auth, *pb.ClientFrame_Ping, *pb.ClientFrame_SubscribePresence, *pb.ClientFrame_UnsubscribePresence,
		*pb.ClientFrame_JoinRoom, *pb.ClientFrame_LeaveRoom, *pb.ClientFrame_RoomSend:
		return errorFrame(0, pb.ErrorCode_ERROR_CODE_BAD_REQUEST), nil
	}
	f.Id = 1 // always ask for a reply
	rep := &callReplier{ch: make(chan *pb.ServerFrame, 1)}
	sess := &session.Session{
		ID:     fmt.Sprintf("%d-http-%d", s.cfg.NodeID, s.nextSession.Add(1)),
		UserID: claims.UserID, DeviceID: "http", DeviceType: "http", TokenID: claims.TokenID,
		ShadowMuted: claims.ShadowMuted,
	}
	if err := s.dispatch(ctx, rep, sess, f); err != nil {
		s.replyErr(rep, f.Id, err)
	}
	select {
	case r := <-rep.ch:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
