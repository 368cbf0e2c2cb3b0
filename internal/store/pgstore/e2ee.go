package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
)

// MLS key packages and epochs (store.E2EE, migration 0014). A claim
// deletes each device's oldest one-time package with FOR UPDATE SKIP
// LOCKED, so concurrent claims on any node never get the same row (a
// device whose last package another claim holds gets its last-resort
// package instead of waiting). Epochs move by a conditional UPDATE in the
// transaction that stores the Commit: of two Commits of one epoch the
// second's UPDATE waits for the first to commit, then matches no row.

const (
	sqlKPLock    = `SELECT pg_advisory_xact_lock(hashtext('mls-kp'), hashtext($1))`
	sqlKPDevices = `SELECT count(*) FROM (SELECT device_id FROM {s}.mls_key_packages WHERE user_id = $1
		UNION SELECT device_id FROM {s}.mls_last_resort WHERE user_id = $1) d WHERE device_id <> $2`
	sqlKPCount = `SELECT count(*) FROM {s}.mls_key_packages WHERE user_id = $1 AND device_id = $2`
	sqlKPPut   = `INSERT INTO {s}.mls_key_packages (user_id, device_id, data) SELECT $1, $2, d FROM unnest($3::bytea[]) WITH ORDINALITY AS t(d, n) ORDER BY n`
	sqlLRPut   = `INSERT INTO {s}.mls_last_resort (user_id, device_id, data) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, device_id) DO UPDATE SET data = excluded.data`
	sqlKPClaim = `DELETE FROM {s}.mls_key_packages p USING (
			SELECT x.id FROM (SELECT DISTINCT device_id FROM {s}.mls_key_packages WHERE user_id = $1) d,
			LATERAL (SELECT id FROM {s}.mls_key_packages k WHERE k.user_id = $1 AND k.device_id = d.device_id
				ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) x
		) t WHERE p.id = t.id RETURNING p.device_id, p.data`
	sqlLRClaim   = `SELECT device_id, data FROM {s}.mls_last_resort WHERE user_id = $1 AND device_id <> ALL($2::text[])`
	sqlLRHas     = `SELECT EXISTS (SELECT 1 FROM {s}.mls_last_resort WHERE user_id = $1 AND device_id = $2)`
	sqlKPDel     = `DELETE FROM {s}.mls_key_packages WHERE user_id = $1 AND ($2 = '' OR device_id = $2)`
	sqlLRDel     = `DELETE FROM {s}.mls_last_resort WHERE user_id = $1 AND ($2 = '' OR device_id = $2)`
	sqlEpoch     = `SELECT epoch FROM {s}.mls_groups WHERE conversation_id = $1`
	sqlEpochNew  = `INSERT INTO {s}.mls_groups (conversation_id, epoch) VALUES ($1, 0) ON CONFLICT DO NOTHING`
	sqlEpochStep = `UPDATE {s}.mls_groups SET epoch = epoch + 1 WHERE conversation_id = $1 AND epoch = $2`
)

// PutKeyPackages implements store.E2EE.
func (s *Store) PutKeyPackages(ctx context.Context, userID, deviceID string, pkgs [][]byte, lastResort []byte, lim store.KeyPackageLimits) (int, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	if userID == "" || deviceID == "" {
		return 0, errEmptyID
	}
	var n int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Serializes this user's writers, so the bounds hold under
		// concurrent publishes.
		if _, err := tx.Exec(ctx, sqlKPLock, userID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.sql(sqlKPCount), userID, deviceID).Scan(&n); err != nil {
			return err
		}
		if int(n)+len(pkgs) > lim.PerDevice {
			return store.ErrTooMany
		}
		var others int64
		if err := tx.QueryRow(ctx, s.sql(sqlKPDevices), userID, deviceID).Scan(&others); err != nil {
			return err
		}
		var has bool
		if n == 0 {
			if err := tx.QueryRow(ctx, s.sql(sqlLRHas), userID, deviceID).Scan(&has); err != nil {
				return err
			}
		}
		if n == 0 && !has && int(others) >= lim.Devices {
			return store.ErrTooMany
		}
		if len(pkgs) > 0 {
			if _, err := tx.Exec(ctx, s.sql(sqlKPPut), userID, deviceID, pkgs); err != nil {
				return err
			}
		}
		if lastResort != nil {
			if _, err := tx.Exec(ctx, s.sql(sqlLRPut), userID, deviceID, lastResort); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return int(n), mapErr("put key packages", err)
	}
	return int(n) + len(pkgs), nil
}

