package chat

// PLACEHOLDER: helper B replaces this file (contacts, blocks, typing, presence).

import (
	"context"

	"github.com/parleyim/parley/gateway"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/session"
)

type social struct{}

func (s *social) init() {}

func (s *Service) mayMessage(ctx context.Context, from, to string) error { return nil }
func (s *Service) sessionOpened(sess *session.Session)                   {}
func (s *Service) sessionClosed(sess *session.Session)                   {}
func (s *Service) typing(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.Typing) error {
	return errUnavail
}
func (s *Service) subscribePresence(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.SubscribePresence) error {
	return errUnavail
}
func (s *Service) unsubscribePresence(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.UnsubscribePresence) error {
	return errUnavail
}
func (s *Service) friendRequest(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.FriendRequest) error {
	return errUnavail
}
func (s *Service) respondFriend(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.RespondFriend) error {
	return errUnavail
}
func (s *Service) removeFriend(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.RemoveFriend) error {
	return errUnavail
}
func (s *Service) listContacts(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.ListContacts) error {
	return errUnavail
}
func (s *Service) block(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.Block) error {
	return errUnavail
}
func (s *Service) unblock(ctx context.Context, c *gateway.Conn, sess *session.Session, id uint64, r *pb.Unblock) error {
	return errUnavail
}
