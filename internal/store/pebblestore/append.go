package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// UseCachedSize: proto.Size has just been called on the message, so Marshal
// need not walk it a second time.
var marshalCached = proto.MarshalOptions{UseCachedSize: true}

// Append implements store.Store. A message with an empty ClientMsgId is
// never treated as a duplicate (there is nothing to match it on).
func (s *Store) Append(ctx context.Context, msgs []*pb.Message) ([]store.AppendResult, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	for i, m := range msgs {
		if m == nil || m.ConversationId == "" {
			return nil, fmt.Errorf("pebblestore: message %d: nil or without conversation id", i)
		}
	}
	res := make([]store.AppendResult, len(msgs))
	if len(msgs) == 0 {
		return res, nil
	}

	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.resetBatch()

	b := s.db.NewBatch()
	defer b.Close()

	fail := func(err error) ([]store.AppendResult, error) {
		for i, r := range res {
			if r.Msg != nil && !r.Duplicate {
				msgs[i].Seq = 0 // not stored: do not leave a seq that looks assigned
			}
		}
		return nil, mapErr(err)
	}

	for i, m := range msgs {
		if m.ClientMsgId != "" {
			dk := dedupKey(s.keyBuf[:0], m.From, m.ClientMsgId)
			s.keyBuf = dk
			if j, ok := s.pendingDup[string(dk)]; ok {
				res[i] = store.AppendResult{Msg: msgs[j], Duplicate: true}
				continue
			}
			orig, err := s.findDuplicate(dk)
			if err != nil {
				return fail(err)
			}
			if orig != nil {
				res[i] = store.AppendResult{Msg: orig, Duplicate: true}
				continue
			}
			s.pendingDup[string(dk)] = i
		}

		conv := m.ConversationId
		last, ok := s.batchSeqs[conv]
		if !ok {
			var err error
			if last, err = s.committedLastSeq(conv); err != nil {
				return fail(err)
			}
		}
		m.Seq = last + 1
		s.batchSeqs[conv] = m.Seq
		res[i] = store.AppendResult{Msg: m}
		s.countUsage(m)

		if err := putMessage(b, m); err != nil {
			return fail(err)
		}
		s.putLog(b, m)
		if m.ClientMsgId != "" {
			s.putDedup(b, s.keyBuf, conv, m.Seq)
		}
		s.addToConversationList(b, m.From, conv)
		if m.To != "" && m.To != m.From {
			s.addToConversationList(b, m.To, conv)
		}
		if err := s.indexMessage(b, m); err != nil {
			return fail(err)
		}
	}

	if b.Empty() { // every message was a duplicate
		return res, nil
	}
	if err := s.commit(b, msgs); err != nil {
		return fail(err)
	}
	return res, nil
}

// resetBatch empties the scratch state of one write. Called with appendMu
// held.
func (s *Store) resetBatch() {
	clear(s.pendingDup)
	clear(s.pendingConv)
	clear(s.batchSeqs)
	clear(s.batchUsage)
	clear(s.batchThreads)
	s.batchLog = 0
}

// commit writes the newest seq of each conversation in batchSeqs (and the
// thread summaries in batchThreads) into b,
// commits b and, once it is durable, advances the caches from batchSeqs,
// pendingDup (indexes into msgs) and pendingConv. Called with appendMu held.
func (s *Store) commit(b *pebble.Batch, msgs []*pb.Message) error {
	for conv, seq := range s.batchSeqs {
		putLastSeq(b, conv, seq)
	}
	for key, sum := range s.batchThreads {
		if err := b.Set([]byte(key), frame([]byte(key), encodeThreadSummary(*sum)), nil); err != nil {
			return err
		}
	}
	for user, add := range s.batchUsage {
		cur, err := s.committedUsage(user)
		if err != nil {
			return err
		}
		s.batchUsage[user] = cur + add // the new total, cached after the commit
		putUsage(b, user, cur+add)
	}
	if err := s.commitBatch(b, s.wo, bulk); err != nil {
		// Whether the batch reached the WAL is unknown: forget the cached
		// seqs of its conversations so the next Append reads them from disk
		// (a failed batch is atomic: all or nothing).
		s.seqMu.Lock()
		for conv := range s.batchSeqs {
			s.seqs.del(conv)
		}
		s.seqMu.Unlock()
		for user := range s.batchUsage {
			s.usage.del(user)
		}
		return err
	}
	for user, total := range s.batchUsage {
		s.usage.put(user, total)
	}
	if s.batchLog != 0 {
		s.logCommitted.Store(s.batchLog)
	}

	s.seqMu.Lock()
	for conv, seq := range s.batchSeqs {
		s.seqs.put(conv, seq)
	}
	s.seqMu.Unlock()
	for k, i := range s.pendingDup {
		s.dedup.put(k, dedupEntry{conv: msgs[i].ConversationId, seq: msgs[i].Seq})
	}
	for k := range s.pendingConv {
		s.convs.put(k, struct{}{})
	}
	return nil
}

// findDuplicate returns the stored message with de-dup key dk, or nil.
func (s *Store) findDuplicate(dk []byte) (*pb.Message, error) {
	e, ok := s.dedup.get(string(dk))
	if !ok {
		if s.dedupFilter.absent(dk) {
			return nil, nil
		}
		v, closer, err := s.db.Get(dk)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		body, err := unframe(dk, v)
		if err == nil {
			e.conv, e.seq, err = decodeDedup(dk, body)
		}
		_ = closer.Close()
		if err != nil {
			return nil, err
		}
		s.dedup.put(string(dk), e) // committed data: safe to cache now
	}
	m, err := s.getMessage(e.conv, e.seq)
	if err != nil {
		return nil, err
	}
	if m == nil || !bytes.Equal(dedupKey(nil, m.From, m.ClientMsgId), dk) {
		return nil, corruptf(dk, "de-dup record points to a missing or different message")
	}
	return m, nil
}

