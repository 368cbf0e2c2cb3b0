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

// Retention (store.Retention, docs/retention.md). Three namespaces:
//
//	'j' lp(conversation)                    -> floor(8) cleaned(8) ranged(8)  (floorRec)
//	'W' lp(conversation) seq(8)             -> pos(8)    (the message's log position: its 'L' key)
//	'x' expiry(8, BE unix ms) lp(conv) seq(8) -> empty   (messages that disappear, by expiry)
//
// putLog writes 'W' (and 'x' for a message with ExpiresAt) in the batch that
// stores the message, so deleting a message can delete its 'L' entry without
// scanning the log, and the sweeper finds expired messages without scanning
// messages. Expiring a conversation's oldest messages deletes what is keyed
// otherwise (de-dup entries, mentions by name, 'L' entries, the reaction
// index) batch by batch, then every per-conversation, per-seq namespace
// (messages, reactions, pins, threads, mentions of everyone, log
// references) with one range deletion (floorRec); ReclaimSpace then lets
// Pebble drop the files those cover, so the space goes back to the file
// system.
const (
	nsFloor  byte = 'j'
	nsLogRef byte = 'W'
	nsExpiry byte = 'x'
)

// seqRanged are the namespaces keyed ns lp(conversation) seq(8)...: a range
// deletion of [seq 0, seq n) removes every key of messages below n.
var seqRanged = []byte{nsMessage, nsReaction, nsReactCount, nsPin, nsThread, nsThreadSum, nsThreadUser, nsMentionAll, nsLogRef}

func floorKey(b []byte, conv string) []byte { return appendLP(append(b, nsFloor), conv) }

func expiryKey(b []byte, at int64, conv string, seq uint64) []byte {
	b = binary.BigEndian.AppendUint64(append(b, nsExpiry), uint64(max(at, 0)))
	return binary.BigEndian.AppendUint64(appendLP(b, conv), seq)
}

// putRetention writes m's log reference and expiry entry into b (putLog).
func putRetention(b *pebble.Batch, m *pb.Message, pos uint64) {
	wk := convSeqKey(nil, nsLogRef, m.ConversationId, m.Seq)
	_ = b.Set(wk, frame(wk, binary.BigEndian.AppendUint64(nil, pos)), nil)
	if m.ExpiresAt > 0 {
		xk := expiryKey(nil, m.ExpiresAt, m.ConversationId, m.Seq)
		_ = b.Set(xk, frame(xk, nil), nil)
	}
	putFileRefs(b, m) // filerefs.go
}

// floorRec is a conversation's 'j' record. Messages below floor are never
// served. A sweep deletes them in two steps: batch by batch, the keys that
// are not ranged by seq (de-dup entries, log entries, mentions by name...),
// up to cleaned; then, once cleaned reaches floor, every seq-ranged
// namespace with one range deletion over [ranged, floor). One deletion
// spanning a whole sweep lets Pebble drop the files it covers whole; one
// per batch (a few hundred KB, far less than a file) made compactions
// rewrite the files instead, and that took the CPU sends needed while a
// long sweep ran. A crash between the steps leaves cleaned or ranged below
// floor: ExpiryUnfinished says so and the next sweep finishes the work.
// Records written before this had the floor alone (8 bytes): cleaned and
// ranged read as 0, and one more ExpireBefore settles them.
type floorRec struct{ floor, cleaned, ranged uint64 }

func (f floorRec) done() bool { return f.cleaned >= f.floor && f.ranged >= f.floor }

func (s *Store) readFloorRec(r pebble.Reader, conv string) (floorRec, error) {
	k := floorKey(nil, conv)
	v, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return floorRec{}, nil
	}
	if err != nil {
		return floorRec{}, mapErr(err)
	}
	defer closer.Close()
	body, err := unframe(k, v)
	if err != nil {
		return floorRec{}, err
	}
	return decodeFloor(k, body)
}

func decodeFloor(key, body []byte) (floorRec, error) {
	switch len(body) {
	case 8:
		return floorRec{floor: binary.BigEndian.Uint64(body)}, nil
	case 24:
		return floorRec{binary.BigEndian.Uint64(body), binary.BigEndian.Uint64(body[8:]), binary.BigEndian.Uint64(body[16:])}, nil
	}
	return floorRec{}, corruptf(key, "bad floor record")
}

