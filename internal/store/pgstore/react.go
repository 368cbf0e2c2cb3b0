package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var errBadReaction = errors.New("pgstore: reaction without conversation, user or emoji, or with one that is not UTF-8 text")

// React implements store.Store as one transaction per batch, in three round
// trips on one connection:
//
//  1. begin, lock the batch's conversations' reaction_versions rows (in id
//     order), and read everything the ops need: which messages exist, their
//     counts and versions, and each op's user's reactions to its message;
//  2. with the ops applied in memory, in order, write what changed: the
//     reaction rows, counts, message versions and conversation versions;
//  3. commit.
//
// Versions are gap-free across nodes: a conversation's version row stays
// locked until the commit, so a concurrent batch on it (on any node) waits
// and then reads the committed value. A rolled-back batch takes its version
// increments with it.
func (s *Store) React(ctx context.Context, ops []store.ReactionOp) ([]store.ReactionResult, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	res := make([]store.ReactionResult, len(ops))
	if len(ops) == 0 {
		return res, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, mapErr("react", err)
	}
	defer conn.Release()
	err = s.retry(ctx, "react", func() error { return s.reactOnce(ctx, conn.Conn(), ops, res) })
	if err != nil {
		return nil, mapErr("react", err)
	}
	return res, nil
}

type msgKey struct {
	conv string
	seq  int64
}

type userKey struct {
	conv string
	seq  int64
	user string
}

type rowKey struct {
	conv        string
	seq         int64
	user, emoji string
}

// reactMsg is one message's reactions as the batch leaves them.
type reactMsg struct {
	exists  bool
	version int64 // as stored: 0 when it never had a reaction
	next    int64 // after the batch's ops so far
	changed bool
	// emojis, by order; an entry whose count fell to 0 stays (count 0)
	// until written, or moves last when re-added.
	emojis []reactEmoji
}

type reactEmoji struct {
	emoji        string
	count, order int64
	dirty        bool
}

type reactRow struct{ present, stored bool }

// reactState is what one attempt of React read and changed.
type reactState struct {
	versions map[string]int64 // conversation → version after the batch so far
	changed  map[string]bool  // conversations whose version moved
	msgs     map[msgKey]*reactMsg
	rows     map[rowKey]*reactRow
}

// reactOnce is one attempt of React; it fills res only when it succeeds.
func (s *Store) reactOnce(ctx context.Context, conn *pgx.Conn, ops []store.ReactionOp, res []store.ReactionResult) error {
	// What the ops name: conversations (sorted: the lock order), messages
	// and (message, user) pairs, each once.
	var convs []string
	var mConv, uConv, uUser []string
	var mSeq, uSeq []int64
	seenConv, seenMsg, seenUser := map[string]bool{}, map[msgKey]bool{}, map[userKey]bool{}
	for _, op := range ops {
		if !validOp(op) {
			continue
		}
		seq := int64(op.Seq)
		if !seenConv[op.ConversationID] {
			seenConv[op.ConversationID] = true
			convs = append(convs, op.ConversationID)
		}
		if k := (msgKey{op.ConversationID, seq}); !seenMsg[k] {
			seenMsg[k] = true
			mConv, mSeq = append(mConv, k.conv), append(mSeq, seq)
		}
		if k := (userKey{op.ConversationID, seq, op.UserID}); !seenUser[k] {
			seenUser[k] = true
			uConv, uSeq, uUser = append(uConv, k.conv), append(uSeq, seq), append(uUser, k.user)
		}
	}
	out := make([]store.ReactionResult, len(ops))
	if len(convs) == 0 { // no op can succeed: nothing to read or write
		for i, op := range ops {
			out[i].Err = opError(op)
		}
		copy(res, out)
		return nil
	}
	slices.Sort(convs)

	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(s.q.probeJoins)
	b.Queue(s.q.lockReactionVersions, convs)
	b.Queue(s.q.messagesExist, mConv, mSeq)
	b.Queue(s.q.readReactionCounts, mConv, mSeq)
	b.Queue(s.q.readReactionMessages, mConv, mSeq)
	b.Queue(s.q.readUserReactions, uConv, uSeq, uUser)
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	st := &reactState{versions: map[string]int64{}, changed: map[string]bool{}, msgs: map[msgKey]*reactMsg{}, rows: map[rowKey]*reactRow{}}
	_, err := br.Exec() // BEGIN
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		err = st.read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, m := range st.msgs {
		slices.SortFunc(m.emojis, func(a, b reactEmoji) int { return cmp.Compare(a.order, b.order) })
	}

	for i := range ops {
		out[i] = st.apply(&ops[i])
	}
	w := st.writes(&s.q)
	if w.Len() == 0 { // nothing changed: the deferred Rollback ends it
		copy(res, out)
		return nil
	}
	if err := tx.SendBatch(ctx, w).Close(); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	copy(res, out)
	return nil
}

func validOp(op store.ReactionOp) bool {
	return storable(op) && op.Seq != 0 && op.Seq <= math.MaxInt64
}

// storable reports whether op's strings are non-empty and fit text
// columns (UTF-8 without NUL): one that does not would fail the whole
// batch's statements, so it fails alone here.
func storable(op store.ReactionOp) bool {
	for _, v := range []string{op.ConversationID, op.UserID, op.Emoji} {
		if v == "" || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return false
		}
	}
	return true
}

// opError is the error of an op validOp refuses.
func opError(op store.ReactionOp) error {
	if !storable(op) {
		return errBadReaction
	}
	return store.ErrNotFound // seq 0 or beyond any seq
}

