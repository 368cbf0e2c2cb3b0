package pebblestore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// indexMessage puts the index entries of a new message (its seq assigned)
// into b: its thread reply entry, summary and participant, and its mention
// entries. Thread summaries accumulate in batchThreads, written by commit.
// Called with appendMu held.
func (s *Store) indexMessage(b *pebble.Batch, m *pb.Message) error {
	conv := m.ConversationId
	if root := m.ThreadRoot; root != 0 {
		key := threadKey(nil, conv, root, m.Seq)
		if err := b.Set(key, frame(key, nil), nil); err != nil {
			return err
		}
		if !m.SenderOnly {
			sum, err := s.batchThread(conv, root)
			if err != nil {
				return err
			}
			if sum.ReplyCount < math.MaxUint32 {
				sum.ReplyCount++
			}
			sum.LastReplySeq, sum.LastReplyAt = m.Seq, m.ServerTime
			if m.From != "" {
				key := threadUserKey(nil, conv, root, m.From)
				if err := b.Set(key, frame(key, nil), nil); err != nil {
					return err
				}
			}
		}
	}
	if !mentionable(m) {
		return nil
	}
	for _, user := range m.Mentions {
		if user == m.From {
			continue
		}
		key := mentionKey(nil, user, conv, m.Seq)
		if err := b.Set(key, frame(key, nil), nil); err != nil {
			return err
		}
	}
	if m.MentionAll {
		// The sender is in the value: Mentions leaves their own out.
		key := mentionAllKey(nil, conv, m.Seq)
		if err := b.Set(key, frame(key, appendLP(nil, m.From)), nil); err != nil {
			return err
		}
	}
	return nil
}

// mentionable reports whether m's mentions are indexed.
func mentionable(m *pb.Message) bool {
	return m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL && !m.SenderOnly && (len(m.Mentions) > 0 || m.MentionAll)
}

// unindexMentions deletes the mention entries of old (as stored), which is
// being recalled. Blind deletes: entries that were never written (the
// sender's own name, a message that was not indexed) cost a tombstone.
func unindexMentions(b *pebble.Batch, old *pb.Message) error {
	if old == nil || (len(old.Mentions) == 0 && !old.MentionAll) {
		return nil
	}
	for _, user := range old.Mentions {
		if err := b.Delete(mentionKey(nil, user, old.ConversationId, old.Seq), nil); err != nil {
			return err
		}
	}
	if old.MentionAll {
		return b.Delete(mentionAllKey(nil, old.ConversationId, old.Seq), nil)
	}
	return nil
}

// batchThread returns the summary of root's thread as the current batch
// leaves it, reading the committed one at the batch's first reply.
// Called with appendMu held.
func (s *Store) batchThread(conv string, root uint64) (*store.ThreadSummary, error) {
	key := threadSumKey(nil, conv, root)
	if sum, ok := s.batchThreads[string(key)]; ok {
		return sum, nil
	}
	sum, _, err := threadSummary(s.db, key)
	if err != nil {
		return nil, err
	}
	s.batchThreads[string(key)] = &sum
	return &sum, nil
}

// threadSummary reads one summary from r; found is false when the root has
// no counted replies.
func threadSummary(r pebble.Reader, key []byte) (store.ThreadSummary, bool, error) {
	body, found, err := getBodyFrom(r, key)
	if err != nil || !found {
		return store.ThreadSummary{}, false, err
	}
	sum, err := decodeThreadSummary(key, body)
	return sum, err == nil, err
}

// Pins implements store.Store: a scan of the conversation's pins, sorted by
// the seq of the event that made each (the server bounds how many there are).
func (s *Store) Pins(ctx context.Context, conversationID string) ([]store.Pin, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	prefix := pinPrefix(nil, conversationID)
	type ordered struct {
		pin   store.Pin
		order uint64
	}
	var pins []ordered
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		seq, ok := seqFromMessageKey(key, prefix)
		if !ok {
			return false, corruptf(key, "bad pin key")
		}
		p, order, err := decodePin(key, seq, body)
		if err != nil {
			return false, err
		}
		pins = append(pins, ordered{p, order})
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(pins, func(a, b ordered) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.pin.Seq, b.pin.Seq))
	})
	out := make([]store.Pin, len(pins))
	for i, p := range pins {
		out[i] = p.pin
	}
	return out, nil
}

