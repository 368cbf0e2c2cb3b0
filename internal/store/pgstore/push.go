package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyim/parley/internal/store"
)

// PutPushTarget implements store.Store.
func (s *Store) PutPushTarget(ctx context.Context, t store.PushTarget) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if t.UserID == "" || t.DeviceID == "" {
		return errEmptyID
	}
	_, err = s.pool.Exec(ctx, s.q.putPush, t.UserID, t.DeviceID, t.Kind, t.Token, t.Topic, t.Sandbox,
		t.P256dh, t.Auth, t.TokenID, timestamp(t.UpdatedAt))
	return mapErr("put push target", err)
}

// PushTargets implements store.Store.
func (s *Store) PushTargets(ctx context.Context, userID string) ([]store.PushTarget, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.pool.Query(ctx, s.q.pushTargets, userID)
	if err != nil {
		return nil, mapErr("push targets", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.PushTarget, error) {
		t := store.PushTarget{UserID: userID}
		var updated pgtype.Timestamptz
		err := r.Scan(&t.DeviceID, &t.Kind, &t.Token, &t.Topic, &t.Sandbox, &t.P256dh, &t.Auth, &t.TokenID, &updated)
		t.UpdatedAt = fromTimestamp(updated)
		return t, err
	})
	if err != nil {
		return nil, mapErr("push targets", err)
	}
	return out, nil
}

// DeletePushTarget implements store.Store: one DELETE, conditional on the
// token when one is given, so the check and the delete are atomic.
func (s *Store) DeletePushTarget(ctx context.Context, userID, deviceID, token string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	q, args := s.q.deletePush, []any{userID, deviceID}
	if token != "" {
		q, args = s.q.deletePushToken, append(args, token)
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, mapErr("delete push target", err)
	}
	return tag.RowsAffected() > 0, nil
}
