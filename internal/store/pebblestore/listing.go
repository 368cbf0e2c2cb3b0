package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
)

// ListUsers implements store.Store.
func (s *Store) ListUsers(ctx context.Context, q store.ListQuery) ([]store.User, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	ids, err := s.listIDs(ctx, nsUser, q)
	if err != nil {
		return nil, err
	}
	var out []store.User
	size := 0
	for _, id := range ids {
		key := userKey(nil, id)
		body, found, err := s.getBody(key)
		if err != nil {
			return nil, err
		}
		if !found {
			continue // cannot happen today: users are never deleted
		}
		u, err := decodeUser(key, id, body)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
		if size += u.Size(); q.MaxBytes > 0 && size >= q.MaxBytes {
			break
		}
	}
	return out, nil
}

// ListGroups implements store.Store.
func (s *Store) ListGroups(ctx context.Context, q store.ListQuery) ([]store.Group, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	ids, err := s.listIDs(ctx, nsGroup, q)
	if err != nil {
		return nil, err
	}
	var out []store.Group
	size := 0
	for _, id := range ids {
		key := groupKey(nil, id)
		body, found, err := s.getBody(key)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		g, err := decodeGroup(key, id, body)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
		if size += g.Size(); q.MaxBytes > 0 && size >= q.MaxBytes {
			break
		}
	}
	return out, nil
}

// listIDs returns the ids of the first q.Limit records of namespace ns
// (keys ns lp(id)) that match q, in bytewise id order.
//
// The length prefix orders keys by id length first ("b" before "aa"), so
// the ids of each length form one sorted run. listIDs takes up to q.Limit
// matching ids from every run and merges them: at most q.Limit keys are
// read per distinct id length (a few dozen at most: user ids are up to 64
// bytes), and only keys, the records being read after.
func (s *Store) listIDs(ctx context.Context, ns byte, q store.ListQuery) ([]string, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{ns}, UpperBound: []byte{ns + 1}})
	if err != nil {
		return nil, mapErr(err)
	}
	defer it.Close()
	var ids []string
	var run, seek []byte
	for valid := it.First(); valid; valid = it.SeekGE(prefixEnd(run)) {
		k := it.Key()
		n, w := binary.Uvarint(k[1:])
		if w <= 0 {
			return nil, corruptf(k, "bad record key")
		}
		run = append(run[:0], k[:1+w]...)
		if int(n) < len(q.Prefix) {
			continue // too short to match
		}
		// Within the run, ids above q.After start at or after its first n
		// bytes (an id of another length cannot equal them).
		from := q.Prefix
		if a := q.After[:min(int(n), len(q.After))]; a > from {
			from = a
		}
		seek = append(append(seek[:0], run...), from...)
		taken := 0
		for ok := it.SeekGE(seek); ok && taken < q.Limit; ok = it.Next() {
			k := it.Key()
			if !bytes.HasPrefix(k, run) {
				break // the next run
			}
			id := string(k[len(run):])
			if !strings.HasPrefix(id, q.Prefix) {
				break // past the prefix within this run
			}
			if id > q.After {
				ids = append(ids, id)
				taken++
			}
		}
		if err := it.Error(); err != nil {
			return nil, mapErr(err)
		}
	}
	if err := it.Error(); err != nil {
		return nil, mapErr(err)
	}
	slices.Sort(ids)
	if len(ids) > q.Limit {
		ids = ids[:q.Limit]
	}
	return ids, nil
}

// DiskSize implements store.Store: the sizes of the files in the store's
// directory (tables, write-ahead logs, manifests), the free-space ballast
// left out (it is reserve, not data). Pebble's own metrics lag the
// write-ahead log, which holds the newest writes.
func (s *Store) DiskSize(ctx context.Context) (int64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	names, err := s.disk.fs.List(s.disk.dir)
	if err != nil {
		return 0, mapErr(err)
	}
	var total int64
	for _, name := range names {
		if name == ballastName {
			continue
		}
		fi, err := s.disk.fs.Stat(s.disk.fs.PathJoin(s.disk.dir, name))
		if err != nil {
			continue // deleted since the listing (an obsolete file)
		}
		if fi.Mode().IsRegular() {
			total += fi.Size()
		}
	}
	return total, nil
}