func putFloor(b *pebble.Batch, conv string, f floorRec) {
	fk := floorKey(nil, conv)
	v := binary.BigEndian.AppendUint64(nil, f.floor)
	v = binary.BigEndian.AppendUint64(v, f.cleaned)
	v = binary.BigEndian.AppendUint64(v, f.ranged)
	_ = b.Set(fk, frame(fk, v), nil) // fails only for indexed batches
}

func (s *Store) readFloor(r pebble.Reader, conv string) (uint64, error) {
	f, err := s.readFloorRec(r, conv)
	return f.floor, err
}

// belowFloor reports whether seq of conv is below its floor: gone for
// readers and writers, whether or not its sweep has deleted it yet.
func (s *Store) belowFloor(conv string, seq uint64) (bool, error) {
	f, err := s.floor(conv)
	return seq < f, err
}

// floor is conv's floor, from floors when cached.
func (s *Store) floor(conv string) (uint64, error) {
	s.floorMu.RLock()
	f, ok := s.floors.get(conv)
	gen := s.floorGen
	s.floorMu.RUnlock()
	if ok {
		return f, nil
	}
	f, err := s.readFloor(s.db, conv)
	if err != nil {
		return 0, err
	}
	s.floorMu.Lock()
	if s.floorGen == gen {
		s.floors.put(conv, f)
	}
	s.floorMu.Unlock()
	return f, nil
}

// floorMoved caches conv's floor f as just committed.
func (s *Store) floorMoved(conv string, f uint64) {
	s.floorMu.Lock()
	s.floors.put(conv, f)
	s.floorGen++
	s.floorMu.Unlock()
}

// MessageFloor implements store.Retention.
func (s *Store) MessageFloor(ctx context.Context, conv string) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	return s.floor(conv)
}

// ExpiryUnfinished implements store.Retention.
func (s *Store) ExpiryUnfinished(ctx context.Context, conv string) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	f, err := s.readFloorRec(s.db, conv)
	return f.floor > 1 && !f.done(), err
}

// ExpireBefore implements store.Retention (see floorRec for its two
// steps). It reads the batch without locks, then commits it under
// appendMu: an edit or recall (Apply) checks the floor under that lock,
// and the de-dup cache is updated under it. Appends wait only for the
// commit.
func (s *Store) ExpireBefore(ctx context.Context, conv string, floor uint64, limit int) (removed []store.MessageRef, more bool, err error) {
	if err := s.enter(ctx); err != nil {
		return nil, false, err
	}
	defer s.closeMu.RUnlock()
	limit = max(limit, 1)
	last, err := s.lastSeq(conv)
	if err != nil {
		return nil, false, mapErr(err)
	}
	cur, err := s.readFloorRec(s.db, conv)
	if err != nil {
		return nil, false, err
	}
	floor = max(min(floor, last+1), cur.floor)
	if floor <= 1 || (floor == cur.floor && cur.done()) {
		return nil, false, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	prefix := messagePrefix(nil, conv)
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: messageKey(nil, conv, cur.cleaned), UpperBound: messageKey(nil, conv, floor)})
	if err != nil {
		return nil, false, mapErr(err)
	}
	upTo := floor
	var dups []string
	for valid := it.First(); valid; valid = it.Next() {
		seq, ok := seqFromMessageKey(it.Key(), prefix)
		if !ok {
			continue
		}
		if len(removed) == limit {
			more, upTo = true, seq
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, false, mapErr(err)
		}
		m, _ := decodeMessage(it.Key(), v, conv, seq) // corrupt: its range keys still go
		if dk := deleteDerived(b, conv, seq, m); dk != "" {
			dups = append(dups, dk)
		}
		removed = append(removed, store.MessageRef{ConversationID: conv, Seq: seq})
	}
	if err := it.Close(); err != nil {
		return nil, false, mapErr(err)
	}
	from := cur.cleaned
	if len(removed) > 0 {
		from = removed[0].Seq
	}
	if err := s.deleteLogEntries(b, conv, from, upTo); err != nil {
		return nil, false, err
	}
	if !more && max(upTo, cur.cleaned) >= floor {
		// The reaction index is keyed otherwise: scanned here, not under
		// the lock below (its entries below the floor may go whatever
		// that decides).
		if err := s.dropReactionIndex(b, conv, func(seq uint64) bool { return seq < floor }); err != nil {
			return nil, false, err
		}
	}
	// Under deleteMu: another sweep of conv may have cleaned part of the
	// batch meanwhile, or raised the floor further (it never goes down),
	// and DeleteMessages may have deleted some of it (neither is reported
	// twice). One scan, not a point read per message.
	removed, more, err = s.commitExpiry(b, conv, floor, upTo, more, removed, dups)
	if err != nil {
		return nil, false, err
	}
	// Synced outside the locks: the next deleter does not wait for it.
	if s.wo.Sync && (!more || time.Since(time.Unix(0, s.sweepSynced.Load())) >= sweepSyncEvery) {
		if err := s.write(small, 0, func() error { return s.db.LogData(nil, s.wo) }); err != nil {
			return nil, false, mapErr(err)
		}
		s.sweepSynced.Store(time.Now().UnixNano())
	}
	return removed, more, nil
}

