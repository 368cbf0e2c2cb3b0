package pebblestore

import (
	"context"
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
)

// MLS key packages and epochs (store.E2EE). Key package writes and claims
// run under e2eeMu: a claim reads the device's first one-time package and
// deletes it in one step, so no package is handed out twice. Epochs are
// written only by Apply, under appendMu, atomically with the Commit's event.

func keyPackageDevicePrefix(user, device string) []byte {
	return appendLP(appendLP([]byte{nsKeyPackage}, user), device)
}

func keyPackageUserPrefix(user string) []byte { return appendLP([]byte{nsKeyPackage}, user) }

func lastResortKey(user, device string) []byte {
	return appendLP(appendLP([]byte{nsLastResort}, user), device)
}

func mlsEpochKey(conv string) []byte { return appendLP([]byte{nsMLSEpoch}, conv) }

// PutKeyPackages implements store.E2EE.
func (s *Store) PutKeyPackages(ctx context.Context, userID, deviceID string, pkgs [][]byte, lastResort []byte, lim store.KeyPackageLimits) (int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	if userID == "" || deviceID == "" {
		return 0, errEmptyID
	}
	s.e2eeMu.Lock()
	defer s.e2eeMu.Unlock()
	prefix := keyPackageDevicePrefix(userID, deviceID)
	n, next := 0, uint64(1)
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, _ []byte) (bool, error) {
		if len(key) != len(prefix)+8 {
			return false, corruptf(key, "bad key package key")
		}
		n++
		next = binary.BigEndian.Uint64(key[len(prefix):]) + 1
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	if n+len(pkgs) > lim.PerDevice {
		return n, store.ErrTooMany
	}
	if n == 0 {
		devices, err := s.keyPackageDevices(ctx, userID)
		if err != nil {
			return 0, err
		}
		if !devices[deviceID] && len(devices) >= lim.Devices {
			return 0, store.ErrTooMany
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	for i, p := range pkgs {
		key := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), next+uint64(i))
		_ = b.Set(key, frame(key, p), nil)
	}
	if lastResort != nil {
		key := lastResortKey(userID, deviceID)
		_ = b.Set(key, frame(key, lastResort), nil)
	}
	if err := s.commitBatch(b, s.wo, bulk); err != nil {
		return n, mapErr(err)
	}
	return n + len(pkgs), nil
}

