package client

import (
	"context"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// FriendRequest asks another user to become a contact, with an optional note
// (at most 256 bytes). If they had already asked this user, both become
// friends. The other user's devices get a ContactEvent ([Options.OnContact]).
func (c *Client) FriendRequest(ctx context.Context, userID, note string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_FriendRequest{
		FriendRequest: &pb.FriendRequest{UserId: userID, Note: note}}}))
}

// RespondFriend accepts or declines a friend request received from userID.
// Without such a request it fails with ERROR_CODE_CONFLICT.
func (c *Client) RespondFriend(ctx context.Context, userID string, accept bool) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_RespondFriend{
		RespondFriend: &pb.RespondFriend{UserId: userID, Accept: accept}}}))
}

// RemoveFriend ends a friendship, or withdraws or discards a pending request.
func (c *Client) RemoveFriend(ctx context.Context, userID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_RemoveFriend{
		RemoveFriend: &pb.RemoveFriend{UserId: userID}}}))
}

// Contacts returns this user's contacts, pending requests (both ways) and
// block list.
func (c *Client) Contacts(ctx context.Context) (*pb.ContactList, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ListContacts{ListContacts: &pb.ListContacts{}}})
	if err != nil {
		return nil, err
	}
	if l := r.GetContacts(); l != nil {
		return l, nil
	}
	return nil, ErrProtocol
}

// Block stops userID from messaging this user. They are not told; their
// sends fail with ERROR_CODE_PERMISSION_DENIED.
func (c *Client) Block(ctx context.Context, userID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Block{
		Block: &pb.Block{UserId: userID}}}))
}

// Unblock removes userID from the block list.
func (c *Client) Unblock(ctx context.Context, userID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Unblock{
		Unblock: &pb.Unblock{UserId: userID}}}))
}

// Typing tells the other members of a conversation that this user is typing
// ([Options.OnTyping] on their side). The server forwards at most one per
// conversation every 2 seconds and drops the rest, so calling it on every
// keystroke is fine. It waits for the server's Ok.
func (c *Client) Typing(ctx context.Context, conversationID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Typing{
		Typing: &pb.Typing{ConversationId: conversationID}}}))
}

// SubscribePresence subscribes to the presence of up to 1000 users and
// returns their current presence. Only users this user shares something with
// (a friend, a 1:1 conversation, a group) are included; the others are left
// out without a reason. Changes arrive through [Options.OnPresence] until
// UnsubscribePresence or the end of the connection (subscriptions do not
// survive a reconnect).
func (c *Client) SubscribePresence(ctx context.Context, userIDs ...string) (*pb.PresenceList, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SubscribePresence{
		SubscribePresence: &pb.SubscribePresence{UserIds: userIDs}}})
	if err != nil {
		return nil, err
	}
	if l := r.GetPresence(); l != nil {
		return l, nil
	}
	return nil, ErrProtocol
}

// UnsubscribePresence ends presence subscriptions; with no user ids, all of
// this connection's.
func (c *Client) UnsubscribePresence(ctx context.Context, userIDs ...string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_UnsubscribePresence{
		UnsubscribePresence: &pb.UnsubscribePresence{UserIds: userIDs}}}))
}
