package client

import (
	"context"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// groupReply returns the GroupInfo a group request answers with.
func (c *Client) groupReply(r *pb.ServerFrame, err error) (*pb.GroupInfo, error) {
	if err != nil {
		return nil, err
	}
	if g := r.GetGroup(); g != nil {
		return g, nil
	}
	return nil, ErrProtocol
}

// CreateGroup creates a group owned by this user with the given members.
// g.AddPolicy (who may add members; unset: admins) and g.HistoryVisibility
// (what members added later read; unset: from their addition on) are the
// group's settings; the answer carries them as in force.
func (c *Client) CreateGroup(ctx context.Context, g *pb.CreateGroup) (*pb.GroupInfo, error) {
	return c.groupReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_CreateGroup{CreateGroup: g}}))
}

// UpdateGroup changes the fields of u that are set (owner and admins),
// including the add policy and history visibility.
func (c *Client) UpdateGroup(ctx context.Context, u *pb.UpdateGroup) (*pb.GroupInfo, error) {
	return c.groupReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_UpdateGroup{UpdateGroup: u}}))
}

// GetGroup returns a group's settings.
func (c *Client) GetGroup(ctx context.Context, conversationID string) (*pb.GroupInfo, error) {
	return c.groupReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_GetGroup{
		GetGroup: &pb.GetGroup{ConversationId: conversationID}}}))
}

// JoinGroup joins an open group.
func (c *Client) JoinGroup(ctx context.Context, conversationID string) (*pb.GroupInfo, error) {
	return c.groupReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_JoinGroup{
		JoinGroup: &pb.JoinGroup{ConversationId: conversationID}}}))
}

// AddMembers adds users to a group: the owner and admins, and any member
// when the group's add policy is GROUP_ADD_POLICY_EVERYONE (otherwise
// PERMISSION_DENIED).
func (c *Client) AddMembers(ctx context.Context, conversationID string, userIDs ...string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_AddMembers{
		AddMembers: &pb.AddMembers{ConversationId: conversationID, UserIds: userIDs}}}))
}

// RemoveMember removes a member from a group.
func (c *Client) RemoveMember(ctx context.Context, conversationID, userID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_RemoveMember{
		RemoveMember: &pb.RemoveMember{ConversationId: conversationID, UserId: userID}}}))
}

// LeaveGroup leaves a group.
func (c *Client) LeaveGroup(ctx context.Context, conversationID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_LeaveGroup{
		LeaveGroup: &pb.LeaveGroup{ConversationId: conversationID}}}))
}

// SetRole makes a member an admin or a plain member (owner only).
func (c *Client) SetRole(ctx context.Context, conversationID, userID string, role pb.GroupRole) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SetRole{
		SetRole: &pb.SetRole{ConversationId: conversationID, UserId: userID, Role: role}}}))
}

// MuteMember mutes a member for seconds (0 unmutes).
func (c *Client) MuteMember(ctx context.Context, conversationID, userID string, seconds uint32) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_MuteMember{
		MuteMember: &pb.MuteMember{ConversationId: conversationID, UserId: userID, DurationSeconds: seconds}}}))
}

// TransferOwnership makes another member the owner.
func (c *Client) TransferOwnership(ctx context.Context, conversationID, userID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_TransferOwnership{
		TransferOwnership: &pb.TransferOwnership{ConversationId: conversationID, UserId: userID}}}))
}

// DissolveGroup ends a group (owner only).
func (c *Client) DissolveGroup(ctx context.Context, conversationID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_DissolveGroup{
		DissolveGroup: &pb.DissolveGroup{ConversationId: conversationID}}}))
}

// Members returns one page of a group's current members, by user id, after
// afterUserID ("" for the first page).
func (c *Client) Members(ctx context.Context, conversationID, afterUserID string, limit uint32) (*pb.MemberPage, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ListMembers{
		ListMembers: &pb.ListMembers{ConversationId: conversationID, AfterUserId: afterUserID, Limit: limit}}})
	if err != nil {
		return nil, err
	}
	if p := r.GetMembers(); p != nil {
		return p, nil
	}
	return nil, ErrProtocol
}

// SendToConversation sends a message into a conversation (a group, or a 1:1
// conversation by id).
func (c *Client) SendToConversation(ctx context.Context, conversationID, contentType string, payload []byte) (*pb.SendAck, error) {
	return c.Send(ctx, &pb.Send{ConversationId: conversationID, ContentType: contentType, Payload: payload})
}
