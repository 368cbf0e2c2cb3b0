package pebblestore

import (
	"context"

	"github.com/parleyim/parley/internal/store"
)

// push target values: lp(kind) lp(token) lp(topic) flags(sandbox)
// lp(p256dh) lp(auth) lp(token id) time(updated).
func encodePushTarget(t store.PushTarget) []byte {
	b := make([]byte, 0, 32+len(t.Kind)+len(t.Token)+len(t.Topic)+len(t.P256dh)+len(t.Auth)+len(t.TokenID))
	b = appendLP(appendLP(appendLP(b, t.Kind), t.Token), t.Topic)
	b = append(b, flags(t.Sandbox))
	b = appendLP(appendLP(appendLP(b, t.P256dh), t.Auth), t.TokenID)
	return appendTime(b, t.UpdatedAt)
}

func decodePushTarget(key []byte, user, device string, body []byte) (store.PushTarget, error) {
	r := bodyReader{b: body}
	t := store.PushTarget{UserID: user, DeviceID: device, Kind: r.str(), Token: r.str(), Topic: r.str()}
	t.Sandbox = r.flags(1)&1 != 0
	t.P256dh, t.Auth, t.TokenID, t.UpdatedAt = r.str(), r.str(), r.str(), r.time()
	if !r.ok() {
		return store.PushTarget{}, corruptf(key, "bad push target record")
	}
	return t, nil
}

func pushPrefix(b []byte, user string) []byte { return appendLP(append(b, nsPush), user) }

// PutPushTarget implements store.Store.
func (s *Store) PutPushTarget(ctx context.Context, t store.PushTarget) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if t.UserID == "" || t.DeviceID == "" {
		return errEmptyID
	}
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	return s.put(append(pushPrefix(nil, t.UserID), t.DeviceID...), encodePushTarget(t), small)
}

// PushTargets implements store.Store: a prefix scan of the user's targets.
func (s *Store) PushTargets(ctx context.Context, userID string) ([]store.PushTarget, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	prefix := pushPrefix(nil, userID)
	var out []store.PushTarget
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		t, err := decodePushTarget(key, userID, string(key[len(prefix):]), body)
		if err != nil {
			return false, err
		}
		out = append(out, t)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeletePushTarget implements store.Store.
func (s *Store) DeletePushTarget(ctx context.Context, userID, deviceID, token string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	if deviceID == "" {
		return false, nil // no record can exist
	}
	key := append(pushPrefix(nil, userID), deviceID...)
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return false, err
	}
	if token != "" {
		t, err := decodePushTarget(key, userID, deviceID, body)
		if err != nil {
			return false, err
		}
		if t.Token != token {
			return false, nil
		}
	}
	if err := s.del(key); err != nil {
		return false, err
	}
	return true, nil
}
