package pebblestore

import (
	"context"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Account deletion (store.Accounts). Nothing here has an index of its own:
// deleting an account is rare, so the records about a user that are keyed
// by someone else (other users' contact records and block lists, files by
// id) are found by scanning their namespace once, instead of every write
// paying for a reverse index.

var _ store.Accounts = (*Store)(nil)

// noRecycleCleaner deletes obsolete files like Pebble's default cleaner but
// stops Pebble from recycling write-ahead logs: a recycled WAL is renamed
// and overwritten from its start, so the records of an erased message or a
// deleted password hash stay readable in its unwritten tail until it fills.
// Pebble recycles only when the cleaner does not declare that it needs the
// files' contents (base.NeedsFileContents, an unexported method that
// ArchiveCleaner has). archiveMarker brings that declaration one level
// deeper than DeleteCleaner's Clean and String, which therefore win. The
// cost: each new WAL is a new file (a create and a directory sync per
// memtable rotation).
type noRecycleCleaner struct {
	pebble.DeleteCleaner
	archiveMarker
}

type archiveMarker struct{ pebble.ArchiveCleaner }

// FilesOf implements store.Accounts: a scan of every file record.
func (s *Store) FilesOf(ctx context.Context, owner, after string, limit int) ([]store.File, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	lower := []byte{nsFile}
	var out []store.File
	err := s.iterate(ctx, lower, prefixEnd(lower), func(key, body []byte) (bool, error) {
		id, rest, err := readLP(key[1:])
		if err != nil || len(rest) != 0 {
			return false, corruptf(key, "bad file key")
		}
		if id <= after {
			return true, nil
		}
		f, err := decodeFile(key, id, body)
		if err != nil {
			return false, err
		}
		if f.Owner == owner {
			out = append(out, f)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.File) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// erase clears what a deleted user wrote in m; it reports whether m changed.
func erase(m *pb.Message) bool {
	before := proto.Clone(m)
	m.Payload, m.SearchText, m.ContentType = nil, "", ""
	m.Attachments, m.Mentions, m.MentionAll = nil, nil, false
	if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
		m.Recalled = true
	}
	return !proto.Equal(before, m)
}

// EraseMessages implements store.Accounts: one batch per call, under
// appendMu (messages are only written under it), each erased message
// logged so the search follower drops it.
func (s *Store) EraseMessages(ctx context.Context, conv, from string, after uint64, limit int) (uint64, int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, 0, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return 0, 0, nil
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.resetBatch()
	prefix := messagePrefix(nil, conv)
	var changed []*pb.Message
	var olds []*pb.Message
	next, n := uint64(0), 0
	err := s.iterate(ctx, messageKey(nil, conv, after+1), prefixEnd(prefix), func(key, body []byte) (bool, error) {
		seq, ok := seqFromMessageKey(key, prefix)
		if !ok {
			return false, corruptf(key, "bad message key")
		}
		next, n = seq, n+1
		m := &pb.Message{}
		if err := proto.Unmarshal(body, m); err != nil {
			return false, corruptf(key, "bad message")
		}
		m.ConversationId, m.Seq = conv, seq
		if m.From == from {
			old := proto.Clone(m).(*pb.Message)
			if erase(m) {
				changed, olds = append(changed, m), append(olds, old)
			}
		}
		return n < limit, nil
	})
	if err != nil {
		return 0, 0, err
	}
	if len(changed) == 0 {
		return next, 0, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for i, m := range changed {
		if err := putMessage(b, m); err != nil {
			return 0, 0, mapErr(err)
		}
		s.putLog(b, m)
		if err := unindexMentions(b, olds[i]); err != nil {
			return 0, 0, mapErr(err)
		}
		dropFileRefs(b, olds[i]) // an erased message carries no file

	}
	if err := s.commit(b, nil); err != nil {
		return 0, 0, mapErr(err)
	}
	return next, len(changed), nil
}

// DeleteUserRecords implements store.Accounts in batches of bounded size.
func (s *Store) DeleteUserRecords(ctx context.Context, user string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var keys [][]byte
	collect := func(lower, upper []byte, match func(key []byte) bool) error {
		return s.iterate(ctx, lower, upper, func(key, _ []byte) (bool, error) {
			if match == nil || match(key) {
				keys = append(keys, slices.Clone(key))
			}
			return true, nil
		})
	}
	// The conversation list names the cursors to delete.
	var convs []string
	cp := convPrefix(nil, user)
	if err := s.iterate(ctx, cp, prefixEnd(cp), func(key, _ []byte) (bool, error) {
		conv, _, err := readLP(key[len(cp):])
		if err != nil {
			return false, corruptf(key, "bad conversation list key")
		}
		convs = append(convs, conv)
		keys = append(keys, slices.Clone(key))
		return true, nil
	}); err != nil {
		return err
	}
	for _, conv := range convs {
		keys = append(keys, cursorKey(nil, conv, user))
	}
	own := func(ns byte) []byte { return appendLP([]byte{ns}, user) }
	for _, ns := range []byte{nsSettings, nsHidden, nsContact, nsBlock, nsPush, nsMention} {
		p := own(ns)
		if err := collect(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	// Other users' contact records and block entries about user: the last
	// key component is the raw user id after lp(owner).
	about := func(key []byte) bool {
		_, rest, err := readLP(key[1:])
		return err == nil && string(rest) == user
	}
	for _, ns := range []byte{nsContact, nsBlock} {
		if err := collect([]byte{ns}, []byte{ns + 1}, about); err != nil {
			return err
		}
	}
	keys = append(keys, lastSeenKey(nil, user), usageKey(nil, user))
	const batchKeys = 1024
	for len(keys) > 0 {
		n := min(len(keys), batchKeys)
		b := s.db.NewBatch()
		for _, k := range keys[:n] {
			_ = b.Delete(k, nil)
		}
		err := s.commitBatch(b, s.wo, small)
		b.Close()
		if err != nil {
			return mapErr(err)
		}
		keys = keys[n:]
	}
	s.cursorMu.Lock()
	for _, conv := range convs {
		s.cursorCache.del(string(cursorKey(nil, conv, user)))
	}
	s.cursorMu.Unlock()
	s.appendMu.Lock()
	s.usage.del(user)
	for _, conv := range convs {
		s.convs.del(string(convKey(nil, user, conv)))
	}
	s.appendMu.Unlock()
	return nil
}

// PurgeDeleted implements store.Accounts: a flush (the memtables, and with
// them the WALs that hold the old bytes, become tables; the WALs are then
// deleted, never recycled: noRecycleCleaner) and a compaction of the whole
// key space, which rewrites every table without the versions that were
// overwritten or deleted. Obsolete tables are deleted by Pebble right after.
func (s *Store) PurgeDeleted(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if err := s.db.Flush(); err != nil {
		return mapErr(err)
	}
	return mapErr(s.db.Compact(ctx, []byte{0}, []byte{0xff}, false))
}