// Threads implements store.Store: one point lookup per root, from one
// snapshot.
func (s *Store) Threads(ctx context.Context, conversationID string, roots []uint64) (map[uint64]store.ThreadSummary, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	out := make(map[uint64]store.ThreadSummary)
	if len(roots) == 0 {
		return out, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	for _, root := range roots {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum, found, err := threadSummary(snap, threadSumKey(nil, conversationID, root))
		if err != nil {
			return nil, err
		}
		if found {
			out[root] = sum
		}
	}
	return out, nil
}

// ThreadMessages implements store.Store. limit <= 0 returns none.
func (s *Store) ThreadMessages(ctx context.Context, conversationID string, root, after uint64, limit int) ([]*pb.Message, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || after == math.MaxUint64 {
		return nil, nil
	}
	prefix := threadPrefix(nil, conversationID, root)
	lower := binary.BigEndian.AppendUint64(slices.Clip(prefix), after+1)
	return s.threadScan(ctx, conversationID, prefix, lower, prefixEnd(prefix), limit, false)
}

// ThreadHistory implements store.Store. limit <= 0 returns none.
func (s *Store) ThreadHistory(ctx context.Context, conversationID string, root, before uint64, limit int) ([]*pb.Message, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || before == 1 {
		return nil, nil
	}
	prefix := threadPrefix(nil, conversationID, root)
	upper := prefixEnd(prefix)
	if before != 0 {
		upper = binary.BigEndian.AppendUint64(slices.Clip(prefix), before)
	}
	return s.threadScan(ctx, conversationID, prefix, prefix, upper, limit, true)
}

// threadScan reads up to limit reply seqs of a thread in [lower, upper),
// from the start or (reverse) the end, and returns their messages in
// ascending order, read from the snapshot the index was read from.
func (s *Store) threadScan(ctx context.Context, conv string, prefix, lower, upper []byte, limit int, reverse bool) ([]*pb.Message, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	var seqs []uint64
	err := iterateIn(ctx, snap, lower, upper, reverse, func(key, body []byte) (bool, error) {
		seq, ok := seqFromMessageKey(key, prefix)
		if !ok || len(body) != 0 {
			return false, corruptf(key, "bad thread index record")
		}
		seqs = append(seqs, seq)
		return len(seqs) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	if reverse {
		slices.Reverse(seqs)
	}
	out := make([]*pb.Message, 0, len(seqs))
	for _, seq := range seqs {
		key := messageKey(nil, conv, seq)
		v, closer, err := snap.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			// The entry and its message are written in one batch.
			return nil, corruptf(key, "thread index entry of a missing message")
		}
		if err != nil {
			return nil, mapErr(err)
		}
		m, err := decodeMessage(key, v, conv, seq)
		_ = closer.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// InThread implements store.Store: one point lookup.
func (s *Store) InThread(ctx context.Context, conversationID string, root uint64, userID string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	key := threadUserKey(nil, conversationID, root, userID)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return false, err
	}
	if len(body) != 0 {
		return false, corruptf(key, "bad thread participant record")
	}
	return true, nil
}

// Mentions implements store.Store: the user's own entries and the
// conversation's everyone entries (but those the user sent), merged. Each
// range is read from one snapshot up to limit entries; the everyone range
// steps over the user's own @everyone messages. limit <= 0 returns none.
func (s *Store) Mentions(ctx context.Context, userID, conversationID string, after uint64, limit int) ([]uint64, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || after == math.MaxUint64 {
		return nil, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()

	var named []uint64
	prefix := mentionPrefix(nil, userID, conversationID)
	lower := binary.BigEndian.AppendUint64(slices.Clip(prefix), after+1)
	err := iterateIn(ctx, snap, lower, prefixEnd(prefix), false, func(key, body []byte) (bool, error) {
		seq, ok := seqFromMessageKey(key, prefix)
		if !ok || len(body) != 0 {
			return false, corruptf(key, "bad mention record")
		}
		named = append(named, seq)
		return len(named) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	var everyone []uint64
	prefix = mentionAllPrefix(nil, conversationID)
	lower = binary.BigEndian.AppendUint64(slices.Clip(prefix), after+1)
	err = iterateIn(ctx, snap, lower, prefixEnd(prefix), false, func(key, body []byte) (bool, error) {
		seq, ok := seqFromMessageKey(key, prefix)
		from, rest, err := readLP(body)
		if !ok || err != nil || len(rest) != 0 {
			return false, corruptf(key, "bad mention record")
		}
		if from != userID {
			everyone = append(everyone, seq)
		}
		return len(everyone) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return mergeSeqs(named, everyone, limit), nil
}

// mergeSeqs merges two ascending lists without duplicates, at most limit.
func mergeSeqs(a, b []uint64, limit int) []uint64 {
	out := make([]uint64, 0, min(limit, len(a)+len(b)))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0] < b[0]):
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default: // the same message names the user and everyone
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}
