package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// decodeMessage verifies and decodes a message value. The decoded message
// must name the conversation and seq of its key: a value that verifies but
// sits under another key is corrupt too.
func decodeMessage(key, v []byte, conv string, seq uint64) (*pb.Message, error) {
	body, err := unframe(key, v)
	if err != nil {
		return nil, err
	}
	m := new(pb.Message)
	// Unmarshal copies bytes fields, so m does not alias Pebble's buffer.
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, corruptf(key, "undecodable message: %v", err)
	}
	if m.ConversationId != conv || m.Seq != seq {
		return nil, corruptf(key, "message does not match its key")
	}
	return m, nil
}

// getMessage returns one message, or nil when there is none.
func (s *Store) getMessage(conv string, seq uint64) (*pb.Message, error) {
	key := messageKey(nil, conv, seq)
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err)
	}
	defer closer.Close()
	return decodeMessage(key, v, conv, seq)
}

// Messages implements store.Store. limit <= 0 returns no messages.
func (s *Store) Messages(ctx context.Context, conversationID string, after uint64, limit int) ([]*pb.Message, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || after == math.MaxUint64 {
		return nil, nil
	}
	prefix := messagePrefix(nil, conversationID)
	lower := binary.BigEndian.AppendUint64(slices.Clip(prefix), after+1)
	return s.scan(ctx, conversationID, prefix, lower, prefixEnd(prefix), limit, false)
}

// History implements store.Store. limit <= 0 returns no messages.
func (s *Store) History(ctx context.Context, conversationID string, before uint64, limit int) ([]*pb.Message, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || before == 1 {
		return nil, nil
	}
	prefix := messagePrefix(nil, conversationID)
	upper := prefixEnd(prefix)
	if before != 0 {
		upper = binary.BigEndian.AppendUint64(slices.Clip(prefix), before)
	}
	return s.scan(ctx, conversationID, prefix, prefix, upper, limit, true)
}

// scan reads up to limit messages of conv in [lower, upper), from the start
// or (reverse) from the end, and returns them in ascending seq order.
func (s *Store) scan(ctx context.Context, conv string, prefix, lower, upper []byte, limit int, reverse bool) (out []*pb.Message, err error) {
	err = s.visit(ctx, prefix, lower, upper, limit, reverse, func(key, v []byte, seq uint64) error {
		m, err := decodeMessage(key, v, conv, seq)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if reverse {
		slices.Reverse(out)
	}
	return out, nil
}

// MessageHeads implements store.Store.
func (s *Store) MessageHeads(ctx context.Context, conversationID string, after uint64, limit int) (out []store.MessageHead, err error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || after == math.MaxUint64 {
		return nil, nil
	}
	prefix := messagePrefix(nil, conversationID)
	lower := binary.BigEndian.AppendUint64(slices.Clip(prefix), after+1)
	err = s.visit(ctx, prefix, lower, prefixEnd(prefix), limit, false, func(key, v []byte, seq uint64) error {
		body, err := unframe(key, v)
		if err != nil {
			return err
		}
		h, err := store.DecodeHead(body)
		if err != nil {
			return corruptf(key, "undecodable message: %v", err)
		}
		h.Seq = seq
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// visit calls f with up to limit messages' keys, values and seqs in
// [lower, upper), from the start or (reverse) from the end. The key and
// value are Pebble's: valid only during the call.
func (s *Store) visit(ctx context.Context, prefix, lower, upper []byte, limit int, reverse bool, f func(key, v []byte, seq uint64) error) (err error) {
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
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
	for n := 0; valid && n < limit; valid, n = step(it, reverse), n+1 {
		seq, ok := seqFromMessageKey(it.Key(), prefix)
		if !ok {
			return corruptf(it.Key(), "bad message key")
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return mapErr(err)
		}
		if err := f(it.Key(), v, seq); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return mapErr(err)
	}
	return nil
}

func step(it *pebble.Iterator, reverse bool) bool {
	if reverse {
		return it.Prev()
	}
	return it.Next()
}

// LastSeq implements store.Store.
func (s *Store) LastSeq(ctx context.Context, conversationID string) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	return s.lastSeq(conversationID)
}

// lastSeq is LastSeq for callers inside the store (closeMu held).
func (s *Store) lastSeq(conversationID string) (uint64, error) {
	s.seqMu.RLock()
	seq, ok := s.seqs.get(conversationID)
	s.seqMu.RUnlock()
	if ok {
		return seq, nil
	}
	// Not cached: read disk without filling the cache. Only Append fills it,
	// so a stale value read here can never overwrite a newer one.
	return s.readLastSeq(conversationID)
}

// Conversations implements store.Store.
func (s *Store) Conversations(ctx context.Context, userID string) (out []string, err error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	prefix := convPrefix(nil, userID)
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			out, err = nil, mapErr(cerr)
		}
	}()
	for valid := it.First(); valid; valid = it.Next() {
		key := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, mapErr(err)
		}
		if _, err := unframe(key, v); err != nil {
			return nil, err
		}
		conv, rest, err := readLP(bytes.TrimPrefix(key, prefix))
		if err != nil || len(rest) != 0 {
			return nil, corruptf(key, "bad conversation-list key")
		}
		out = append(out, conv)
	}
	if err := it.Error(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
