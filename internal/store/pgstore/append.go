package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Append implements store.Store in two round trips on one connection:
//
//  1. one query finds which (sender, client id) of the batch are stored;
//  2. one pipeline, run by PostgreSQL as one implicit transaction, raises
//     each conversation's counter by its number of new messages (locking the
//     counter rows in id order), inserts the messages with seqs derived from
//     the raised counters, and adds the conversation-list entries.
//
// Seqs are gap-free across nodes because they come from counter rows
// updated in the transaction that stores the messages: a rolled-back batch
// takes its counter increments with it, and a concurrent batch on the same
// conversation waits for the lock and continues from the committed value.
// De-dup across nodes rests on the unique index on (sender, client id): if
// another node stores the same id between our lookup and our insert, the
// insert fails, the whole transaction rolls back, and the retry's lookup
// answers Duplicate. A message with an empty ClientMsgId is never a duplicate.
func (s *Store) Append(ctx context.Context, msgs []*pb.Message) ([]store.AppendResult, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	for i, m := range msgs {
		if m == nil || m.ConversationId == "" {
			return nil, fmt.Errorf("pgstore: message %d: nil or without conversation id", i)
		}
	}
	res := make([]store.AppendResult, len(msgs))
	if len(msgs) == 0 {
		return res, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, mapErr("append", err)
	}
	defer conn.Release()
	err = s.retry(ctx, "append", func() error { return s.appendOnce(ctx, conn.Conn(), msgs, res) })
	if err != nil {
		return nil, mapErr("append", err)
	}
	return res, nil
}

type dedupKey struct{ from, clientID string }

// appendOnce is one attempt of Append; it fills res only when it succeeds.
func (s *Store) appendOnce(ctx context.Context, conn *pgx.Conn, msgs []*pb.Message, res []store.AppendResult) error {
	// The first message of the batch for each client id; later ones are
	// repeats answered with it.
	first := make(map[dedupKey]int, len(msgs))
	var senders, clientIDs []string
	for i, m := range msgs {
		if m.ClientMsgId == "" {
			continue
		}
		k := dedupKey{m.From, m.ClientMsgId}
		if _, ok := first[k]; !ok {
			first[k] = i
			senders, clientIDs = append(senders, m.From), append(clientIDs, m.ClientMsgId)
		}
	}
	stored, err := s.lookupDups(ctx, conn, senders, clientIDs)
	if err != nil {
		return err
	}

	// The new messages, and how many each conversation gets.
	var fresh []int
	perConv := make(map[string]int64)
	for i, m := range msgs {
		if m.ClientMsgId != "" {
			k := dedupKey{m.From, m.ClientMsgId}
			if _, ok := stored[k]; ok || first[k] != i {
				continue
			}
		}
		fresh = append(fresh, i)
		perConv[m.ConversationId]++
	}
	if len(fresh) == 0 {
		for i, m := range msgs {
			res[i] = store.AppendResult{Msg: stored[dedupKey{m.From, m.ClientMsgId}], Duplicate: true}
		}
		return nil
	}

	n := len(fresh)
	convs, backs, senders2, cmids := make([]string, n), make([]int64, n), make([]string, n), make([]string, n)
	bodies, crcs := make([][]byte, n), make([]int32, n)
	exps := make([]int64, n) // Message.ExpiresAt (retention.go)
	var sc searchCols
	remaining := make(map[string]int64, len(perConv))
	for c, k := range perConv {
		remaining[c] = k
	}
	lists := newListSet()
	var idx indexRows
	for j, i := range fresh {
		m := msgs[i]
		remaining[m.ConversationId]--
		convs[j], backs[j], senders2[j], cmids[j] = m.ConversationId, remaining[m.ConversationId], m.From, m.ClientMsgId
		exps[j] = m.ExpiresAt
		if bodies[j], crcs[j], err = s.encode(m); err != nil {
			return err
		}
		sc.add(searchRowOf(m))
		idx.add(m, backs[j])
		lists.add(m.From, m.ConversationId)
		if m.To != "" && m.To != m.From {
			lists.add(m.To, m.ConversationId)
		}
	}
	ids, counts := make([]string, 0, len(perConv)), make([]int64, 0, len(perConv))
	for c, k := range perConv {
		ids, counts = append(ids, c), append(counts, k)
	}

	s.dropKnownLists(lists)
	b := &pgx.Batch{}
	b.Queue(s.q.bumpSeqs, ids, counts)
	b.Queue(s.q.insertMessages, append(append([]any{convs, backs, senders2, cmids, bodies, crcs}, sc.args()...), exps)...)
	if users, sizes := usage(msgs, fresh); len(users) > 0 {
		b.Queue(s.q.addUsage, users, sizes)
	}
	if len(lists.users) > 0 {
		b.Queue(s.q.insertLists, lists.users, lists.convs)
	}
	idx.queue(b, &s.q)
	br := conn.SendBatch(ctx, b)
	last, err := readLastSeqs(br)
	for k := 1; k < b.Len() && err == nil; k++ {
		_, err = br.Exec()
	}
	// Close reads up to the pipeline's Sync, where the transaction commits:
	// its error is the commit's.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}

	s.addKnownLists(lists)
	for j, i := range fresh {
		m := msgs[i]
		m.Seq = uint64(last[m.ConversationId] - backs[j])
		res[i] = store.AppendResult{Msg: m}
	}
	for i, m := range msgs {
		if res[i].Msg != nil {
			continue
		}
		k := dedupKey{m.From, m.ClientMsgId}
		if sm, ok := stored[k]; ok {
			res[i] = store.AppendResult{Msg: sm, Duplicate: true}
		} else {
			res[i] = store.AppendResult{Msg: msgs[first[k]], Duplicate: true}
		}
	}
	return nil
}

