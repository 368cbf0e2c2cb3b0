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

// reactChunk is how many Reactions React allocates at a time for its
// results (a batch's results share a few allocations, not two per op).
const reactChunk = 128

// reactCached is a message's committed reactions: version and counts (all
// above zero), in order. Never changed once cached.
type reactCached struct {
	version uint64
	emojis  []reactEmoji
}

// reactBatch is React's state for one batch: everything it read and
// changed, so each message's counts, each conversation's version and each
// user's reactions to a message are read from Pebble at most once per batch
// however many ops touch them. Guarded by reactMu. Its buffers are reused
// from batch to batch.
type reactBatch struct {
	msgs  map[reactMsgKey]*reactMsg
	convs map[string]*reactConv
	// users indexes userv: the (message, user) pairs whose rows were read.
	users map[reactUserKey]int32
	// userv keeps its entries' emoji slices (cleared) between batches, so a
	// user's reactions are read without allocating once a batch of that
	// size has run.
	userv []reactUser
	// vals, ptrs: what is left of the chunk results' Reactions are cut from
	// (never reused: results own them).
	vals     []pb.Reaction
	ptrs     []*pb.Reaction
	key, val []byte // scratch key and value
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
	floor   uint64 // messages below it are gone (retention), deleted yet or not
	changed bool
}

// reactUser is one user's reactions to one message as the batch leaves
// them: its 'e' row.
type reactUser struct {
	k      reactUserKey
	err    error    // the row is unreadable: the user's ops on the message fail
	emojis []string // in the order the user added them
	onDisk bool     // the row exists on disk (perhaps empty)
	dirty  bool     // emojis changed: the row is to be written
}

func (b *reactBatch) reset() {
	if b.msgs == nil || len(b.users) > reactScratchMax || len(b.msgs) > reactScratchMax || len(b.convs) > reactScratchMax {
		b.msgs = make(map[reactMsgKey]*reactMsg)
		b.convs = make(map[string]*reactConv)
		b.users = make(map[reactUserKey]int32)
		b.userv = nil
	} else {
		clear(b.msgs)
		clear(b.convs)
		clear(b.users)
	}
	for i := range b.userv {
		u := &b.userv[i]
		clear(u.emojis)
		*u = reactUser{emojis: u.emojis[:0]}
	}
	b.userv = b.userv[:0]
}

