package chat

// PLACEHOLDER: helper C replaces this file (recall, edit, delete-for-me, read counts, conversation settings).

import (
	"context"

	"github.com/parleyim/parley/gateway"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/session"
)

func (s *Service) clearedSeq(ctx context.Context, uid, conv string) (uint64, error) { return 0, nil }
func (s *Service) dropHidden(ctx context.Context, uid, conv string, msgs []*pb.Message) ([]*pb.Message, error) {
	return msgs, nil
}
func (s *Service) recall(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.Recall) error {
	return errUnavail
}
func (s *Service) edit(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.Edit) error {
	return errUnavail
}
func (s *Service) deleteForMe(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.DeleteForMe) error {
	return errUnavail
}
func (s *Service) readCounts(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.ReadCounts) error {
	return errUnavail
}
func (s *Service) setConversation(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.SetConversation) error {
	return errUnavail
}
