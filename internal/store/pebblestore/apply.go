package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Apply implements store.Store. It runs under appendMu like Append and
// shares its seq assignment, de-dup index and caches; the event, its de-dup
// and list entries, the conversation's newest seq, the group record, the
// member records and the updated message are one batch, committed under the
// store's sync policy.
//
// The group record is keyed by the event's conversation; Group.ConversationID
// must be empty or equal to it. A member write moves the record between the
// current and past members' key ranges, deleting it from the other one.
// On any error nothing is written and Event.Seq is left zero.
func (s *Store) Apply(ctx context.Context, ch store.Change) (store.AppendResult, error) {
	if err := s.enter(ctx); err != nil {
		return store.AppendResult{}, err
	}
	defer s.closeMu.RUnlock()
	if err := validateChange(&ch); err != nil {
		return store.AppendResult{}, err
	}
	ev := ch.Event
	conv := ev.ConversationId

	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.resetBatch()

	if ev.ClientMsgId != "" {
		dk := dedupKey(s.keyBuf[:0], ev.From, ev.ClientMsgId)
		s.keyBuf = dk
		orig, err := s.findDuplicate(dk)
		if err != nil {
			return store.AppendResult{}, mapErr(err)
		}
		if orig != nil {
			return store.AppendResult{Msg: orig, Duplicate: true}, nil
		}
		s.pendingDup[string(dk)] = 0
	}
	var old *pb.Message // the message Update replaces, as stored
	if u := ch.Update; u != nil {
		// Messages are only written under appendMu, so it cannot vanish
		// before the commit below.
		var err error
		old, err = s.getMessage(u.ConversationId, u.Seq)
		if err != nil {
			return store.AppendResult{}, err
		}
		if old == nil {
			return store.AppendResult{}, store.ErrNotFound
		}
		// Below the floor it is gone, though its sweep may not have
		// deleted it yet.
		if gone, err := s.belowFloor(u.ConversationId, u.Seq); err != nil || gone {
			return store.AppendResult{}, cmpErr(err, store.ErrNotFound)
		}
		if old.Recalled {
			return store.AppendResult{}, store.ErrConflict
		}
	}
	if ch.MLS != nil {
		if err := s.checkMLSStep(conv, ch.MLS); err != nil {
			return store.AppendResult{}, err
		}
	}
	last, err := s.committedLastSeq(conv)
	if err != nil {
		return store.AppendResult{}, mapErr(err)
	}
	ev.Seq = last + 1
	s.batchSeqs[conv] = ev.Seq

	b := s.db.NewBatch()
	defer b.Close()
	if err := s.writeChange(b, &ch, old); err != nil {
		ev.Seq = 0
		return store.AppendResult{}, mapErr(err)
	}
	if err := s.commit(b, []*pb.Message{ev}); err != nil {
		ev.Seq = 0
		return store.AppendResult{}, mapErr(err)
	}
	return store.AppendResult{Msg: ev}, nil
}

func validateChange(ch *store.Change) error {
	ev := ch.Event
	if ev == nil || ev.ConversationId == "" {
		return errors.New("pebblestore: Apply: event nil or without conversation id")
	}
	if ch.Group != nil && ch.Group.ConversationID != "" && ch.Group.ConversationID != ev.ConversationId {
		return fmt.Errorf("pebblestore: Apply: group %q in an event of %q", ch.Group.ConversationID, ev.ConversationId)
	}
	for _, m := range ch.Members {
		if m.UserID == "" {
			return errors.New("pebblestore: Apply: member without user id")
		}
	}
	if ch.Update != nil && ch.Update.ConversationId == "" {
		return errors.New("pebblestore: Apply: update without conversation id")
	}
	return nil
}

// writeChange puts everything of ch into b; ch.Event.Seq is assigned and
// s.keyBuf holds its de-dup key when it has a client message id. old is the
// stored message ch.Update replaces (nil without an Update).
func (s *Store) writeChange(b *pebble.Batch, ch *store.Change, old *pb.Message) error {
	ev := ch.Event
	conv := ev.ConversationId
	if err := putMessage(b, ev); err != nil {
		return err
	}
	s.putLog(b, ev)
	s.countUsage(ev)
	if ev.ClientMsgId != "" {
		s.putDedup(b, s.keyBuf, conv, ev.Seq)
	}
	s.addToConversationList(b, ev.From, conv)
	if ev.To != "" && ev.To != ev.From {
		s.addToConversationList(b, ev.To, conv)
	}
	if ch.Group != nil {
		key := groupKey(nil, conv)
		if err := b.Set(key, frame(key, encodeGroup(ch.Group)), nil); err != nil {
			return err
		}
	}
	for _, m := range ch.Members { // m is a copy: the caller's slice is not changed
		if m.Left && m.LeftSeq == 0 {
			m.LeftSeq = ev.Seq
		}
		if ch.Joined && !m.Left && m.JoinSeq == 0 {
			m.JoinSeq = ev.Seq
		}
		ns, other := nsMember, nsPastMember
		if m.Left {
			ns, other = nsPastMember, nsMember
		}
		key := memberKey(nil, ns, conv, m.UserID)
		if err := b.Set(key, frame(key, encodeMember(&m)), nil); err != nil {
			return err
		}
		// Blind delete: cheaper than reading whether the record was in the
		// other range (a tombstone of a missing key costs a few bytes until
		// compaction). Members only scans the current range, so tombstones
		// there, from members who left, are stepped over until compacted.
		if err := b.Delete(memberKey(nil, other, conv, m.UserID), nil); err != nil {
			return err
		}
		s.addToConversationList(b, m.UserID, conv)
	}
	if err := s.indexMessage(b, ev); err != nil {
		return err
	}
	if ch.Update != nil {
		if err := putMessage(b, ch.Update); err != nil {
			return err
		}
		if ch.Update.Recalled {
			if err := unindexMentions(b, old); err != nil {
				return err
			}
			dropFileRefs(b, old) // a recalled message carries no file

		}
	}
	if ch.MLS != nil {
		if err := putMLSStep(b, conv, ch.MLS); err != nil {
			return err
		}
	}
	if p := ch.Pin; p != nil {
		key := pinKey(nil, conv, p.Seq)
		if p.Unpin {
			// Blind: unpinning a message that is not pinned deletes nothing.
			return b.Delete(key, nil)
		}
		return b.Set(key, frame(key, encodePin(p.By, p.At, ev.Seq)), nil)
	}
	return nil
}

