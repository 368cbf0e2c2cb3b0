package client

import (
	"context"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// sendAck returns the SendAck a request answers with.
func (c *Client) sendAck(r *pb.ServerFrame, err error) (*pb.SendAck, error) {
	if err != nil {
		return nil, err
	}
	if ack := r.GetSendAck(); ack != nil {
		return ack, nil
	}
	return nil, ErrProtocol
}

// Recall withdraws the message seq of a conversation: your own within the
// server's recall window (ERROR_CODE_RECALL_WINDOW_PASSED after it), or, as
// a group's owner or admin, a member's at any time. It returns the SendAck
// of the RECALL event; the conversation's devices get the event. A message
// already recalled gives ERROR_CODE_CONFLICT.
func (c *Client) Recall(ctx context.Context, conversationID string, seq uint64) (*pb.SendAck, error) {
	return c.sendAck(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Recall{Recall: &pb.Recall{
		ConversationId: conversationID, Seq: seq, ClientMsgId: c.ids.next()}}}))
}

// Edit replaces the content of your own message seq and returns the SendAck
// of the EDIT event. A recalled message gives ERROR_CODE_CONFLICT.
func (c *Client) Edit(ctx context.Context, conversationID string, seq uint64, contentType string, payload []byte) (*pb.SendAck, error) {
	return c.sendAck(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Edit{Edit: &pb.Edit{
		ConversationId: conversationID, Seq: seq, ContentType: contentType, Payload: payload,
		ClientMsgId: c.ids.next()}}}))
}

// DeleteForMe hides messages of a conversation on this user's devices only
// (at most 1000 seqs); your other devices get a HiddenEvent (OnHidden).
func (c *Client) DeleteForMe(ctx context.Context, conversationID string, seqs ...uint64) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_DeleteForMe{
		DeleteForMe: &pb.DeleteForMe{ConversationId: conversationID, Seqs: seqs}}}))
}

// ClearConversation deletes a whole conversation, up to its newest message,
// on this user's devices only: history and sync start after it.
func (c *Client) ClearConversation(ctx context.Context, conversationID string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_DeleteForMe{
		DeleteForMe: &pb.DeleteForMe{ConversationId: conversationID, All: true}}}))
}

// ReadCounts returns, for each seq (at most 100), how many members other
// than its sender have read it, and in groups up to the server's receipt
// list limit (and in 1:1 conversations) who.
func (c *Client) ReadCounts(ctx context.Context, conversationID string, seqs ...uint64) (*pb.ReadCountList, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ReadCounts{
		ReadCounts: &pb.ReadCounts{ConversationId: conversationID, Seqs: seqs}}})
	if err != nil {
		return nil, err
	}
	if l := r.GetReadCounts(); l != nil {
		return l, nil
	}
	return nil, ErrProtocol
}

// SetConversation changes this user's settings of a conversation: the
// fields of s that are set (pinned, muted). Your other devices get a
// ConversationEvent (OnConversation).
func (c *Client) SetConversation(ctx context.Context, s *pb.SetConversation) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SetConversation{SetConversation: s}}))
}

// PinConversation pins or unpins a conversation (pinned ones list first).
func (c *Client) PinConversation(ctx context.Context, conversationID string, pinned bool) error {
	return c.SetConversation(ctx, &pb.SetConversation{ConversationId: conversationID, Pinned: &pinned})
}

// MuteConversation mutes or unmutes a conversation's notifications.
func (c *Client) MuteConversation(ctx context.Context, conversationID string, muted bool) error {
	return c.SetConversation(ctx, &pb.SetConversation{ConversationId: conversationID, Muted: &muted})
}