// committedLastSeq returns the newest committed seq of conv from the cache,
// else from disk. Called with appendMu held (the only writer of seqs), so
// reading seqs needs no seqMu.
func (s *Store) committedLastSeq(conv string) (uint64, error) {
	if seq, ok := s.seqs.get(conv); ok {
		return seq, nil
	}
	return s.readLastSeq(conv)
}

// readLastSeq reads conv's newest seq from its 'l' record: one
// Bloom-filtered point lookup, where seeking the last message key would read
// a data block on every level. A corrupt record falls back to that seek, so
// it costs time, not the conversation.
func (s *Store) readLastSeq(conv string) (uint64, error) {
	key := lastSeqKey(nil, conv)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, mapErr(err)
	}
	body, err := unframe(key, v)
	if err == nil && len(body) != 8 {
		err = corruptf(key, "bad last-seq record")
	}
	var seq uint64
	if err == nil {
		seq = binary.BigEndian.Uint64(body)
	}
	_ = closer.Close()
	if err != nil {
		s.log.Error("pebblestore: corrupt last-seq record; seeking the messages instead", "err", err)
		return s.seekLastSeq(conv)
	}
	return seq, nil
}

// seekLastSeq finds conv's newest seq from its message keys. The bounds are
// the conversation's own key range, so a corrupt block elsewhere is not read.
func (s *Store) seekLastSeq(conv string) (uint64, error) {
	prefix := messagePrefix(nil, conv)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, mapErr(err)
	}
	defer it.Close()
	if !it.Last() {
		return 0, mapErr(it.Error()) // no messages, or the seek failed
	}
	seq, ok := seqFromMessageKey(it.Key(), prefix)
	if !ok {
		return 0, corruptf(it.Key(), "bad message key")
	}
	return seq, nil
}

// putLastSeq records conv's newest seq, in the same batch as its messages.
func putLastSeq(b *pebble.Batch, conv string, seq uint64) {
	klen := 1 + lpLen(conv)
	op := b.SetDeferred(klen, 8+frameExtra)
	lastSeqKey(op.Key[:0:klen], conv)
	binary.BigEndian.PutUint64(op.Value[1:], seq)
	sealValue(op.Key, op.Value)
	_ = op.Finish()
}

// putMessage encodes m straight into the batch: no intermediate buffers.
func putMessage(b *pebble.Batch, m *pb.Message) error {
	size := proto.Size(m)
	klen := messageKeyLen(m.ConversationId)
	op := b.SetDeferred(klen, size+frameExtra)
	// Capacities are capped so an encoding that does not fit is caught by
	// the length checks rather than written elsewhere.
	key := messageKey(op.Key[:0:klen], m.ConversationId, m.Seq)
	body, err := marshalCached.MarshalAppend(op.Value[1:1:1+size], m)
	if err != nil {
		return err
	}
	if len(key) != klen || len(body) != size {
		return errors.New("pebblestore: message changed while being encoded")
	}
	sealValue(op.Key, op.Value)
	return op.Finish()
}

// putDedup records that dk was stored at (conv, seq), and adds dk to the
// de-dup filter (before the commit: see dedupFilter).
func (s *Store) putDedup(b *pebble.Batch, dk []byte, conv string, seq uint64) {
	s.dedupFilter.add(dk)
	vlen := lpLen(conv) + 8
	op := b.SetDeferred(len(dk), vlen+frameExtra)
	copy(op.Key, dk)
	v := appendLP(op.Value[1:1:1+vlen], conv)
	binary.BigEndian.AppendUint64(v, seq)
	sealValue(op.Key, op.Value)
	_ = op.Finish() // fails only for indexed batches
}

// addToConversationList writes user's list entry for conv unless it is
// known to exist. The entry is idempotent, so after a restart or cache
// eviction it is rewritten once rather than read first.
func (s *Store) addToConversationList(b *pebble.Batch, user, conv string) {
	ck := convKey(s.convBuf[:0], user, conv)
	s.convBuf = ck
	if _, ok := s.convs.get(string(ck)); ok {
		return
	}
	if _, ok := s.pendingConv[string(ck)]; ok {
		return
	}
	s.pendingConv[string(ck)] = struct{}{}
	op := b.SetDeferred(len(ck), frameExtra)
	copy(op.Key, ck)
	sealValue(op.Key, op.Value)
	_ = op.Finish()
}

// countUsage adds a new message's payload to its sender's stored bytes.
// Called with appendMu held.
func (s *Store) countUsage(m *pb.Message) {
	if m.From != "" && len(m.Payload) > 0 {
		s.batchUsage[m.From] += uint64(len(m.Payload))
	}
}

// committedUsage returns user's stored payload bytes from the cache, else
// from disk. Called with appendMu held (the only writer).
func (s *Store) committedUsage(user string) (uint64, error) {
	if n, ok := s.usage.get(user); ok {
		return n, nil
	}
	return s.readUsage(user)
}

func (s *Store) readUsage(user string) (uint64, error) {
	key := usageKey(nil, user)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return 0, err
	}
	if len(body) != 8 {
		return 0, corruptf(key, "bad storage usage record")
	}
	return binary.BigEndian.Uint64(body), nil
}

// putUsage records user's stored payload bytes, in the batch of the messages.
func putUsage(b *pebble.Batch, user string, n uint64) {
	key := usageKey(nil, user)
	_ = b.Set(key, frame(key, binary.BigEndian.AppendUint64(nil, n)), nil)
}

// UserStorage implements store.Store.
func (s *Store) UserStorage(ctx context.Context, userID string) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	return s.readUsage(userID)
}
