package pebblestore

import (
	"bytes"
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

var errBadReaction = errors.New("pebblestore: reaction without conversation, user or emoji")

// reactScratchMax: React's scratch maps are dropped rather than reused once
// a batch grew them past this many entries, so one huge batch does not pin
// their memory.
const reactScratchMax = 1 << 16

// reactCacheEntries bounds reactMsgs: each entry holds a message's counts
// (up to MaxDistinct emojis), so far fewer than the seq caches.
const reactCacheEntries = 1 << 14

// reactCached is a message's committed reactions: version and counts (all
// above zero), in order. Never changed once cached.
type reactCached struct {
	version uint64
	emojis  []reactEmoji
}

// reactBatch is React's state for one batch: everything it read and
// changed, so each message's counts, each conversation's version and each
// user's reactions to a message are read from Pebble at most once per batch
// however many ops touch them. Guarded by reactMu.
type reactBatch struct {
	msgs  map[reactMsgKey]*reactMsg
	convs map[string]*reactConv
	// users: the (message, user) pairs whose rows were read; rows: their
	// rows (a row of a pair read but absent from rows is absent).
	users map[reactUserKey]struct{}
	rows  map[reactRowKey]*reactRow
	it    *pebble.Iterator // over the 'e' range, opened at the first read
	key   []byte           // scratch key
}

type reactMsgKey struct {
	conv string
	seq  uint64
}

type reactUserKey struct {
	conv string
	seq  uint64
	user string
}

type reactRowKey struct {
	conv        string
	seq         uint64
	user, emoji string
}

// reactMsg is one message's reactions as the batch leaves them.
type reactMsg struct {
	err     error  // the message is missing or its record unreadable: its ops fail
	diskVer uint64 // the committed version (its 'w' entry goes when it changes)
	version uint64
	changed bool
	// emojis, by order; an entry whose count fell to 0 in this batch stays
	// (count 0) until the commit deletes its row, or moves last when re-added.
	emojis []reactEmoji
}

type reactEmoji struct {
	emoji string
	count uint64
	order uint64
	dirty bool // to be written (or, at count 0, deleted)
}

type reactConv struct {
	err     error
	version uint64
	changed bool
}

type reactRow struct{ present, onDisk bool }

func (b *reactBatch) reset() {
	if b.msgs == nil || len(b.rows) > reactScratchMax || len(b.users) > reactScratchMax || len(b.msgs) > reactScratchMax {
		b.msgs = make(map[reactMsgKey]*reactMsg)
		b.convs = make(map[string]*reactConv)
		b.users = make(map[reactUserKey]struct{})
		b.rows = make(map[reactRowKey]*reactRow)
		return
	}
	clear(b.msgs)
	clear(b.convs)
	clear(b.users)
	clear(b.rows)
}

// close releases the batch's iterator.
func (b *reactBatch) close() error {
	if b.it == nil {
		return nil
	}
	err := b.it.Close()
	b.it = nil
	return mapErr(err)
}

// React implements store.Store. The batch is one Pebble batch and one
// commit under the store's sync policy; every record an op needs is read
// once per batch and then kept in memory (reactBatch), so a batch of many
// ops on one message costs one read of its counts, and each user's rows are
// read once. Runs under reactMu, which makes each conversation's version
// gap-free and monotonic.
func (s *Store) React(ctx context.Context, ops []store.ReactionOp) ([]store.ReactionResult, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	res := make([]store.ReactionResult, len(ops))
	if len(ops) == 0 {
		return res, nil
	}
	s.reactMu.Lock()
	defer s.reactMu.Unlock()
	st := &s.react
	st.reset()
	for i := range ops {
		res[i] = s.reactOne(st, &ops[i])
	}
	if err := st.close(); err != nil {
		return nil, err
	}

	b := s.db.NewBatch()
	defer b.Close()
	if err := st.write(b); err != nil {
		return nil, mapErr(err)
	}
	if b.Empty() {
		st.cacheMessages(s.reactMsgs)
		return res, nil
	}
	if err := s.commitBatch(b, s.wo, bulk); err != nil {
		// Whether it landed is unknown: read it from disk next time.
		s.reactVerMu.Lock()
		for conv := range st.convs {
			s.reactVers.del(conv)
		}
		s.reactVerMu.Unlock()
		for k := range st.msgs {
			st.key = reactCountPrefix(st.key[:0], k.conv, k.seq)
			s.reactMsgs.del(string(st.key))
		}
		return nil, mapErr(err)
	}
	s.reactVerMu.Lock()
	for conv, c := range st.convs {
		if c.changed {
			s.reactVers.put(conv, c.version)
		}
	}
	s.reactVerMu.Unlock()
	st.cacheMessages(s.reactMsgs)
	return res, nil
}

// cacheMessages records the batch's messages, as committed, in cache.
func (st *reactBatch) cacheMessages(cache *genMap[reactCached]) {
	for k, m := range st.msgs {
		if m.err != nil {
			continue
		}
		c := reactCached{version: m.version}
		for _, e := range m.emojis {
			if e.count > 0 {
				e.dirty = false
				c.emojis = append(c.emojis, e)
			}
		}
		st.key = reactCountPrefix(st.key[:0], k.conv, k.seq)
		cache.put(string(st.key), c)
	}
}

// reactOne applies one op to the batch state. Every read it needs comes
// first, so an op that fails changes nothing.
func (s *Store) reactOne(st *reactBatch, op *store.ReactionOp) store.ReactionResult {
	if op.ConversationID == "" || op.UserID == "" || op.Emoji == "" {
		return store.ReactionResult{Err: errBadReaction}
	}
	conv, seq := op.ConversationID, op.Seq
	m := s.reactMessage(st, conv, seq)
	if m.err != nil {
		return store.ReactionResult{Err: m.err}
	}
	c := s.reactConversation(st, conv)
	if c.err != nil {
		return store.ReactionResult{Err: c.err}
	}
	if err := s.reactUser(st, conv, seq, op.UserID); err != nil {
		return store.ReactionResult{Err: err}
	}
	own := st.row(conv, seq, op.UserID, op.Emoji)
	add := !op.Remove
	if own.present == add {
		return store.ReactionResult{Reactions: st.counts(m, conv, seq, op.UserID), Version: m.version}
	}
	i := slices.IndexFunc(m.emojis, func(e reactEmoji) bool { return e.emoji == op.Emoji })
	next := c.version + 1
	switch {
	case add && i >= 0 && m.emojis[i].count > 0:
		m.emojis[i].count++
		m.emojis[i].dirty = true
	case add:
		if op.MaxDistinct > 0 && m.distinct() >= op.MaxDistinct {
			return store.ReactionResult{Err: store.ErrTooMany}
		}
		if i >= 0 { // fell to zero earlier in the batch: it comes back last
			m.emojis = slices.Delete(m.emojis, i, i+1)
		}
		m.emojis = append(m.emojis, reactEmoji{emoji: op.Emoji, count: 1, order: next, dirty: true})
	case i < 0 || m.emojis[i].count == 0:
		return store.ReactionResult{Err: corruptf(reactionKey(nil, conv, seq, op.UserID, op.Emoji), "reaction without a count")}
	default:
		m.emojis[i].count--
		m.emojis[i].dirty = true
	}
	own.present = add
	c.version, c.changed = next, true
	m.version, m.changed = next, true
	return store.ReactionResult{Changed: true, Reactions: st.counts(m, conv, seq, op.UserID), Version: next}
}

// distinct is the number of emojis with a count.
func (m *reactMsg) distinct() int {
	n := 0
	for _, e := range m.emojis {
		if e.count > 0 {
			n++
		}
	}
	return n
}

// counts returns m's counts, Me for user, whose rows reactOne read.
func (st *reactBatch) counts(m *reactMsg, conv string, seq uint64, user string) []*pb.Reaction {
	n := m.distinct()
	if n == 0 {
		return nil
	}
	vals := make([]pb.Reaction, n) // one allocation for the batch's many results
	out := make([]*pb.Reaction, 0, n)
	for _, e := range m.emojis {
		if e.count == 0 {
			continue
		}
		r := &vals[len(out)]
		r.Emoji, r.Count = e.emoji, uint32(min(e.count, math.MaxUint32))
		if row := st.rows[reactRowKey{conv, seq, user, e.emoji}]; row != nil {
			r.Me = row.present
		}
		out = append(out, r)
	}
	return out
}

// reactMessage returns the batch's state of a message, from the cache or
// read (its existence, then its counts and version: one short scan) at its
// first op.
func (s *Store) reactMessage(st *reactBatch, conv string, seq uint64) *reactMsg {
	k := reactMsgKey{conv, seq}
	if m, ok := st.msgs[k]; ok {
		return m
	}
	m := &reactMsg{}
	st.msgs[k] = m
	st.key = reactCountPrefix(st.key[:0], conv, seq)
	if c, ok := s.reactMsgs.get(string(st.key)); ok {
		// A cached message exists: messages are never deleted.
		m.diskVer, m.version, m.emojis = c.version, c.version, slices.Clone(c.emojis)
		return m
	}
	exists, err := s.messageExists(st, conv, seq)
	if err == nil && !exists {
		err = store.ErrNotFound
	}
	if err == nil {
		var it *pebble.Iterator
		if it, err = nsIter(context.Background(), s.db, nsReactCount); err == nil {
			m.diskVer, m.emojis, err = readReactions(it, conv, seq)
			if cerr := it.Close(); err == nil {
				err = mapErr(cerr)
			}
		}
		m.version = m.diskVer
	}
	m.err = err
	return m
}

func (s *Store) messageExists(st *reactBatch, conv string, seq uint64) (bool, error) {
	if seq == 0 {
		return false, nil
	}
	st.key = messageKey(st.key[:0], conv, seq)
	_, closer, err := s.db.Get(st.key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, mapErr(err)
	}
	_ = closer.Close()
	return true, nil
}

// nsIter opens an iterator over one namespace of r, to seek in.
func nsIter(ctx context.Context, r pebble.Reader, ns byte) (*pebble.Iterator, error) {
	it, err := r.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{ns}, UpperBound: []byte{ns + 1}})
	return it, mapErr(err)
}