// readLastSeqs reads bumpSeqs' result: conversation → its raised counter.
func readLastSeqs(br pgx.BatchResults) (map[string]int64, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	last := make(map[string]int64)
	var id string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
		last[id] = seq
		return nil
	})
	return last, err
}

// lookupDups returns the stored messages among the (sender, client id) pairs.
func (s *Store) lookupDups(ctx context.Context, conn *pgx.Conn, senders, clientIDs []string) (map[dedupKey]*pb.Message, error) {
	out := make(map[dedupKey]*pb.Message)
	if len(senders) == 0 {
		return out, nil
	}
	rows, err := conn.Query(ctx, s.q.lookupDups, senders, clientIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var k dedupKey
	var conv string
	var seq int64
	var body []byte
	var crc int32
	_, err = pgx.ForEachRow(rows, []any{&k.from, &k.clientID, &conv, &seq, &body, &crc}, func() error {
		m, err := s.decode(conv, seq, body, crc)
		if err != nil {
			return err
		}
		if m.From != k.from || m.ClientMsgId != k.clientID {
			return s.corrupt(conv, seq, errors.New("body does not match its de-dup key"))
		}
		out[k] = m
		return nil
	})
	return out, err
}

// listSet collects conversation-list entries, each once.
type listSet struct {
	seen         map[[2]string]struct{}
	users, convs []string
}

func newListSet() *listSet { return &listSet{seen: make(map[[2]string]struct{})} }

func (l *listSet) add(user, conv string) {
	k := [2]string{user, conv}
	if _, ok := l.seen[k]; ok {
		return
	}
	l.seen[k] = struct{}{}
	l.users, l.convs = append(l.users, user), append(l.convs, conv)
}

// dropKnownLists removes from l the entries known to be stored already.
func (s *Store) dropKnownLists(l *listSet) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	users, convs := l.users[:0], l.convs[:0]
	for i, u := range l.users {
		if _, ok := s.knownLists[[2]string{u, l.convs[i]}]; !ok {
			users, convs = append(users, u), append(convs, l.convs[i])
		}
	}
	l.users, l.convs = users, convs
}

// addKnownLists records l's entries as stored, once committed. The map is
// emptied when full: a forgotten entry costs one idempotent insert.
func (s *Store) addKnownLists(l *listSet) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if len(s.knownLists)+len(l.users) > knownListsMax {
		clear(s.knownLists)
	}
	for i, u := range l.users {
		s.knownLists[[2]string{u, l.convs[i]}] = struct{}{}
	}
}

// retry runs fn until it succeeds, fails for a reason a rerun cannot fix,
// or maxAttempts have lost races to other transactions.
func (s *Store) retry(ctx context.Context, op string, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt >= maxAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		s.log.Debug("pgstore: transaction rolled back; retrying", "op", op, "attempt", attempt, "err", err)
	}
}

// encode returns m's stored form: its protobuf encoding with Seq zero (the
// seq column is authoritative, and unknown until the batch's counters are
// raised) and the body's CRC-32C.
func (s *Store) encode(m *pb.Message) ([]byte, int32, error) {
	seq := m.Seq
	m.Seq = 0
	body, err := proto.Marshal(m)
	m.Seq = seq
	if err != nil {
		return nil, 0, permanentError{fmt.Errorf("pgstore: encoding message: %w", err)}
	}
	return body, int32(crc32.Checksum(body, s.crc)), nil
}

// decode verifies and decodes a stored message of conv at seq.
func (s *Store) decode(conv string, seq int64, body []byte, crc int32) (*pb.Message, error) {
	if crc32.Checksum(body, s.crc) != uint32(crc) {
		return nil, s.corrupt(conv, seq, errors.New("checksum mismatch"))
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, s.corrupt(conv, seq, err)
	}
	if m.ConversationId != conv || m.Seq != 0 {
		return nil, s.corrupt(conv, seq, fmt.Errorf("body is of %q seq %d", m.ConversationId, m.Seq))
	}
	m.Seq = uint64(seq)
	return m, nil
}