// read reads the first round trip's results (after the BEGIN) into st.
func (st *reactState) read(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var conv, user, emoji string
	var seq, v, count, order int64
	if _, err := pgx.ForEachRow(rows, []any{&conv, &v}, func() error { st.versions[conv] = v; return nil }); err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&conv, &seq}, func() error {
		st.msgs[msgKey{conv, seq}] = &reactMsg{exists: true}
		return nil
	})
	if err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&conv, &seq, &emoji, &count, &order}, func() error {
		if m := st.msgs[msgKey{conv, seq}]; m != nil {
			m.emojis = append(m.emojis, reactEmoji{emoji: emoji, count: count, order: order})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&conv, &seq, &v}, func() error {
		if m := st.msgs[msgKey{conv, seq}]; m != nil {
			m.version, m.next = v, v
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, []any{&conv, &seq, &user, &emoji}, func() error {
		st.rows[rowKey{conv, seq, user, emoji}] = &reactRow{present: true, stored: true}
		return nil
	})
	return err
}

// apply applies one op to the state read; every row it needs is there (a
// row not read is absent).
func (st *reactState) apply(op *store.ReactionOp) store.ReactionResult {
	if !validOp(*op) {
		return store.ReactionResult{Err: opError(*op)}
	}
	conv, seq := op.ConversationID, int64(op.Seq)
	m := st.msgs[msgKey{conv, seq}]
	if m == nil || !m.exists {
		return store.ReactionResult{Err: store.ErrNotFound}
	}
	rk := rowKey{conv, seq, op.UserID, op.Emoji}
	own := st.rows[rk]
	if own == nil {
		own = &reactRow{}
		st.rows[rk] = own
	}
	add := !op.Remove
	if own.present == add {
		return store.ReactionResult{Reactions: st.counts(m, conv, seq, op.UserID), Version: uint64(m.next)}
	}
	i := slices.IndexFunc(m.emojis, func(e reactEmoji) bool { return e.emoji == op.Emoji })
	next := st.versions[conv] + 1
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
		return store.ReactionResult{Err: fmt.Errorf("%w: pgstore: a reaction of %q/%d without a count", store.ErrCorrupt, conv, seq)}
	default:
		m.emojis[i].count--
		m.emojis[i].dirty = true
	}
	own.present = add
	st.versions[conv], st.changed[conv] = next, true
	m.next, m.changed = next, true
	return store.ReactionResult{Changed: true, Reactions: st.counts(m, conv, seq, op.UserID), Version: uint64(next)}
}

func (m *reactMsg) distinct() int {
	n := 0
	for _, e := range m.emojis {
		if e.count > 0 {
			n++
		}
	}
	return n
}

// counts returns m's counts, Me for user.
func (st *reactState) counts(m *reactMsg, conv string, seq int64, user string) []*pb.Reaction {
	var out []*pb.Reaction
	for _, e := range m.emojis {
		if e.count == 0 {
			continue
		}
		r := &pb.Reaction{Emoji: e.emoji, Count: uint32(min(uint64(e.count), math.MaxUint32))}
		if row := st.rows[rowKey{conv, seq, user, e.emoji}]; row != nil {
			r.Me = row.present
		}
		out = append(out, r)
	}
	return out
}

// writes returns the statements that store what the batch changed (none:
// nothing did).
func (st *reactState) writes(q *queries) *pgx.Batch {
	b := &pgx.Batch{}
	var addC, addU, addE, delC, delU, delE []string
	var addS, delS []int64
	for k, r := range st.rows {
		switch {
		case r.present && !r.stored:
			addC, addS, addU, addE = append(addC, k.conv), append(addS, k.seq), append(addU, k.user), append(addE, k.emoji)
		case !r.present && r.stored:
			delC, delS, delU, delE = append(delC, k.conv), append(delS, k.seq), append(delU, k.user), append(delE, k.emoji)
		}
	}
	if len(delC) > 0 {
		b.Queue(q.deleteReactions, delC, delS, delU, delE)
	}
	if len(addC) > 0 {
		b.Queue(q.insertReactions, addC, addS, addU, addE)
	}
	var cC, cE, zC, zE, vC []string
	var cS, cN, cO, zS, vS, vV []int64
	for k, m := range st.msgs {
		if !m.changed {
			continue
		}
		vC, vS, vV = append(vC, k.conv), append(vS, k.seq), append(vV, m.next)
		for _, e := range m.emojis {
			switch {
			case !e.dirty:
			case e.count > 0:
				cC, cS, cE, cN, cO = append(cC, k.conv), append(cS, k.seq), append(cE, e.emoji), append(cN, e.count), append(cO, e.order)
			default:
				zC, zS, zE = append(zC, k.conv), append(zS, k.seq), append(zE, e.emoji)
			}
		}
	}
	if len(zC) > 0 {
		b.Queue(q.deleteReactionCounts, zC, zS, zE)
	}
	if len(cC) > 0 {
		b.Queue(q.upsertReactionCounts, cC, cS, cE, cN, cO)
	}
	if len(vC) > 0 {
		b.Queue(q.upsertReactionMessages, vC, vS, vV)
	}
	var convs []string
	var versions []int64
	for conv := range st.changed {
		convs, versions = append(convs, conv), append(versions, st.versions[conv])
	}
	if len(convs) > 0 {
		b.Queue(q.setReactionVersions, convs, versions)
	}
	return b
}