// ClaimKeyPackages implements store.E2EE.
func (s *Store) ClaimKeyPackages(ctx context.Context, userID string) ([]store.KeyPackage, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.pool.Query(ctx, s.sql(sqlKPClaim), userID)
	if err != nil {
		return nil, mapErr("claim key packages", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.KeyPackage, error) {
		k := store.KeyPackage{UserID: userID}
		return k, r.Scan(&k.DeviceID, &k.Data)
	})
	if err != nil {
		return nil, mapErr("claim key packages", err)
	}
	have := make([]string, len(out))
	for i, k := range out {
		have[i] = k.DeviceID
	}
	rows, err = s.pool.Query(ctx, s.sql(sqlLRClaim), userID, have)
	if err != nil {
		return out, mapErr("claim key packages", err)
	}
	lr, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.KeyPackage, error) {
		k := store.KeyPackage{UserID: userID, LastResort: true}
		return k, r.Scan(&k.DeviceID, &k.Data)
	})
	if err != nil {
		// The one-time packages are taken: hand them out rather than lose them.
		return out, nil
	}
	out = append(out, lr...)
	store.SortKeyPackages(out)
	return out, nil
}

// KeyPackageCount implements store.E2EE.
func (s *Store) KeyPackageCount(ctx context.Context, userID, deviceID string) (int, bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, false, err
	}
	defer done()
	var n int64
	var lr bool
	if err := s.pool.QueryRow(ctx, s.sql(sqlKPCount), userID, deviceID).Scan(&n); err != nil {
		return 0, false, mapErr("count key packages", err)
	}
	if err := s.pool.QueryRow(ctx, s.sql(sqlLRHas), userID, deviceID).Scan(&lr); err != nil {
		return 0, false, mapErr("count key packages", err)
	}
	return int(n), lr, nil
}

// DeleteKeyPackages implements store.E2EE.
func (s *Store) DeleteKeyPackages(ctx context.Context, userID, deviceID string) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql(sqlKPDel), userID, deviceID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.sql(sqlLRDel), userID, deviceID)
		return err
	})
	return mapErr("delete key packages", err)
}

// MLSEpoch implements store.E2EE.
func (s *Store) MLSEpoch(ctx context.Context, conv string) (uint64, bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, false, err
	}
	defer done()
	var e int64
	err = s.pool.QueryRow(ctx, s.sql(sqlEpoch), conv).Scan(&e)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, mapErr("MLS epoch", err)
	}
	return uint64(e), true, nil
}

// applyMLSStep is Apply's MLS step, in its transaction.
func (s *Store) applyMLSStep(ctx context.Context, tx pgx.Tx, conv string, st *store.MLSStep) error {
	if st.Create {
		tag, err := tx.Exec(ctx, s.sql(sqlEpochNew), conv)
		if err == nil && tag.RowsAffected() == 0 {
			err = store.ErrExists
		}
		return err
	}
	tag, err := tx.Exec(ctx, s.sql(sqlEpochStep), conv, int64(st.Epoch))
	if err != nil || tag.RowsAffected() == 1 {
		return err
	}
	var e int64
	err = tx.QueryRow(ctx, s.sql(sqlEpoch), conv).Scan(&e)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	return store.ErrStaleEpoch
}

// Importers of the MLS records (parley migrate).
func init() {
	importers["mls_key_packages"] = importer{table: "mls_key_packages", cols: []string{"user_id", "device_id", "data"},
		row: func(rec any) ([]any, error) {
			k := rec.(store.KeyPackage)
			return []any{k.UserID, k.DeviceID, k.Data}, nil
		}}
	importers["mls_last_resort"] = importer{table: "mls_last_resort", cols: []string{"user_id", "device_id", "data"},
		row: func(rec any) ([]any, error) {
			k := rec.(store.KeyPackage)
			return []any{k.UserID, k.DeviceID, k.Data}, nil
		}}
	importers["mls_epochs"] = importer{table: "mls_groups", cols: []string{"conversation_id", "epoch"},
		row: func(rec any) ([]any, error) {
			e := rec.(store.MLSEpochRecord)
			return []any{e.ConversationID, int64(e.Epoch)}, nil
		}}
}