// keyPackageDevices returns the user's devices holding a package.
func (s *Store) keyPackageDevices(ctx context.Context, userID string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, prefix := range [][]byte{keyPackageUserPrefix(userID), appendLP([]byte{nsLastResort}, userID)} {
		err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, _ []byte) (bool, error) {
			r := keyReader{b: key[len(prefix):]}
			if d := r.lp(); !r.bad {
				out[d] = true
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ClaimKeyPackages implements store.E2EE.
func (s *Store) ClaimKeyPackages(ctx context.Context, userID string) ([]store.KeyPackage, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	s.e2eeMu.Lock()
	defer s.e2eeMu.Unlock()
	// One-time packages: the first of each device.
	var out []store.KeyPackage
	var taken [][]byte
	prefix := keyPackageUserPrefix(userID)
	last := ""
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		r := keyReader{b: key[len(prefix):]}
		device := r.lp()
		r.u64()
		if !r.end() {
			return false, corruptf(key, "bad key package key")
		}
		if device != last || len(out) == 0 {
			last = device
			out = append(out, store.KeyPackage{UserID: userID, DeviceID: device, Data: append([]byte(nil), body...)})
			taken = append(taken, append([]byte(nil), key...))
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// Last-resort packages of the devices without a one-time one.
	have := make(map[string]bool, len(out))
	for _, k := range out {
		have[k.DeviceID] = true
	}
	lrPrefix := appendLP([]byte{nsLastResort}, userID)
	err = s.iterate(ctx, lrPrefix, prefixEnd(lrPrefix), func(key, body []byte) (bool, error) {
		r := keyReader{b: key[len(lrPrefix):]}
		device := r.lp()
		if !r.end() {
			return false, corruptf(key, "bad last-resort key")
		}
		if !have[device] {
			out = append(out, store.KeyPackage{UserID: userID, DeviceID: device, Data: append([]byte(nil), body...), LastResort: true})
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if len(taken) > 0 {
		b := s.db.NewBatch()
		defer b.Close()
		for _, k := range taken {
			_ = b.Delete(k, nil)
		}
		if err := s.commitBatch(b, s.wo, small); err != nil {
			return nil, mapErr(err)
		}
	}
	store.SortKeyPackages(out)
	return out, nil
}

// KeyPackageCount implements store.E2EE.
func (s *Store) KeyPackageCount(ctx context.Context, userID, deviceID string) (int, bool, error) {
	if err := s.enter(ctx); err != nil {
		return 0, false, err
	}
	defer s.closeMu.RUnlock()
	prefix := keyPackageDevicePrefix(userID, deviceID)
	n := 0
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	if err != nil {
		return 0, false, err
	}
	_, lr, err := s.getBody(lastResortKey(userID, deviceID))
	return n, lr, err
}

// DeleteKeyPackages implements store.E2EE.
func (s *Store) DeleteKeyPackages(ctx context.Context, userID, deviceID string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.e2eeMu.Lock()
	defer s.e2eeMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	if deviceID == "" {
		for _, p := range [][]byte{keyPackageUserPrefix(userID), appendLP([]byte{nsLastResort}, userID)} {
			_ = b.DeleteRange(p, prefixEnd(p), nil)
		}
	} else {
		p := keyPackageDevicePrefix(userID, deviceID)
		_ = b.DeleteRange(p, prefixEnd(p), nil)
		_ = b.Delete(lastResortKey(userID, deviceID), nil)
	}
	return mapErr(s.commitBatch(b, s.wo, small))
}

// MLSEpoch implements store.E2EE.
func (s *Store) MLSEpoch(ctx context.Context, conv string) (uint64, bool, error) {
	if err := s.enter(ctx); err != nil {
		return 0, false, err
	}
	defer s.closeMu.RUnlock()
	return s.mlsEpoch(conv)
}

func (s *Store) mlsEpoch(conv string) (uint64, bool, error) {
	key := mlsEpochKey(conv)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return 0, false, err
	}
	e, err := decodeUint64(key, body, "MLS epoch")
	return e, err == nil, err
}

// checkMLSStep is Apply's check of ch.MLS, under appendMu (the only writer
// of epochs), so the step it admits cannot be overtaken before the commit.
func (s *Store) checkMLSStep(conv string, st *store.MLSStep) error {
	epoch, ok, err := s.mlsEpoch(conv)
	switch {
	case err != nil:
		return err
	case st.Create && ok:
		return store.ErrExists
	case st.Create:
		return nil
	case !ok:
		return store.ErrNotFound
	case epoch != st.Epoch:
		return store.ErrStaleEpoch
	}
	return nil
}

// putMLSStep writes the epoch after st (checked by checkMLSStep).
func putMLSStep(b *pebble.Batch, conv string, st *store.MLSStep) error {
	key := mlsEpochKey(conv)
	next := uint64(0)
	if !st.Create {
		next = st.Epoch + 1
	}
	return b.Set(key, frame(key, binary.BigEndian.AppendUint64(nil, next)), nil)
}

// The MLS records are exported (parley migrate) after everything else: no
// other record refers to them.
func init() {
	exportKinds = append(exportKinds,
		exportKind{nsKeyPackage, "mls_key_packages", func(key, k, body []byte, emit func(any)) error {
			r := keyReader{b: k}
			user, device := r.lp(), r.lp()
			r.u64()
			if !r.end() {
				return corruptf(key, "bad key package key")
			}
			emit(store.KeyPackage{UserID: user, DeviceID: device, Data: append([]byte(nil), body...)})
			return nil
		}},
		exportKind{nsLastResort, "mls_last_resort", func(key, k, body []byte, emit func(any)) error {
			r := keyReader{b: k}
			user, device := r.lp(), r.lp()
			if !r.end() {
				return corruptf(key, "bad last-resort key")
			}
			emit(store.KeyPackage{UserID: user, DeviceID: device, Data: append([]byte(nil), body...), LastResort: true})
			return nil
		}},
		exportKind{nsMLSEpoch, "mls_epochs", func(key, k, body []byte, emit func(any)) error {
			r := keyReader{b: k}
			conv := r.lp()
			if !r.end() {
				return corruptf(key, "bad MLS epoch key")
			}
			e, err := decodeUint64(key, body, "MLS epoch")
			emit(store.MLSEpochRecord{ConversationID: conv, Epoch: e})
			return err
		}},
	)
}