// commitExpiry is ExpireBefore's commit of batch b, under deleteMu.
func (s *Store) commitExpiry(b *pebble.Batch, conv string, floor, upTo uint64, more bool, removed []store.MessageRef, dups []string) ([]store.MessageRef, bool, error) {
	s.deleteMu.Lock()
	defer s.deleteMu.Unlock()
	now, err := s.readFloorRec(s.db, conv)
	if err != nil {
		return nil, false, err
	}
	for len(removed) > 0 && removed[0].Seq < now.cleaned {
		removed = removed[1:]
	}
	if removed, err = s.stillStored(conv, removed, upTo); err != nil {
		return nil, false, err
	}
	next := floorRec{floor: max(floor, now.floor), cleaned: max(upTo, now.cleaned), ranged: now.ranged}
	if !more && next.cleaned >= next.floor && next.ranged < next.floor {
		// The second step: everything below the floor at once. From
		// ranged, not from 0: overlapping range deletions make every read
		// fragment all of them.
		for _, ns := range seqRanged {
			if err := b.DeleteRange(convSeqKey(nil, ns, conv, next.ranged), convSeqKey(nil, ns, conv, next.floor), nil); err != nil {
				return nil, false, mapErr(err)
			}
		}
		next.ranged = next.floor
	}
	if next != now {
		putFloor(b, conv, next)
	}
	// Only a batch that raises the floor or deletes the ranges commits
	// under appendMu: an edit or recall (Apply) checks the floor under it,
	// so none lands on a message once its floor is raised. The batches in
	// between delete only what messages already below the floor left,
	// which no append, edit or recall touches; the sends' commits (one
	// after another under appendMu) do not wait behind them. Each batch
	// holding appendMu (thousands a sweep) cost sends a fifth of their rate.
	moved := next.floor != now.floor
	locked := moved || next.ranged != now.ranged
	if locked {
		s.appendMu.Lock()
	}
	committed := func() {}
	if moved {
		committed = func() { s.floorMoved(conv, next.floor) }
	}
	// Deleting frees space: admitted like the small writes that must go
	// through when the disk is nearly full. Not synced under the locks:
	// a sweep commits thousands of batches. The sync below, at most once
	// a second (sweepSyncEvery), makes the deletions so far durable (the
	// WAL is sequential: it syncs this batch and every earlier one); a
	// power loss before it can only bring those batches' keys back until
	// the next sweep deletes them again.
	err = s.commitDeletion(b, pebble.NoSync, removed, committed)
	if !locked {
		s.appendMu.Lock() // the de-dup cache is appendMu's
	}
	if err == nil {
		for _, dk := range dups {
			s.dedup.del(dk)
		}
	}
	s.appendMu.Unlock()
	if err != nil {
		return nil, false, mapErr(err)
	}
	return removed, more, nil
}

// sweepSyncEvery: ExpireBefore makes its batches durable (one WAL sync)
// at most this often, and at the end of each sweep. A sync per batch
// (~20 a second under load) was that many extra fsyncs that the synced
// commits of sends queued behind. What a power loss can bring back is at
// most this much of a sweep's deletions, which the next sweep deletes
// again (their messages stay below the floor, never served).
const sweepSyncEvery = time.Second