// React implements store.Store. The batch is one Pebble batch and one
// commit under the store's sync policy; every record an op needs is read
// once per batch and then kept in memory (reactBatch), so a batch of many
// ops on one message costs one read of its counts, and each user's
// reactions to it one point lookup. Runs under reactMu, which makes each
// conversation's version gap-free and monotonic.
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
	// The chunk's rest goes with the batch: results keep only what they use.
	defer func() { st.vals, st.ptrs = nil, nil }()
	for i := range ops {
		res[i] = s.reactOne(st, &ops[i])
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
	c := s.reactConversation(st, conv)
	if c.err != nil {
		return store.ReactionResult{Err: c.err}
	}
	if seq < c.floor {
		return store.ReactionResult{Err: store.ErrNotFound}
	}
	m := s.reactMessage(st, conv, seq)
	if m.err != nil {
		return store.ReactionResult{Err: m.err}
	}
	u := s.reactUser(st, m, conv, seq, op.UserID)
	if u.err != nil {
		return store.ReactionResult{Err: u.err}
	}
	j := slices.Index(u.emojis, op.Emoji)
	add := !op.Remove
	if (j >= 0) == add {
		return store.ReactionResult{Reactions: st.counts(m, u), Version: m.version}
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
		st.key = reactionKey(st.key[:0], conv, seq, op.UserID)
		return store.ReactionResult{Err: corruptf(st.key, "reaction %q without a count", op.Emoji)}
	default:
		m.emojis[i].count--
		m.emojis[i].dirty = true
	}
	if add {
		u.emojis = append(u.emojis, op.Emoji)
	} else {
		u.emojis = slices.Delete(u.emojis, j, j+1)
	}
	u.dirty = true
	c.version, c.changed = next, true
	m.version, m.changed = next, true
	return store.ReactionResult{Changed: true, Reactions: st.counts(m, u), Version: next}
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

// counts returns m's counts, Me for u's user.
func (st *reactBatch) counts(m *reactMsg, u *reactUser) []*pb.Reaction {
	n := m.distinct()
	if n == 0 {
		return nil
	}
	vals, out := st.reactions(n)
	for _, e := range m.emojis {
		if e.count == 0 {
			continue
		}
		r := &vals[len(out)]
		r.Emoji, r.Count = e.emoji, uint32(min(e.count, math.MaxUint32))
		r.Me = slices.Contains(u.emojis, e.emoji)
		out = append(out, r)
	}
	return out
}

// reactions returns n zero Reactions and an empty slice of capacity n for
// pointers to them, cut from the batch's chunk.
func (st *reactBatch) reactions(n int) ([]pb.Reaction, []*pb.Reaction) {
	if len(st.vals) < n {
		st.vals = make([]pb.Reaction, max(n, reactChunk))
		st.ptrs = make([]*pb.Reaction, len(st.vals))
	}
	vals, ptrs := st.vals[:n:n], st.ptrs[:0:n]
	st.vals, st.ptrs = st.vals[n:], st.ptrs[n:]
	return vals, ptrs
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
	if c.err == nil {
		// Once per conversation and batch: a message cached as existing
		// may have gone below the floor since.
		c.floor, c.err = s.floor(conv)
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

// reactUser returns the batch's state of user's reactions to a message
// (m, whose state the batch has), read at the pair's first op: one point
// lookup of its row. reactMu is held, so nothing changes it meanwhile.
func (s *Store) reactUser(st *reactBatch, m *reactMsg, conv string, seq uint64, user string) *reactUser {
	k := reactUserKey{conv, seq, user}
	if i, ok := st.users[k]; ok {
		return &st.userv[i]
	}
	if len(st.userv) < cap(st.userv) {
		st.userv = st.userv[:len(st.userv)+1] // an entry reset left, its emojis' array kept
	} else {
		st.userv = append(st.userv, reactUser{})
	}
	st.users[k] = int32(len(st.userv) - 1)
	u := &st.userv[len(st.userv)-1]
	u.k = k
	st.key = reactionKey(st.key[:0], conv, seq, user)
	u.onDisk, u.err = userReactions(s.db, st.key, func(emoji []byte) {
		// The message's own copy of the name, if it has the emoji (it
		// should): no allocation per user.
		if i := slices.IndexFunc(m.emojis, func(e reactEmoji) bool { return e.emoji == string(emoji) }); i >= 0 {
			u.emojis = append(u.emojis, m.emojis[i].emoji)
		} else {
			u.emojis = append(u.emojis, string(emoji))
		}
	})
	if u.err != nil {
		clear(u.emojis)
		u.emojis = u.emojis[:0]
	}
	return u
}

// userReactions reads one user's reactions to one message (its 'e' row,
// key) from r, one point lookup, and calls fn with each emoji (valid only
// during the call); found is false if the user has no row (an empty row:
// found, no emojis).
func userReactions(r pebble.Reader, key []byte, fn func(emoji []byte)) (found bool, err error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, mapErr(err)
	}
	defer closer.Close()
	body, err := unframe(key, v)
	if err != nil {
		return true, err
	}
	for rest := body; len(rest) > 0; {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n == 0 || n > uint64(len(rest)-w) {
			return true, corruptf(key, "bad reaction record")
		}
		emoji := rest[w : w+int(n)]
		if lpListHas(body[:len(body)-len(rest)], emoji) {
			return true, corruptf(key, "reaction record with %q twice", emoji)
		}
		fn(emoji)
		rest = rest[w+int(n):]
	}
	return true, nil
}

// lpListHas reports whether list, a well-formed run of length-prefixed
// strings, holds s.
func lpListHas(list, s []byte) bool {
	for len(list) > 0 {
		n, w := binary.Uvarint(list)
		if bytes.Equal(list[w:w+int(n)], s) {
			return true
		}
		list = list[w+int(n):]
	}
	return false
}

// appendUserReactions appends the framed value of a user's 'e' row (key)
// holding emojis to b.
func appendUserReactions(b, key []byte, emojis []string) []byte {
	start := len(b)
	b = append(b, 0) // the format byte, set by sealValue
	for _, e := range emojis {
		b = appendLP(b, e)
	}
	b = append(b, 0, 0, 0, 0)
	sealValue(key, b[start:])
	return b
}

// appendFramed appends body framed for key to b.
func appendFramed(b, key, body []byte) []byte {
	start := len(b)
	b = append(b, 0)
	b = append(b, body...)
	b = append(b, 0, 0, 0, 0)
	sealValue(key, b[start:])
	return b
}

// write puts what the batch changed into b (which copies keys and values,
// so the scratch buffers are reused): the user rows that changed (set, even
// emptied), each changed message's counts, version and change index entry
// (the old one deleted), each changed conversation's version.
func (st *reactBatch) write(b *pebble.Batch) error {
	var num [8]byte
	for i := range st.userv {
		u := &st.userv[i]
		if !u.dirty || (len(u.emojis) == 0 && !u.onDisk) {
			continue
		}
		// Emptied, the row stays (empty), not deleted: a lookup that finds
		// a tombstone first goes on through every older version of the
		// key, which churn makes many.
		st.key = reactionKey(st.key[:0], u.k.conv, u.k.seq, u.k.user)
		st.val = appendUserReactions(st.val[:0], st.key, u.emojis)
		if err := b.Set(st.key, st.val, nil); err != nil {
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
			st.key = reactCountKey(st.key[:0], k.conv, k.seq, e.emoji)
			var err error
			if e.count > 0 {
				var buf [2 * binary.MaxVarintLen64]byte
				err = st.set(b, binary.AppendUvarint(binary.AppendUvarint(buf[:0], e.count), e.order))
			} else {
				err = b.Delete(st.key, nil)
			}
			if err != nil {
				return err
			}
		}
		binary.BigEndian.PutUint64(num[:], m.version)
		st.key = reactCountPrefix(st.key[:0], k.conv, k.seq)
		if err := st.set(b, num[:]); err != nil {
			return err
		}
		if m.diskVer > 0 {
			st.key = reactIdxKey(st.key[:0], k.conv, m.diskVer)
			if err := b.Delete(st.key, nil); err != nil {
				return err
			}
		}
		binary.BigEndian.PutUint64(num[:], k.seq)
		st.key = reactIdxKey(st.key[:0], k.conv, m.version)
		if err := st.set(b, num[:]); err != nil {
			return err
		}
	}
	for conv, c := range st.convs {
		if !c.changed {
			continue
		}
		binary.BigEndian.PutUint64(num[:], c.version)
		st.key = reactVerKey(st.key[:0], conv)
		if err := st.set(b, num[:]); err != nil {
			return err
		}
	}
	return nil
}

// set puts body framed under st.key into b.
func (st *reactBatch) set(b *pebble.Batch, body []byte) error {
	st.val = appendFramed(st.val[:0], st.key, body)
	return b.Set(st.key, st.val, nil)
}

// Reactions implements store.Store: per message, one seek to its counts
// and one point lookup of userID's own reactions, all from one snapshot
// (one iterator for the whole call).
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
	var key []byte
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
			key = reactionKey(key[:0], conversationID, seq, userID)
			_, err := userReactions(snap, key, func(emoji []byte) {
				for _, r := range set.Reactions {
					if r.Emoji == string(emoji) {
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