// scanPrefix seeks it to prefix and calls fn with each key under it and its
// verified body (valid only during the call).
func scanPrefix(it *pebble.Iterator, prefix []byte, fn func(key, body []byte) error) error {
	for valid := it.SeekGE(prefix); valid && bytes.HasPrefix(it.Key(), prefix); valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return mapErr(err)
		}
		body, err := unframe(it.Key(), v)
		if err != nil {
			return err
		}
		if err := fn(it.Key(), body); err != nil {
			return err
		}
	}
	return mapErr(it.Error())
}

// readReactions reads a message's reaction version and counts with it (an
// iterator over the 'E' namespace), counts in order.
func readReactions(it *pebble.Iterator, conv string, seq uint64) (version uint64, emojis []reactEmoji, err error) {
	prefix := reactCountPrefix(nil, conv, seq)
	err = scanPrefix(it, prefix, func(key, body []byte) error {
		if len(key) == len(prefix) {
			v, err := decodeUint64(key, body, "reaction version")
			version = v
			return err
		}
		e, err := decodeCountRow(key, prefix, body)
		emojis = append(emojis, e)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	if len(emojis) > 0 && version == 0 {
		return 0, nil, corruptf(prefix, "reaction counts without a version")
	}
	slices.SortFunc(emojis, func(a, b reactEmoji) int { return cmp.Compare(a.order, b.order) })
	return version, emojis, nil
}

func decodeCountRow(key, prefix, body []byte) (reactEmoji, error) {
	emoji, rest, err := readLP(key[len(prefix):])
	if err != nil || len(rest) != 0 {
		return reactEmoji{}, corruptf(key, "bad reaction count key")
	}
	count, order, err := decodeReactCount(key, body)
	return reactEmoji{emoji: emoji, count: count, order: order}, err
}

// reactConversation returns the batch's state of a conversation's version.
func (s *Store) reactConversation(st *reactBatch, conv string) *reactConv {
	if c, ok := st.convs[conv]; ok {
		return c
	}
	c := &reactConv{}
	st.convs[conv] = c
	if v, ok := s.reactVers.get(conv); ok { // reactMu held: no writer
		c.version = v
	} else {
		c.version, c.err = s.readReactionVersion(conv)
	}
	return c
}

func (s *Store) readReactionVersion(conv string) (uint64, error) {
	key := reactVerKey(nil, conv)
	body, found, err := s.getBody(key)
	if err != nil || !found {
		return 0, err
	}
	return decodeUint64(key, body, "reaction version")
}

// reactUser reads user's reactions to a message into the batch, once.
func (s *Store) reactUser(st *reactBatch, conv string, seq uint64, user string) error {
	uk := reactUserKey{conv, seq, user}
	if _, ok := st.users[uk]; ok {
		return nil
	}
	if st.it == nil {
		// One iterator for the batch's reads: reactMu is held, so nothing
		// it could miss is written meanwhile.
		var err error
		if st.it, err = nsIter(context.Background(), s.db, nsReaction); err != nil {
			return err
		}
	}
	st.key = reactionUserPrefix(st.key[:0], conv, seq, user)
	err := userReactions(st.it, st.key, func(emoji string) {
		st.rows[reactRowKey{conv, seq, user, emoji}] = &reactRow{present: true, onDisk: true}
	})
	if err != nil {
		return err
	}
	st.users[uk] = struct{}{}
	return nil
}

// row returns one row of a (message, user) pair reactUser read.
func (st *reactBatch) row(conv string, seq uint64, user, emoji string) *reactRow {
	k := reactRowKey{conv, seq, user, emoji}
	r, ok := st.rows[k]
	if !ok {
		r = &reactRow{}
		st.rows[k] = r
	}
	return r
}

// userReactions calls fn with each emoji under prefix (one user's
// reactions to one message), seeking it.
func userReactions(it *pebble.Iterator, prefix []byte, fn func(emoji string)) error {
	return scanPrefix(it, prefix, func(key, body []byte) error {
		emoji, rest, err := readLP(key[len(prefix):])
		if err != nil || len(rest) != 0 || len(body) != 0 {
			return corruptf(key, "bad reaction record")
		}
		fn(emoji)
		return nil
	})
}

// write puts what the batch changed into b: the reaction rows whose state
// differs from disk, each changed message's counts, version and change
// index entry (the old one deleted), each changed conversation's version.
func (st *reactBatch) write(b *pebble.Batch) error {
	for k, r := range st.rows {
		if r.present == r.onDisk {
			continue
		}
		key := reactionKey(nil, k.conv, k.seq, k.user, k.emoji)
		var err error
		if r.present {
			err = b.Set(key, frame(key, nil), nil)
		} else {
			err = b.Delete(key, nil)
		}
		if err != nil {
			return err
		}
	}
	for k, m := range st.msgs {
		if !m.changed {
			continue
		}
		for _, e := range m.emojis {
			if !e.dirty {
				continue
			}
			key := reactCountKey(nil, k.conv, k.seq, e.emoji)
			var err error
			if e.count > 0 {
				err = b.Set(key, frame(key, encodeReactCount(e.count, e.order)), nil)
			} else {
				err = b.Delete(key, nil)
			}
			if err != nil {
				return err
			}
		}
		vk := reactCountPrefix(nil, k.conv, k.seq)
		if err := b.Set(vk, frame(vk, binary.BigEndian.AppendUint64(nil, m.version)), nil); err != nil {
			return err
		}
		if m.diskVer > 0 {
			if err := b.Delete(reactIdxKey(nil, k.conv, m.diskVer), nil); err != nil {
				return err
			}
		}
		ik := reactIdxKey(nil, k.conv, m.version)
		if err := b.Set(ik, frame(ik, binary.BigEndian.AppendUint64(nil, k.seq)), nil); err != nil {
			return err
		}
	}
	for conv, c := range st.convs {
		if !c.changed {
			continue
		}
		key := reactVerKey(nil, conv)
		if err := b.Set(key, frame(key, binary.BigEndian.AppendUint64(nil, c.version)), nil); err != nil {
			return err
		}
	}
	return nil
}

// Reactions implements store.Store: per message, one seek to its counts
// and one to userID's own reactions, all from one snapshot with two
// iterators for the whole call.
func (s *Store) Reactions(ctx context.Context, conversationID string, seqs []uint64, userID string) (map[uint64]store.ReactionSet, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	out := make(map[uint64]store.ReactionSet)
	if len(seqs) == 0 {
		return out, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	counts, err := nsIter(ctx, snap, nsReactCount)
	if err != nil {
		return nil, err
	}
	defer counts.Close()
	it, err := nsIter(ctx, snap, nsReaction)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var prefix []byte
	for _, seq := range seqs {
		if _, done := out[seq]; done {
			continue
		}
		version, emojis, err := readReactions(counts, conversationID, seq)
		if err != nil {
			return nil, err
		}
		if len(emojis) == 0 {
			continue
		}
		set := store.ReactionSet{Version: version, Reactions: make([]*pb.Reaction, len(emojis))}
		for i, e := range emojis {
			set.Reactions[i] = &pb.Reaction{Emoji: e.emoji, Count: uint32(min(e.count, math.MaxUint32))}
		}
		if userID != "" {
			prefix = reactionUserPrefix(prefix[:0], conversationID, seq, userID)
			err := userReactions(it, prefix, func(emoji string) {
				for _, r := range set.Reactions {
					if r.Emoji == emoji {
						r.Me = true
					}
				}
			})
			if err != nil {
				return nil, err
			}
		}
		out[seq] = set
	}
	return out, nil
}

// ReactionChanges implements store.Store: a range scan of the change index
// from after. limit <= 0 returns none.
func (s *Store) ReactionChanges(ctx context.Context, conversationID string, after uint64, limit int) ([]store.ReactionChange, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	if limit <= 0 || after == math.MaxUint64 {
		return nil, nil
	}
	prefix := reactIdxPrefix(nil, conversationID)
	lower := binary.BigEndian.AppendUint64(slices.Clip(prefix), after+1)
	var out []store.ReactionChange
	err := s.iterate(ctx, lower, prefixEnd(prefix), func(key, body []byte) (bool, error) {
		version, ok := seqFromMessageKey(key, prefix) // same layout: prefix, then 8 bytes
		if !ok || !bytes.HasPrefix(key, prefix) {
			return false, corruptf(key, "bad reaction change key")
		}
		seq, err := decodeUint64(key, body, "reaction change")
		if err != nil {
			return false, err
		}
		out = append(out, store.ReactionChange{Seq: seq, Version: version})
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReactionVersion implements store.Store.
func (s *Store) ReactionVersion(ctx context.Context, conversationID string) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	s.reactVerMu.RLock()
	v, ok := s.reactVers.get(conversationID)
	s.reactVerMu.RUnlock()
	if ok {
		return v, nil
	}
	// Not cached: read disk without filling the cache (only React fills
	// it, so a stale value read here never overwrites a newer one).
	return s.readReactionVersion(conversationID)
}