// commitDeletion commits a batch deleting the messages refs and forgets
// them in React's cache of messages (which takes a cached message to
// exist), under reactMu from before the commit: a React cannot take one
// for existing between the two; committed runs there too (a moved floor
// is cached before a React can read it). deleteMu held (lock order:
// deleteMu, appendMu, reactMu; React takes only the last).
func (s *Store) commitDeletion(b *pebble.Batch, wo *pebble.WriteOptions, refs []store.MessageRef, committed func()) error {
	s.reactMu.Lock()
	defer s.reactMu.Unlock()
	if err := s.commitBatch(b, wo, small); err != nil {
		return err
	}
	committed()
	var k []byte
	for _, r := range refs {
		k = reactCountPrefix(k[:0], r.ConversationID, r.Seq)
		s.reactMsgs.del(string(k))
	}
	return nil
}

// stillStored returns the refs of refs (ascending seqs of conv, all
// below upTo) whose message is still stored.
func (s *Store) stillStored(conv string, refs []store.MessageRef, upTo uint64) ([]store.MessageRef, error) {
	if len(refs) == 0 {
		return refs, nil
	}
	prefix := messagePrefix(nil, conv)
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: messageKey(nil, conv, refs[0].Seq), UpperBound: messageKey(nil, conv, upTo)})
	if err != nil {
		return nil, mapErr(err)
	}
	kept, i := refs[:0], 0
	for valid := it.First(); valid && i < len(refs); valid = it.Next() {
		seq, ok := seqFromMessageKey(it.Key(), prefix)
		if !ok {
			continue
		}
		for i < len(refs) && refs[i].Seq < seq {
			i++ // deleted meanwhile
		}
		if i < len(refs) && refs[i].Seq == seq {
			kept = append(kept, refs[i])
			i++
		}
	}
	if err := it.Close(); err != nil {
		return nil, mapErr(err)
	}
	return kept, nil
}

// deleteKeyed adds to b the deletions of the keys of message seq that are
// not ranged by seq: its de-dup entry, mentions by name, expiry entry and
// log entry. m may be nil (a corrupt message): only the log entry goes. It
// returns the de-dup key deleted ("" for none).
func (s *Store) deleteKeyed(b *pebble.Batch, conv string, seq uint64, m *pb.Message) (string, error) {
	wk := convSeqKey(nil, nsLogRef, conv, seq)
	if v, closer, err := s.db.Get(wk); err == nil {
		deleteLogEntry(b, wk, v)
		_ = closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return "", mapErr(err)
	}
	return deleteDerived(b, conv, seq, m), nil
}

// deleteLogEntry adds to b the deletion of the log entry a 'W' entry
// (key wk, value v) points at.
func deleteLogEntry(b *pebble.Batch, wk, v []byte) {
	body, err := unframe(wk, v)
	if err == nil && len(body) == 8 {
		_ = b.Delete(logKey(nil, binary.BigEndian.Uint64(body)), nil)
	}
}

// deleteLogEntries adds to b the deletions of the log entries of conv's
// messages in [from, upTo): one scan of their 'W' entries. A conversation's
// log positions grow with its seqs, and a run of consecutive positions
// (messages of conv stored one after another, with no other write between
// them) goes as one range deletion: a point tombstone per message is what
// compactions spent their time on while a long sweep ran.
func (s *Store) deleteLogEntries(b *pebble.Batch, conv string, from, upTo uint64) error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: convSeqKey(nil, nsLogRef, conv, from), UpperBound: convSeqKey(nil, nsLogRef, conv, upTo)})
	if err != nil {
		return mapErr(err)
	}
	var run logRun
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return mapErr(err)
		}
		body, err := unframe(it.Key(), v)
		if err != nil || len(body) != 8 {
			continue // a corrupt reference: its entry stays (LogAfter skips what it cannot read)
		}
		run.add(b, binary.BigEndian.Uint64(body))
	}
	run.flush(b)
	return mapErr(it.Close())
}

// logRun collects ascending log positions into runs of consecutive ones
// and deletes each run with one range deletion (a single position with a
// point deletion).
type logRun struct{ first, next uint64 } // [first, next); empty when next == 0

func (r *logRun) add(b *pebble.Batch, pos uint64) {
	if r.next != 0 && pos == r.next {
		r.next++
		return
	}
	r.flush(b)
	r.first, r.next = pos, pos+1
}

