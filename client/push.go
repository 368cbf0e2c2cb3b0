package client

import (
	"context"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// RegisterAPNs makes this device get offline push notifications through
// Apple's push service: deviceToken is the hex token from
// registerForRemoteNotifications, topic the app's bundle id, sandbox true
// for a development build. It replaces the device's earlier target.
func (c *Client) RegisterAPNs(ctx context.Context, deviceToken, topic string, sandbox bool) error {
	return c.RegisterPush(ctx, &pb.RegisterPush{Target: &pb.RegisterPush_Apns{Apns: &pb.ApnsTarget{
		DeviceToken: deviceToken, Topic: topic, Sandbox: sandbox}}})
}

// RegisterFCM makes this device get offline push notifications through
// Firebase Cloud Messaging (token: FirebaseMessaging.getToken's).
func (c *Client) RegisterFCM(ctx context.Context, token string) error {
	return c.RegisterPush(ctx, &pb.RegisterPush{Target: &pb.RegisterPush_Fcm{Fcm: &pb.FcmTarget{Token: token}}})
}

// RegisterWebPush makes this device get offline push notifications through
// a browser's push service: the PushSubscription's endpoint and keys
// (base64url), subscribed with the key of GET /v1/push/webpush-key.
func (c *Client) RegisterWebPush(ctx context.Context, endpoint, p256dh, auth string) error {
	return c.RegisterPush(ctx, &pb.RegisterPush{Target: &pb.RegisterPush_Webpush{Webpush: &pb.WebPushTarget{
		Endpoint: endpoint, P256Dh: p256dh, Auth: auth}}})
}

// RegisterPush sends a RegisterPush frame as it is (DeviceId empty: this
// session's device).
func (c *Client) RegisterPush(ctx context.Context, r *pb.RegisterPush) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_RegisterPush{RegisterPush: r}}))
}

// UnregisterPush removes this device's push target: it gets no more push
// notifications (logging out removes it too).
func (c *Client) UnregisterPush(ctx context.Context) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_UnregisterPush{UnregisterPush: &pb.UnregisterPush{}}}))
}