func (s *Store) corrupt(conv string, seq int64, err error) error {
	s.log.Error("pgstore: corrupt message", "conversation", conv, "seq", seq, "err", err)
	return fmt.Errorf("%w: message %q/%d: %v", store.ErrCorrupt, conv, seq, err)
}

// Apply implements store.Store: the event's de-dup lookup, then one
// transaction that raises the conversation's counter, updates the target
// message (ErrNotFound, and nothing written, when there is none), inserts
// the event, and writes the group, members and list entries.
func (s *Store) Apply(ctx context.Context, ch store.Change) (store.AppendResult, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return store.AppendResult{}, err
	}
	defer done()
	if err := validateChange(&ch); err != nil {
		return store.AppendResult{}, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return store.AppendResult{}, mapErr("apply", err)
	}
	defer conn.Release()
	var res store.AppendResult
	err = s.retry(ctx, "apply", func() (err error) {
		res, err = s.applyOnce(ctx, conn.Conn(), &ch)
		return err
	})
	if err != nil {
		return store.AppendResult{}, mapErr("apply", err)
	}
	return res, nil
}

func validateChange(ch *store.Change) error {
	ev := ch.Event
	if ev == nil || ev.ConversationId == "" {
		return errors.New("pgstore: Apply: event nil or without conversation id")
	}
	if ch.Group != nil && ch.Group.ConversationID != "" && ch.Group.ConversationID != ev.ConversationId {
		return fmt.Errorf("pgstore: Apply: group %q in an event of %q", ch.Group.ConversationID, ev.ConversationId)
	}
	for _, m := range ch.Members {
		if m.UserID == "" {
			return errors.New("pgstore: Apply: member without user id")
		}
	}
	if ch.Update != nil && ch.Update.ConversationId == "" {
		return errors.New("pgstore: Apply: update without conversation id")
	}
	return nil
}

