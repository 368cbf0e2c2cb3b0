package notify

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/notify/internal/pushhttp"
	"github.com/parleyim/parley/internal/notify/provider"
	"github.com/parleyim/parley/internal/notify/webpush"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Register handles RegisterPush for uid. sessionDevice is the device of the
// session it came on ("" over POST /v1/rpc, where r must name the device);
// tokenID is the login token's id (logging out with it removes the target).
func (n *Notifier) Register(ctx context.Context, uid, sessionDevice, tokenID string, r *pb.RegisterPush) error {
	dev, err := deviceOf(sessionDevice, r.DeviceId)
	if err != nil {
		return err
	}
	t := store.PushTarget{UserID: uid, DeviceID: dev, TokenID: tokenID, UpdatedAt: time.Now()}
	switch tg := r.Target.(type) {
	case *pb.RegisterPush_Apns:
		a := tg.Apns
		tok := strings.ToLower(a.DeviceToken)
		if len(tok) < 64 || len(tok) > 200 || !isHex(tok) || !pushhttp.Printable(a.Topic, 255) {
			return reqerr.BadRequest
		}
		t.Kind, t.Token, t.Topic, t.Sandbox = provider.APNs, tok, a.Topic, a.Sandbox
	case *pb.RegisterPush_Fcm:
		if !pushhttp.Printable(tg.Fcm.Token, 4096) {
			return reqerr.BadRequest
		}
		t.Kind, t.Token = provider.FCM, tg.Fcm.Token
	case *pb.RegisterPush_Webpush:
		w := tg.Webpush
		if err := webpush.ValidateSubscription(w.Endpoint, w.P256Dh, w.Auth); err != nil {
			return reqerr.BadRequest
		}
		t.Kind, t.Token, t.P256dh, t.Auth = provider.WebPush, w.Endpoint, w.P256Dh, w.Auth
	default:
		return reqerr.BadRequest
	}
	if n.providers[t.Kind] == nil {
		return reqerr.BadRequest // this server does not send to that platform
	}
	have, err := n.store.PushTargets(ctx, uid)
	if err != nil {
		return reqerr.Store(err)
	}
	if len(have) >= n.cfg.MaxTargetsPerUser {
		known := false
		for _, h := range have {
			known = known || h.DeviceID == dev
		}
		if !known {
			return reqerr.Quota
		}
	}
	if err := n.store.PutPushTarget(ctx, t); err != nil {
		return reqerr.Store(err)
	}
	return nil
}

// Unregister handles UnregisterPush: the device's target, if any, is removed.
func (n *Notifier) Unregister(ctx context.Context, uid, sessionDevice string, r *pb.UnregisterPush) error {
	dev, err := deviceOf(sessionDevice, r.DeviceId)
	if err != nil {
		return err
	}
	if _, err := n.store.DeletePushTarget(ctx, uid, dev, ""); err != nil {
		return reqerr.Store(err)
	}
	return nil
}

// deviceOf is the device a request names: its session's, or over HTTP the
// one it names.
func deviceOf(sessionDevice, named string) (string, error) {
	switch {
	case sessionDevice == "" && auth.ValidDeviceField(named):
		return named, nil
	case sessionDevice != "" && (named == "" || named == sessionDevice):
		return sessionDevice, nil
	}
	return "", reqerr.BadRequest
}

// DeviceKicked removes the target of a device whose session a newer login
// of another device replaced. It does not wait for the store.
func (n *Notifier) DeviceKicked(uid, kicked, newcomer string) {
	if kicked == newcomer || kicked == "" {
		return // the same device signed in again: it keeps its target
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.life, 10*time.Second)
		defer cancel()
		if _, err := n.store.DeletePushTarget(ctx, uid, kicked, ""); err != nil {
			n.log.Warn("push: kicked device's target not removed", "user", uid, "device", kicked, "err", err)
		}
	}()
}

// TokensRevoked removes the targets registered with tokenID, or with any
// token of uid when tokenID is "" (password change, revoking every token).
func (n *Notifier) TokensRevoked(ctx context.Context, uid, tokenID string) error {
	targets, err := n.store.PushTargets(ctx, uid)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if tokenID != "" && t.TokenID != tokenID {
			continue
		}
		if _, err := n.store.DeletePushTarget(ctx, uid, t.DeviceID, t.Token); err != nil {
			return err
		}
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
