package client

import (
	"context"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// End-to-end encryption with MLS, RFC 9420 (docs/e2ee.md). The server is
// the MLS Delivery Service: it keeps KeyPackages, orders each encrypted
// group's Commits (one per epoch, the first wins) and stores MLS messages
// as opaque bytes. This SDK moves the bytes; the MLS library of your app
// makes and reads them.

// MLSContentType is the content type of a message carrying an MLSMessage.
const MLSContentType = "message/mls"

// PublishKeyPackages stores KeyPackages (TLS-encoded MLSMessages,
// wire_format mls_key_package) of this connection's device: one-time
// packages and, when lastResort is not nil, the device's last-resort
// package (replacing the previous one). It returns the device's count.
func (c *Client) PublishKeyPackages(ctx context.Context, oneTime [][]byte, lastResort []byte) (*pb.KeyPackageCount, error) {
	return countReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_PublishKeyPackages{
		PublishKeyPackages: &pb.PublishKeyPackages{KeyPackages: oneTime, LastResort: lastResort}}}))
}

// ReplaceKeyPackages is PublishKeyPackages after deleting every package
// this device published before: for a device that lost its private keys.
func (c *Client) ReplaceKeyPackages(ctx context.Context, oneTime [][]byte, lastResort []byte) (*pb.KeyPackageCount, error) {
	return countReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_PublishKeyPackages{
		PublishKeyPackages: &pb.PublishKeyPackages{KeyPackages: oneTime, LastResort: lastResort, Replace: true}}}))
}

// CountKeyPackages returns how many one-time packages this device has left.
func (c *Client) CountKeyPackages(ctx context.Context) (*pb.KeyPackageCount, error) {
	return countReply(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_CountKeyPackages{CountKeyPackages: &pb.CountKeyPackages{}}}))
}

func countReply(r *pb.ServerFrame, err error) (*pb.KeyPackageCount, error) {
	if err != nil {
		return nil, err
	}
	if n := r.GetKeyPackageCount(); n != nil {
		return n, nil
	}
	return nil, ErrProtocol
}

// ClaimKeyPackages takes one KeyPackage of every device of each user (one
// you may message); users without packages, or whom you may not message,
// are absent from the answer.
func (c *Client) ClaimKeyPackages(ctx context.Context, userIDs ...string) ([]*pb.ClaimedKeyPackage, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ClaimKeyPackages{
		ClaimKeyPackages: &pb.ClaimKeyPackages{UserIds: userIDs}}})
	if err != nil {
		return nil, err
	}
	if k := r.GetClaimedKeyPackages(); k != nil {
		return k.KeyPackages, nil
	}
	return nil, ErrProtocol
}

// CreateEncryptedGroup makes an end-to-end encrypted group with you as its
// only member; its MLS group id is the returned conversation id's bytes,
// at epoch 0. Add members with AddMembersMLS.
func (c *Client) CreateEncryptedGroup(ctx context.Context, g *pb.CreateGroup) (*pb.GroupInfo, error) {
	g.Encrypted = true
	return c.CreateGroup(ctx, g)
}

// AddMembersMLS adds users to an encrypted group with the Commit adding
// their devices and its Welcome. ERROR_CODE_MLS_STALE_EPOCH: another Commit
// of that epoch came first; sync, process it, and commit again.
func (c *Client) AddMembersMLS(ctx context.Context, conversationID string, userIDs []string, commit, welcome []byte) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_AddMembers{AddMembers: &pb.AddMembers{
		ConversationId: conversationID, UserIds: userIDs, MlsCommit: commit, MlsWelcome: welcome}}}))
}

// RemoveMemberMLS removes a member of an encrypted group with the Commit
// removing their devices.
func (c *Client) RemoveMemberMLS(ctx context.Context, conversationID, userID string, commit []byte) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_RemoveMember{RemoveMember: &pb.RemoveMember{
		ConversationId: conversationID, UserId: userID, MlsCommit: commit}}}))
}

// CommitMLS sends a Commit that changes no membership (a device added or
// removed, a key update) with the Welcome for devices it adds (nil: none).
func (c *Client) CommitMLS(ctx context.Context, conversationID string, commit, welcome []byte) (*pb.SendAck, error) {
	return c.sendAck(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_MlsCommit{MlsCommit: &pb.MlsCommit{
		ClientMsgId: c.ids.next(), ConversationId: conversationID, Commit: commit, Welcome: welcome}}}))
}

// SendMLS sends an MLS application message or proposal (a PrivateMessage
// or PublicMessage) to an encrypted group, with Send's retries.
func (c *Client) SendMLS(ctx context.Context, conversationID string, mlsMessage []byte) (*pb.SendAck, error) {
	return c.Send(ctx, &pb.Send{ConversationId: conversationID, ContentType: MLSContentType, Payload: mlsMessage})
}

// MLSState returns the server's view of a conversation: whether it is an
// encrypted group and the epoch its next Commit must be made in.
func (c *Client) MLSState(ctx context.Context, conversationID string) (*pb.MlsState, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_GetMlsState{GetMlsState: &pb.GetMlsState{ConversationId: conversationID}}})
	if err != nil {
		return nil, err
	}
	if s := r.GetMlsState(); s != nil {
		return s, nil
	}
	return nil, ErrProtocol
}