// GetMessage implements store.Store.
func (s *Store) GetMessage(ctx context.Context, conversationID string, seq uint64) (*pb.Message, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	m, err := s.getMessage(conversationID, seq)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, store.ErrNotFound
	}
	if gone, err := s.belowFloor(conversationID, seq); err != nil || gone {
		return nil, cmpErr(err, store.ErrNotFound)
	}
	return m, nil
}

// GetGroup implements store.Store.
func (s *Store) GetGroup(ctx context.Context, conversationID string) (store.Group, error) {
	if err := s.enter(ctx); err != nil {
		return store.Group{}, err
	}
	defer s.closeMu.RUnlock()
	key := groupKey(nil, conversationID)
	body, found, err := s.getBody(key)
	if err != nil {
		return store.Group{}, err
	}
	if !found {
		return store.Group{}, store.ErrNotFound
	}
	return decodeGroup(key, conversationID, body)
}

// GetMember implements store.Store. A current member (the common case: a
// permission check) costs one point lookup; otherwise both ranges are read
// from one snapshot, so a concurrent Apply moving the record is never missed.
func (s *Store) GetMember(ctx context.Context, conversationID, userID string) (store.Member, error) {
	if err := s.enter(ctx); err != nil {
		return store.Member{}, err
	}
	defer s.closeMu.RUnlock()
	cur := memberKey(nil, nsMember, conversationID, userID)
	body, found, err := s.getBody(cur)
	if err != nil {
		return store.Member{}, err
	}
	if found {
		return decodeMember(cur, userID, body)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	past := memberKey(nil, nsPastMember, conversationID, userID)
	for _, key := range [][]byte{cur, past} {
		body, found, err := getBodyFrom(snap, key)
		if err != nil {
			return store.Member{}, err
		}
		if found {
			return decodeMember(key, userID, body)
		}
	}
	return store.Member{}, store.ErrNotFound
}

// Members implements store.Store: one range scan of the current members'
// keys from after, reading at most limit records; past members live in
// another key range and are not read. limit <= 0 returns none.
func (s *Store) Members(ctx context.Context, conversationID, after string, limit int) ([]store.Member, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	prefix := memberPrefix(nil, nsMember, conversationID)
	var out []store.Member
	err := s.iterate(ctx, afterKey(prefix, after), prefixEnd(prefix), func(key, body []byte) (bool, error) {
		m, err := decodeMember(key, string(key[len(prefix):]), body)
		if err != nil {
			return false, err
		}
		out = append(out, m)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Cursors implements store.Store: a prefix scan of the conversation's
// cursor keys, in no particular order.
func (s *Store) Cursors(ctx context.Context, conversationID string) ([]store.Cursor, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	prefix := cursorPrefix(nil, conversationID)
	var out []store.Cursor
	err := s.iterate(ctx, prefix, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		user, rest, err := readLP(bytes.TrimPrefix(key, prefix))
		if err != nil || len(rest) != 0 {
			return false, corruptf(key, "bad cursor key")
		}
		c := store.Cursor{ConversationID: conversationID, UserID: user}
		if c.Delivered, c.Read, err = decodeCursor(key, body); err != nil {
			return false, err
		}
		out = append(out, c)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// iterate calls fn with each key in [lower, upper) and its verified body,
// in key order, until fn returns false or an error. key and body are only
// valid during the call.
func (s *Store) iterate(ctx context.Context, lower, upper []byte, fn func(key, body []byte) (bool, error)) error {
	return iterateIn(ctx, s.db, lower, upper, false, fn)
}

// iterateIn is iterate reading from r (the DB or a snapshot), from the last
// key down when reverse is set.
func iterateIn(ctx context.Context, r pebble.Reader, lower, upper []byte, reverse bool, fn func(key, body []byte) (bool, error)) (err error) {
	it, err := r.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return mapErr(err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = mapErr(cerr)
		}
	}()
	valid := it.First()
	if reverse {
		valid = it.Last()
	}
	for ; valid; valid = step(it, reverse) {
		v, err := it.ValueAndErr()
		if err != nil {
			return mapErr(err)
		}
		body, err := unframe(it.Key(), v)
		if err != nil {
			return err
		}
		more, err := fn(it.Key(), body)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return mapErr(it.Error())
}

// cmpErr returns err, or gone when err is nil.
func cmpErr(err, gone error) error {
	if err != nil {
		return err
	}
	return gone
}
