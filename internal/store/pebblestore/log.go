package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The message log (store.Log): every message Append stores and every event
// Apply stores gets an 'L' pos(8) key, in the same batch, whose value points
// at the message (lp(conversation) seq(8)). Positions are given out under
// appendMu, so they grow in commit order; the next one is kept in memory
// (logPos) and found again at Open from the last 'L' key: no extra read on
// the write path. A position handed to a write that failed is never given
// again while the process runs (the write may have reached the WAL), so the
// log has gaps but never two messages at one position.

var _ store.Log = (*Store)(nil)

func logKey(b []byte, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, nsLog), pos)
}

// putLog gives m the next log position in b. Called with appendMu held.
func (s *Store) putLog(b *pebble.Batch, m *pb.Message) {
	s.logPos++
	s.batchLog = s.logPos
	vlen := lpLen(m.ConversationId) + 8
	op := b.SetDeferred(1+8, vlen+frameExtra)
	logKey(op.Key[:0:9], s.logPos)
	v := appendLP(op.Value[1:1:1+vlen], m.ConversationId)
	binary.BigEndian.AppendUint64(v, m.Seq)
	sealValue(op.Key, op.Value)
	_ = op.Finish()              // fails only for indexed batches
	putRetention(b, m, s.logPos) // retention.go
}

// readLastLogPos finds the newest log position on disk (0: none).
func readLastLogPos(db *pebble.DB) (uint64, error) {
	lower := []byte{nsLog}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return 0, mapErr(err)
	}
	defer it.Close()
	if !it.Last() {
		return 0, mapErr(it.Error())
	}
	if len(it.Key()) != 9 {
		return 0, corruptf(it.Key(), "bad log key")
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

// LastLogPos implements store.Log: the newest position of a committed write
// (writes that failed inside Pebble are not counted, though their entries
// may show up after the store reopens).
func (s *Store) LastLogPos(ctx context.Context) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	return s.logCommitted.Load(), nil
}

// LogAfter implements store.Log: one scan of the 'L' keys and a point
// lookup per message. A corrupt log record or message gives an entry
// without Msg (and is logged), so one bad record never stops a follower.
func (s *Store) LogAfter(ctx context.Context, after uint64, limit, maxBytes int) (out []store.LogEntry, err error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || after == ^uint64(0) {
		return nil, nil
	}
	// One snapshot: the iterator and the lookups see the same writes.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: logKey(nil, after+1),
		UpperBound: prefixEnd([]byte{nsLog}),
	})
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = mapErr(cerr)
		}
	}()
	bytes := 0
	for valid := it.First(); valid && len(out) < limit; valid = it.Next() {
		key := it.Key()
		if len(key) != 9 {
			return nil, corruptf(key, "bad log key")
		}
		e := store.LogEntry{Pos: binary.BigEndian.Uint64(key[1:])}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, mapErr(err)
		}
		e.Msg, err = s.logMessage(snap, key, v)
		if errors.Is(err, store.ErrCorrupt) {
			s.log.Error("pebblestore: corrupt log entry or message; followers skip it", "pos", e.Pos, "err", err)
		} else if err != nil {
			return nil, err
		}
		out = append(out, e)
		if e.Msg != nil {
			bytes += proto.Size(e.Msg)
		}
		if maxBytes > 0 && bytes >= maxBytes {
			break
		}
	}
	return out, mapErr(it.Error())
}

// logMessage reads the message a log value points at.
func (s *Store) logMessage(r pebble.Reader, key, v []byte) (*pb.Message, error) {
	body, err := unframe(key, v)
	if err != nil {
		return nil, err
	}
	conv, rest, err := readLP(body)
	if err != nil || len(rest) != 8 {
		return nil, corruptf(key, "bad log record")
	}
	seq := binary.BigEndian.Uint64(rest)
	mk := messageKey(nil, conv, seq)
	mv, closer, err := r.Get(mk)
	if errors.Is(err, pebble.ErrNotFound) {
		// Written in the log's batch: a message can only be missing if
		// the store lost it.
		return nil, corruptf(key, "log entry of a missing message")
	}
	if err != nil {
		return nil, mapErr(err)
	}
	defer closer.Close()
	return decodeMessage(mk, mv, conv, seq)
}
