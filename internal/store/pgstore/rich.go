package pgstore

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// indexRows collects the index rows of new messages, as arrays for the
// index statements: thread replies, counted replies (summaries and
// participants), mentions by name and of everyone. back is the message's
// as in insertMessages (its seq = the conversation's raised counter - back).
type indexRows struct {
	replyConv            []string
	replyBack, replyRoot []int64
	sumConv              []string
	sumBack, sumRoot     []int64
	sumAt                []int64
	partConv, partUser   []string
	partRoot             []int64
	mentionUser          []string
	mentionConv          []string
	mentionBack          []int64
	allConv, allSender   []string
	allBack              []int64
	fileID, fileConv     []string
	fileBack             []int64
}

func (x *indexRows) add(m *pb.Message, back int64) {
	conv := m.ConversationId
	if m.ThreadRoot != 0 {
		root := clampSeq(m.ThreadRoot)
		x.replyConv, x.replyBack, x.replyRoot = append(x.replyConv, conv), append(x.replyBack, back), append(x.replyRoot, root)
		if !m.SenderOnly {
			x.sumConv, x.sumBack, x.sumRoot, x.sumAt = append(x.sumConv, conv), append(x.sumBack, back), append(x.sumRoot, root), append(x.sumAt, m.ServerTime)
			if m.From != "" {
				x.partConv, x.partRoot, x.partUser = append(x.partConv, conv), append(x.partRoot, root), append(x.partUser, m.From)
			}
		}
	}
	for _, a := range m.Attachments {
		// A NUL cannot be stored in text (and names no file).
		if a.GetId() != "" && strings.IndexByte(a.Id, 0) < 0 {
			x.fileID, x.fileConv, x.fileBack = append(x.fileID, a.Id), append(x.fileConv, conv), append(x.fileBack, back)
		}
	}
	if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.SenderOnly {
		return
	}
	for _, u := range m.Mentions {
		// A name with NUL names no user (text cannot hold it) and would fail
		// the whole batch's insert.
		if u != m.From && strings.IndexByte(u, 0) < 0 {
			x.mentionUser, x.mentionConv, x.mentionBack = append(x.mentionUser, u), append(x.mentionConv, conv), append(x.mentionBack, back)
		}
	}
	if m.MentionAll {
		x.allConv, x.allBack, x.allSender = append(x.allConv, conv), append(x.allBack, back), append(x.allSender, m.From)
	}
}

// queue adds the statements for the rows collected to b, after the
// statement that raised the conversations' counters.
func (x *indexRows) queue(b *pgx.Batch, q *queries) {
	if len(x.replyConv) > 0 {
		b.Queue(q.insertThreadReplies, x.replyConv, x.replyBack, x.replyRoot)
	}
	if len(x.sumConv) > 0 {
		b.Queue(q.upsertThreads, x.sumConv, x.sumBack, x.sumRoot, x.sumAt)
	}
	if len(x.partConv) > 0 {
		b.Queue(q.insertParticipants, x.partConv, x.partRoot, x.partUser)
	}
	if len(x.mentionUser) > 0 {
		b.Queue(q.insertMentions, x.mentionUser, x.mentionConv, x.mentionBack)
	}
	if len(x.allConv) > 0 {
		b.Queue(q.insertMentionsAll, x.allConv, x.allBack, x.allSender)
	}
	if len(x.fileID) > 0 {
		b.Queue(retentionSQL(q.schema, sqlInsertMessageFiles), x.fileID, x.fileConv, x.fileBack)
	}
}

// Pins implements store.Store.
func (s *Store) Pins(ctx context.Context, conversationID string) ([]store.Pin, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.pool.Query(ctx, s.q.pins, conversationID)
	if err != nil {
		return nil, mapErr("pins", err)
	}
	var out []store.Pin
	var seq int64
	var by string
	var at pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&seq, &by, &at}, func() error {
		out = append(out, store.Pin{Seq: uint64(seq), By: by, At: fromTimestamp(at)})
		return nil
	})
	if err != nil {
		return nil, mapErr("pins", err)
	}
	return out, nil
}