func (r *logRun) flush(b *pebble.Batch) {
	switch {
	case r.next == 0:
	case r.next-r.first == 1:
		_ = b.Delete(logKey(nil, r.first), nil)
	default:
		_ = b.DeleteRange(logKey(nil, r.first), logKey(nil, r.next), nil)
	}
	r.first, r.next = 0, 0
}

// deleteDerived adds to b the deletions of message seq's keys other than
// its log entry (see deleteKeyed).
func deleteDerived(b *pebble.Batch, conv string, seq uint64, m *pb.Message) string {
	if m == nil {
		return ""
	}
	dropFileRefs(b, m)
	dk := ""
	if m.ClientMsgId != "" {
		k := dedupKey(nil, m.From, m.ClientMsgId)
		_ = b.Delete(k, nil)
		dk = string(k)
	}
	for _, u := range m.Mentions {
		_ = b.Delete(mentionKey(nil, u, conv, seq), nil)
	}
	if m.ExpiresAt > 0 {
		_ = b.Delete(expiryKey(nil, m.ExpiresAt, conv, seq), nil)
	}
	if m.ThreadRoot != 0 {
		_ = b.Delete(threadKey(nil, conv, m.ThreadRoot, seq), nil)
	}
	return dk
}

// dropReactionIndex deletes the conversation's reaction-change entries
// ('w') of the messages drop selects.
func (s *Store) dropReactionIndex(b *pebble.Batch, conv string, drop func(seq uint64) bool) error {
	p := reactIdxPrefix(nil, conv)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return mapErr(err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return mapErr(err)
		}
		body, err := unframe(it.Key(), v)
		if err != nil || len(body) != 8 {
			continue
		}
		if drop(binary.BigEndian.Uint64(body)) {
			_ = b.Delete(append([]byte(nil), it.Key()...), nil)
		}
	}
	return mapErr(it.Error())
}

// DeleteMessages implements store.Retention.
func (s *Store) DeleteMessages(ctx context.Context, refs []store.MessageRef) ([]store.MessageRef, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if len(refs) == 0 {
		return nil, nil
	}
	s.deleteMu.Lock()
	defer s.deleteMu.Unlock()
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	var done []store.MessageRef
	var dups []string
	bySeq := map[string]map[uint64]bool{}
	cleaned := map[string]uint64{}
	for _, r := range refs {
		c, ok := cleaned[r.ConversationID]
		if !ok {
			f, err := s.readFloorRec(s.db, r.ConversationID)
			if err != nil {
				return nil, err
			}
			c = f.cleaned
			cleaned[r.ConversationID] = c
		}
		if r.Seq < c {
			// A sweep deleted it already (and reported it); its own keys
			// wait for the sweep's range deletion.
			continue
		}
		m, err := s.getMessage(r.ConversationID, r.Seq)
		if err != nil && !errors.Is(err, store.ErrCorrupt) {
			return nil, mapErr(err)
		}
		if m == nil && err == nil {
			// Gone already; its expiry entry may remain (a message
			// deleted by ExpireBefore has none left, but be sure).
			continue
		}
		dk, err := s.deleteKeyed(b, r.ConversationID, r.Seq, m)
		if err != nil {
			return nil, err
		}
		if dk != "" {
			dups = append(dups, dk)
		}
		for _, ns := range seqRanged {
			_ = b.DeleteRange(convSeqKey(nil, ns, r.ConversationID, r.Seq), convSeqKey(nil, ns, r.ConversationID, r.Seq+1), nil)
		}
		if bySeq[r.ConversationID] == nil {
			bySeq[r.ConversationID] = map[uint64]bool{}
		}
		bySeq[r.ConversationID][r.Seq] = true
		done = append(done, r)
	}
	for conv, seqs := range bySeq {
		if err := s.dropReactionIndex(b, conv, func(seq uint64) bool { return seqs[seq] }); err != nil {
			return nil, err
		}
	}
	if b.Empty() {
		return nil, nil
	}
	if err := s.commitDeletion(b, s.wo, done, func() {}); err != nil {
		return nil, mapErr(err)
	}
	for _, dk := range dups {
		s.dedup.del(dk)
	}
	return done, nil
}

