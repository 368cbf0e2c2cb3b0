package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Files carried by messages (store.Retention's OrphanedFiles). Two
// namespaces:
//
//	'y' lp(file) lp(conversation) seq(8) -> empty  (a stored message carries the file)
//	'Y' lp(file)                          -> unix ns (the file may be carried by no message any more, since then)
//
// putRetention writes a message's 'y' entries in the batch that stores it;
// the batch that deletes a message (or recalls or erases it) deletes them
// and writes the files' 'Y' entries, so a crash after it leaves a record of
// what to check, never a file nobody looks at again. Messages stored before
// 'y' existed have no entries: their files never get a 'Y' entry and are
// kept, as before.
const (
	nsFileRef    byte = 'y'
	nsFileOrphan byte = 'Y'
)

func fileRefPrefix(id string) []byte { return appendLP([]byte{nsFileRef}, id) }

func fileRefKey(id, conv string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendLP(fileRefPrefix(id), conv), seq)
}

func fileOrphanKey(id string) []byte { return appendLP([]byte{nsFileOrphan}, id) }

// putFileRefs writes m's 'y' entries into b.
func putFileRefs(b *pebble.Batch, m *pb.Message) {
	for _, a := range m.Attachments {
		if a.GetId() == "" {
			continue
		}
		k := fileRefKey(a.Id, m.ConversationId, m.Seq)
		_ = b.Set(k, frame(k, nil), nil)
	}
}

// dropFileRefs deletes m's 'y' entries in b and marks its files as
// possibly carried by no message. m may be nil.
func dropFileRefs(b *pebble.Batch, m *pb.Message) {
	if m == nil {
		return
	}
	for _, a := range m.Attachments {
		if a.GetId() == "" {
			continue
		}
		_ = b.Delete(fileRefKey(a.Id, m.ConversationId, m.Seq), nil)
		ok := fileOrphanKey(a.Id)
		_ = b.Set(ok, frame(ok, binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))), nil)
	}
}

// orphanMarkAge decodes a 'Y' entry's time as an age. Entries written
// before they held one count as old.
func orphanMarkAge(key, v []byte, now time.Time) (time.Duration, error) {
	body, err := unframe(key, v)
	if err != nil {
		return 0, err
	}
	if len(body) != 8 {
		return time.Duration(1<<63 - 1), nil
	}
	return now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(body)))), nil
}

// FileOrphaned implements store.Retention.
func (s *Store) FileOrphaned(ctx context.Context, id string) (time.Duration, bool, error) {
	if err := s.enter(ctx); err != nil {
		return 0, false, err
	}
	defer s.closeMu.RUnlock()
	key := fileOrphanKey(id)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, mapErr(err)
	}
	age, err := orphanMarkAge(key, v, time.Now())
	closer.Close()
	if err != nil {
		return 0, false, err
	}
	carried, err := s.fileCarried(id)
	if err != nil || carried {
		return 0, false, err
	}
	return age, true, nil
}

// fileCarried reports whether a 'y' entry of file id is committed.
func (s *Store) fileCarried(id string) (bool, error) {
	p := fileRefPrefix(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return false, mapErr(err)
	}
	defer it.Close()
	found := it.First()
	return found, mapErr(it.Error())
}

// orphanStale reports whether file id's 'Y' entry has nothing left to do:
// the file is carried again, or has no record.
func (s *Store) orphanStale(id string) (bool, error) {
	carried, err := s.fileCarried(id)
	if err != nil || carried {
		return carried, err
	}
	_, err = s.getFile(id)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// OrphanedFiles implements store.Retention: the 'Y' entries at least
// minAge old, in key order. An entry whose file is carried again, or has
// no record, is dropped on the way.
func (s *Store) OrphanedFiles(ctx context.Context, minAge time.Duration, limit int) ([]store.File, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	lower := []byte{nsFileOrphan}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, mapErr(err)
	}
	var out []store.File
	var stale [][]byte
	now := time.Now()
	// Bounded by limit files, as many stale entries, and 4×limit entries
	// looked at.
	for valid, seen := it.First(), 0; valid && len(out) < limit && len(stale) < limit && seen < 4*limit; valid, seen = it.Next(), seen+1 {
		id, rest, err := readLP(it.Key()[1:])
		if err != nil || len(rest) != 0 {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, mapErr(err)
		}
		if age, err := orphanMarkAge(it.Key(), v, now); err != nil {
			it.Close()
			return nil, err
		} else if age < minAge {
			continue // a file carried again within minAge is not collected
		}
		st, err := s.orphanStale(id)
		if err != nil {
			it.Close()
			return nil, err
		}
		if st {
			stale = append(stale, append([]byte(nil), it.Key()...))
			continue
		}
		f, err := s.getFile(id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, f)
	}
	if err := it.Close(); err != nil {
		return nil, mapErr(err)
	}
	if len(stale) > 0 {
		// Under deleteMu and appendMu: a deletion committing a new 'Y'
		// entry for one of these meanwhile writes it again after this
		// delete, never before.
		s.deleteMu.Lock()
		s.appendMu.Lock()
		b := s.db.NewBatch()
		for _, k := range stale {
			id, _, _ := readLP(k[1:])
			if st, err := s.orphanStale(id); err != nil || !st {
				continue // left for the next call
			}
			_ = b.Delete(k, nil)
		}
		err := s.commitBatch(b, s.wo, small)
		b.Close()
		s.appendMu.Unlock()
		s.deleteMu.Unlock()
		if err != nil {
			return nil, mapErr(err)
		}
	}
	return out, nil
}

// DeleteOrphanedFile implements store.Retention: under deleteMu and
// appendMu (messages, and so 'y' entries, are only written or deleted
// under one of them) and fileMu (the usage count), one batch.
func (s *Store) DeleteOrphanedFile(ctx context.Context, id string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	s.deleteMu.Lock()
	defer s.deleteMu.Unlock()
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(fileOrphanKey(id), nil)
	carried, err := s.fileCarried(id)
	if err != nil {
		return false, err
	}
	deleted := false
	if !carried {
		f, err := s.getFile(id)
		switch {
		case err == nil:
			files, bytes, err := s.mediaUsage(f.Owner)
			if err != nil {
				return false, err
			}
			_ = b.Delete(fileKey(id), nil)
			_ = b.Delete(unattachedKey(f), nil)
			uk := mediaUsageKey(f.Owner)
			if files <= 1 {
				_ = b.Delete(uk, nil)
			} else {
				_ = b.Set(uk, frame(uk, encodeMediaUsage(files-1, max(bytes-f.Size, 0))), nil)
			}
			deleted = true
		case !errors.Is(err, store.ErrNotFound):
			return false, err
		}
	}
	if err := s.commitBatch(b, s.wo, small); err != nil {
		return false, mapErr(err)
	}
	return deleted, nil
}