func (s *Store) applyOnce(ctx context.Context, conn *pgx.Conn, ch *store.Change) (store.AppendResult, error) {
	ev := ch.Event
	conv := ev.ConversationId
	if ev.ClientMsgId != "" {
		stored, err := s.lookupDups(ctx, conn, []string{ev.From}, []string{ev.ClientMsgId})
		if err != nil {
			return store.AppendResult{}, err
		}
		if m := stored[dedupKey{ev.From, ev.ClientMsgId}]; m != nil {
			return store.AppendResult{Msg: m, Duplicate: true}, nil
		}
	}
	body, crc, err := s.encode(ev)
	if err != nil {
		return store.AppendResult{}, err
	}
	var upBody []byte
	var upCRC int32
	if u := ch.Update; u != nil {
		if u.Seq == 0 || u.Seq > math.MaxInt64 {
			return store.AppendResult{}, store.ErrNotFound
		}
		if upBody, upCRC, err = s.encode(u); err != nil {
			return store.AppendResult{}, err
		}
	}

	// Round trip 1: begin, raise the counter, update the target.
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(s.q.bumpSeqs, []string{conv}, []int64{1})
	if ch.Update != nil {
		r := searchRowOf(ch.Update)
		b.Queue(s.q.updateMessage, ch.Update.ConversationId, int64(ch.Update.Seq), upBody, upCRC,
			r.norm, r.time, r.ctype, r.att, r.senderOnly)
	}
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	_, err = br.Exec()
	var last map[string]int64
	if err == nil {
		last, err = readLastSeqs(br)
	}
	missing := false
	var oldBody []byte
	var oldCRC int32
	if err == nil && ch.Update != nil {
		err = br.QueryRow().Scan(&oldBody, &oldCRC)
		if errors.Is(err, pgx.ErrNoRows) {
			missing, err = true, nil
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return store.AppendResult{}, err
	}
	if missing {
		return store.AppendResult{}, store.ErrNotFound
	}
	var old *pb.Message
	if u := ch.Update; u != nil {
		if old, err = s.decode(u.ConversationId, int64(u.Seq), oldBody, oldCRC); err != nil {
			return store.AppendResult{}, err
		}
		if old.Recalled {
			return store.AppendResult{}, store.ErrConflict // rolled back by the deferred Rollback
		}
	}
	if ch.MLS != nil {
		if err := s.applyMLSStep(ctx, tx, conv, ch.MLS); err != nil {
			return store.AppendResult{}, err // rolled back by the deferred Rollback
		}
	}
	seq := last[conv]

	// Round trip 2: the event, lists, group and members; then commit.
	lists := newListSet()
	lists.add(ev.From, conv)
	if ev.To != "" && ev.To != ev.From {
		lists.add(ev.To, conv)
	}
	b = &pgx.Batch{}
	var sc searchCols
	sc.add(searchRowOf(ev))
	b.Queue(s.q.insertMessages, append(append([]any{[]string{conv}, []int64{0}, []string{ev.From}, []string{ev.ClientMsgId}, [][]byte{body}, []int32{crc}},
		sc.args()...), []int64{ev.ExpiresAt})...)
	if users, sizes := usage([]*pb.Message{ev}, []int{0}); len(users) > 0 {
		b.Queue(s.q.addUsage, users, sizes)
	}
	if g := ch.Group; g != nil {
		b.Queue(s.q.upsertGroup, conv, g.Name, g.AvatarURL, g.Announcement, g.Owner, g.OpenJoin, g.MuteAll, g.Dissolved, timestamp(g.CreatedAt),
			int32(g.AddPolicy), int32(g.HistoryVisibility), g.MembersMentionAll)
	}
	if len(ch.Members) > 0 {
		// The last record of a user wins, as if written in order (ON
		// CONFLICT cannot update one row twice in a statement).
		idx := make(map[string]int, len(ch.Members))
		var users []string
		var roles []int32
		var muted, joined []pgtype.Timestamptz
		var left []bool
		var leftSeqs, joinSeqs []int64
		for _, m := range ch.Members {
			if m.Left && m.LeftSeq == 0 {
				m.LeftSeq = uint64(seq)
			}
			if ch.Joined && !m.Left && m.JoinSeq == 0 {
				m.JoinSeq = uint64(seq)
			}
			j, ok := idx[m.UserID]
			if !ok {
				j = len(users)
				idx[m.UserID] = j
				users, roles, muted, joined = append(users, ""), append(roles, 0), append(muted, pgtype.Timestamptz{}), append(joined, pgtype.Timestamptz{})
				left, leftSeqs, joinSeqs = append(left, false), append(leftSeqs, 0), append(joinSeqs, 0)
			}
			users[j], roles[j], muted[j], joined[j] = m.UserID, int32(m.Role), timestamp(m.MutedUntil), timestamp(m.JoinedAt)
			left[j], leftSeqs[j], joinSeqs[j] = m.Left, int64(m.LeftSeq), int64(m.JoinSeq)
			lists.add(m.UserID, conv)
		}
		b.Queue(s.q.upsertMembers, conv, users, roles, muted, joined, left, leftSeqs, joinSeqs)
	}
	s.dropKnownLists(lists)
	if len(lists.users) > 0 {
		b.Queue(s.q.insertLists, lists.users, lists.convs)
	}
	var idx indexRows
	idx.add(ev, 0)
	idx.queue(b, &s.q)
	if u := ch.Update; u != nil && u.Recalled {
		// Out of Mentions: the rows were made from the stored message's names.
		if len(old.Mentions) > 0 {
			b.Queue(s.q.deleteMentions, old.Mentions, u.ConversationId, int64(u.Seq))
		}
		if old.MentionAll {
			b.Queue(s.q.deleteMentionsAll, u.ConversationId, int64(u.Seq))
		}
		if len(old.Attachments) > 0 { // a recalled message carries no file
			b.Queue(s.rsql(sqlDropFilesOf), []string{u.ConversationId}, []int64{int64(u.Seq)})
		}
	}
	if p := ch.Pin; p != nil {
		if p.Unpin {
			b.Queue(s.q.deletePin, conv, clampSeq(p.Seq))
		} else {
			b.Queue(s.q.upsertPin, conv, clampSeq(p.Seq), p.By, timestamp(p.At), seq)
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return store.AppendResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return store.AppendResult{}, err
	}
	s.addKnownLists(lists)
	ev.Seq = uint64(seq)
	return store.AppendResult{Msg: ev}, nil
}

// timestamp maps the zero time to NULL.
func timestamp(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// fromTimestamp maps NULL to the zero time; others are returned in UTC.
func fromTimestamp(v pgtype.Timestamptz) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return v.Time.UTC()
}

// usage sums the payload bytes of the messages msgs[fresh] by sender.
func usage(msgs []*pb.Message, fresh []int) ([]string, []int64) {
	sum := make(map[string]int64)
	for _, i := range fresh {
		if m := msgs[i]; m.From != "" && len(m.Payload) > 0 {
			sum[m.From] += int64(len(m.Payload))
		}
	}
	users, sizes := make([]string, 0, len(sum)), make([]int64, 0, len(sum))
	for u, n := range sum {
		users, sizes = append(users, u), append(sizes, n)
	}
	return users, sizes
}

// UserStorage implements store.Store.
func (s *Store) UserStorage(ctx context.Context, userID string) (uint64, error) {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	var n int64
	err = s.pool.QueryRow(ctx, s.q.userStorage, userID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, mapErr("user storage", err)
	}
	return uint64(n), nil
}