// ExpiringMessages implements store.Retention: a scan of the 'x' keys up to t.
func (s *Store) ExpiringMessages(ctx context.Context, t time.Time, limit int) ([]store.MessageRef, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	upper := binary.BigEndian.AppendUint64([]byte{nsExpiry}, uint64(max(t.UnixMilli()+1, 0)))
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{nsExpiry}, UpperBound: upper})
	if err != nil {
		return nil, mapErr(err)
	}
	defer it.Close()
	var out []store.MessageRef
	for valid := it.First(); valid && len(out) < limit; valid = it.Next() {
		k := it.Key()
		if len(k) < 1+8+1+8 {
			continue
		}
		conv, rest, err := readLP(k[9:])
		if err != nil || len(rest) != 8 {
			continue
		}
		out = append(out, store.MessageRef{ConversationID: conv, Seq: binary.BigEndian.Uint64(rest)})
	}
	return out, mapErr(it.Error())
}

// StoredConversations implements store.Retention: the 'l' keys (a
// conversation's newest seq), in key order (by the id's length, then its
// bytes; after is the last id of the previous page).
func (s *Store) StoredConversations(ctx context.Context, after string, limit int) ([]string, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 {
		return nil, nil
	}
	lower := []byte{nsLastSeq}
	if after != "" {
		lower = append(lastSeqKey(nil, after), 0)
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd([]byte{nsLastSeq})})
	if err != nil {
		return nil, mapErr(err)
	}
	defer it.Close()
	var out []string
	for valid := it.First(); valid && len(out) < limit; valid = it.Next() {
		conv, rest, err := readLP(it.Key()[1:])
		if err != nil || len(rest) != 0 {
			continue
		}
		out = append(out, conv)
	}
	return out, mapErr(it.Error())
}

// ReclaimSpace implements store.Retention. The sweep's range deletions are
// still in the memtable: flushed, they let Pebble drop whole every file they
// cover (delete-only compactions, which read nothing) once the flushed
// table's stats are loaded. A manual compaction started before that would
// read and rewrite those files instead, which under load cost sends more
// than the whole sweep. So ReclaimSpace flushes, waits for the range's disk
// usage to settle, and compacts only when much is left (files that hold
// other conversations' keys too, which no range deletion covers whole).
func (s *Store) ReclaimSpace(ctx context.Context, conv string, floor uint64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if conv == "" || floor == 0 {
		return nil // compactions run per conversation
	}
	before, err := s.rangeUsage(conv, floor)
	if err != nil {
		return err
	}
	if err := s.db.Flush(); err != nil {
		return mapErr(err)
	}
	left, err := s.settleUsage(ctx, conv, floor)
	if err != nil {
		return err
	}
	if left <= max(reclaimSlack, before/8) {
		// The rest (the range's edges) goes with Pebble's own compactions.
		return nil
	}
	for _, ns := range seqRanged {
		if err := s.db.Compact(ctx, convSeqKey(nil, ns, conv, 0), convSeqKey(nil, ns, conv, floor), true); err != nil {
			return mapErr(err)
		}
	}
	return nil
}

// reclaimSlack is what ReclaimSpace leaves to Pebble's own compactions
// without compacting the range itself.
const reclaimSlack = 32 << 20

// rangeUsage is the disk usage of the files holding conv's keys below floor.
func (s *Store) rangeUsage(conv string, floor uint64) (uint64, error) {
	var total uint64
	for _, ns := range seqRanged {
		n, err := s.db.EstimateDiskUsage(convSeqKey(nil, ns, conv, 0), convSeqKey(nil, ns, conv, floor))
		if err != nil {
			return 0, mapErr(err)
		}
		total += n
	}
	return total, nil
}

// settleUsage waits until conv's range below floor stops shrinking (1 s
// unchanged, at most 15 s: delete-only compactions wait for a free
// compaction slot) and returns its disk usage then.
func (s *Store) settleUsage(ctx context.Context, conv string, floor uint64) (uint64, error) {
	const (
		poll   = 100 * time.Millisecond
		still  = time.Second
		atMost = 15 * time.Second
	)
	last, err := s.rangeUsage(conv, floor)
	if err != nil {
		return 0, err
	}
	start, since := time.Now(), time.Now()
	t := time.NewTicker(poll)
	defer t.Stop()
	for last > 0 && time.Since(since) < still && time.Since(start) < atMost {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
		n, err := s.rangeUsage(conv, floor)
		if err != nil {
			return 0, err
		}
		if n < last {
			since = time.Now()
		}
		last = n
	}
	return last, nil
}
