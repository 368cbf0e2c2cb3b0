package client

import (
	"context"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// JoinRoom joins a chat room (1-128 chars [A-Za-z0-9_.:-]) and returns the
// number of sessions in it. Pushes to the room arrive at Options.OnPush.
// Membership lasts until LeaveRoom or the connection ends; it is not stored,
// so join again after reconnecting.
func (c *Client) JoinRoom(ctx context.Context, room string) (*pb.RoomInfo, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_JoinRoom{JoinRoom: &pb.JoinRoom{Room: room}}})
	if err != nil {
		return nil, err
	}
	if info := r.GetRoom(); info != nil {
		return info, nil
	}
	return nil, ErrProtocol
}

// LeaveRoom leaves a chat room.
func (c *Client) LeaveRoom(ctx context.Context, room string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_LeaveRoom{LeaveRoom: &pb.LeaveRoom{Room: room}}}))
}

// RoomSend broadcasts a Push with op and body to the room's other members.
// The server must allow it (room_client_send) and this session must have
// joined the room; otherwise it fails with PERMISSION_DENIED.
func (c *Client) RoomSend(ctx context.Context, room string, op int32, body []byte) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_RoomSend{
		RoomSend: &pb.RoomSend{Room: room, Op: op, Body: body}}}))
}