// Threads implements store.Store.
func (s *Store) Threads(ctx context.Context, conversationID string, roots []uint64) (map[uint64]store.ThreadSummary, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make(map[uint64]store.ThreadSummary)
	keys := make([]int64, 0, len(roots))
	for _, r := range roots {
		if r <= math.MaxInt64 {
			keys = append(keys, int64(r))
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.q.threads, conversationID, keys)
	if err != nil {
		return nil, mapErr("threads", err)
	}
	var root, n, last, at int64
	_, err = pgx.ForEachRow(rows, []any{&root, &n, &last, &at}, func() error {
		out[uint64(root)] = store.ThreadSummary{ReplyCount: uint32(min(uint64(n), math.MaxUint32)), LastReplySeq: uint64(last), LastReplyAt: at}
		return nil
	})
	if err != nil {
		return nil, mapErr("threads", err)
	}
	return out, nil
}

// ThreadMessages implements store.Store.
func (s *Store) ThreadMessages(ctx context.Context, conversationID string, root, after uint64, limit int) ([]*pb.Message, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || after >= math.MaxInt64 || root > math.MaxInt64 {
		return nil, nil
	}
	return s.readThread(ctx, "thread messages", s.q.threadAfter, conversationID, int64(root), int64(after), limit)
}

// ThreadHistory implements store.Store.
func (s *Store) ThreadHistory(ctx context.Context, conversationID string, root, before uint64, limit int) ([]*pb.Message, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || root > math.MaxInt64 {
		return nil, nil
	}
	if before == 0 || before > math.MaxInt64 {
		before = math.MaxInt64
	}
	out, err := s.readThread(ctx, "thread history", s.q.threadBefore, conversationID, int64(root), int64(before), limit)
	slices.Reverse(out) // read newest first
	return out, err
}

func (s *Store) readThread(ctx context.Context, op, sql, conv string, root, bound int64, limit int) ([]*pb.Message, error) {
	rows, err := s.pool.Query(ctx, sql, conv, root, bound, limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	var out []*pb.Message
	var seq int64
	var body []byte
	var crc int32
	_, err = pgx.ForEachRow(rows, []any{&seq, &body, &crc}, func() error {
		m, err := s.decode(conv, seq, body, crc)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// InThread implements store.Store.
func (s *Store) InThread(ctx context.Context, conversationID string, root uint64, userID string) (bool, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	if root > math.MaxInt64 {
		return false, nil
	}
	return s.exists(ctx, "in thread", s.q.inThread, conversationID, int64(root), userID)
}

// Mentions implements store.Store: the user's own rows and the
// conversation's everyone rows (but the user's own messages), merged.
func (s *Store) Mentions(ctx context.Context, userID, conversationID string, after uint64, limit int) ([]uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || after >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.mentionsAfter, userID, conversationID, int64(after), limit)
	if err != nil {
		return nil, mapErr("mentions", err)
	}
	var out []uint64
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&seq}, func() error {
		out = append(out, uint64(seq))
		return nil
	})
	if err != nil {
		return nil, mapErr("mentions", err)
	}
	return out, nil
}

// Reactions implements store.Store: one statement (one snapshot) reads the
// messages' counts in order, their versions and the reader's own.
func (s *Store) Reactions(ctx context.Context, conversationID string, seqs []uint64, userID string) (map[uint64]store.ReactionSet, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make(map[uint64]store.ReactionSet)
	keys := make([]int64, 0, len(seqs))
	for _, seq := range seqs {
		if seq <= math.MaxInt64 {
			keys = append(keys, int64(seq))
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.q.reactions, conversationID, keys, userID)
	if err != nil {
		return nil, mapErr("reactions", err)
	}
	var seq, version, count, order int64
	var emoji string
	var me bool
	_, err = pgx.ForEachRow(rows, []any{&seq, &version, &emoji, &count, &order, &me}, func() error {
		set := out[uint64(seq)]
		set.Version = uint64(version)
		set.Reactions = append(set.Reactions, &pb.Reaction{Emoji: emoji, Count: uint32(min(uint64(count), math.MaxUint32)), Me: me})
		out[uint64(seq)] = set
		return nil
	})
	if err != nil {
		return nil, mapErr("reactions", err)
	}
	return out, nil
}

// ReactionChanges implements store.Store: a range of the change index
// (reaction_messages_version).
func (s *Store) ReactionChanges(ctx context.Context, conversationID string, after uint64, limit int) ([]store.ReactionChange, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || after >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.reactionChanges, conversationID, int64(after), limit)
	if err != nil {
		return nil, mapErr("reaction changes", err)
	}
	var out []store.ReactionChange
	var seq, version int64
	_, err = pgx.ForEachRow(rows, []any{&seq, &version}, func() error {
		out = append(out, store.ReactionChange{Seq: uint64(seq), Version: uint64(version)})
		return nil
	})
	if err != nil {
		return nil, mapErr("reaction changes", err)
	}
	return out, nil
}

// ReactionVersion implements store.Store.
func (s *Store) ReactionVersion(ctx context.Context, conversationID string) (uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var v int64
	err = s.pool.QueryRow(ctx, s.q.reactionVersion, conversationID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, mapErr("reaction version", err)
	}
	return uint64(v), nil
}
