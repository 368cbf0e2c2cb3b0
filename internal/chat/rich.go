package chat

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/rich"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Rich messages (docs/rich-messages.md): replies, mentions, threads and
// pins are fields and events of the conversation's sequence, stored and
// delivered like any message; reactions have their own per-conversation
// version and are batched to the store and coalesced on their way to the
// members (internal/rich); streamed messages live in a node's registry
// (internal/rich) until they are stored as one message.

// Limits of rich messages.
const (
	maxMentions = 50
	maxPins     = 50
	// mentionCountMax bounds the unread mentions counted per conversation.
	mentionCountMax = 1000
	// reactionBatchMax bounds the reactions stored in one write.
	reactionBatchMax = 1024
	// reactionFlushEvery is how often coalesced reaction counts go out:
	// a member gets at most this many updates a second per message.
	reactionFlushEvery = 50 * time.Millisecond
	// reactionPendingMax: past this many messages waiting, counts go out at once.
	reactionPendingMax = 16384
	// maxStreamsPerUser bounds one user's open streams on a node.
	maxStreamsPerUser = 100
	// streamMaxLife bounds a stream however often it is appended to.
	streamMaxLife = 10 * time.Minute
)

// checkRichSend checks the reply, thread and mention fields of a message uid
// sends to msg's conversation and sets them on msg, with the preview of
// the message it answers.
func (s *Service) checkRichSend(ctx context.Context, uid string, msg *pb.Message, replyTo, root uint64, mentions []string, all bool) error {
	if replyTo == 0 && root == 0 && len(mentions) == 0 && !all {
		return nil
	}
	if len(mentions) > maxMentions {
		return errTooLarge
	}
	conv := msg.ConversationId
	since, _, err := s.readRange(ctx, uid, conv)
	if err != nil {
		return err
	}
	var orig *pb.Message
	if replyTo != 0 {
		if orig, err = s.answerable(ctx, uid, conv, replyTo, since); err != nil {
			return err
		}
	}
	if root != 0 {
		r := orig
		if root != replyTo {
			if r, err = s.answerable(ctx, uid, conv, root, since); err != nil {
				return err
			}
		}
		if r.ThreadRoot != 0 {
			return errBadRequest // threads do not nest
		}
	}
	var g *groupState
	if isGroup(conv) {
		if g, err = s.group(ctx, conv); err != nil {
			return err
		}
	}
	if len(mentions) > 0 {
		ms := slices.Clone(mentions)
		slices.Sort(ms)
		ms = slices.Compact(ms)
		peer, _ := directPeer(conv, uid)
		for _, u := range ms {
			if !auth.ValidUserID(u) {
				return errBadRequest
			}
			if g != nil {
				if _, in := g.members[u]; !in {
					return errBadRequest
				}
			} else if u != uid && u != peer {
				return errBadRequest
			}
		}
		msg.Mentions = ms
	}
	if all {
		if g == nil {
			return errBadRequest
		}
		role, in := g.role(uid)
		if !in || (!isAdmin(role) && !g.info.MembersMentionAll) {
			return errDenied
		}
		msg.MentionAll = true
	}
	msg.ReplyTo, msg.ThreadRoot = replyTo, root
	if replyTo != 0 {
		// Not stored (it would go stale): commit takes it off before the
		// store and puts it back for delivery.
		msg.ReplyPreview = rich.Preview(replyTo, orig)
	}
	return nil
}

// answerable reads the message seq of conv that uid answers or threads
// under: a user's message uid may read.
func (s *Service) answerable(ctx context.Context, uid, conv string, seq, since uint64) (*pb.Message, error) {
	if seq <= since {
		return nil, errBadRequest
	}
	m, err := s.store.GetMessage(ctx, conv, seq)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errBadRequest
	}
	if err != nil {
		return nil, storeErr(err)
	}
	if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || (m.SenderOnly && m.From != uid) {
		return nil, errBadRequest
	}
	return m, nil
}

// decorate fills in what uid sees of each message of a page besides its
// stored form: the preview of what it answers, a thread root's summary and
// the reactions. since: uid reads only seqs after it.
func (s *Service) decorate(ctx context.Context, uid, conv string, since uint64, msgs []*pb.Message) error {
	var seqs, roots []uint64
	bySeq := make(map[uint64]*pb.Message, len(msgs))
	for _, m := range msgs {
		bySeq[m.Seq] = m
		if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled {
			continue
		}
		seqs = append(seqs, m.Seq)
		if m.ThreadRoot == 0 {
			roots = append(roots, m.Seq)
		}
	}
	if len(seqs) > 0 {
		sets, err := s.store.Reactions(ctx, conv, seqs, uid)
		if err != nil {
			return storeErr(err)
		}
		for seq, set := range sets {
			if m := bySeq[seq]; m != nil {
				m.Reactions, m.ReactionVersion = set.Reactions, set.Version
			}
		}
	}
	if len(roots) > 0 {
		ts, err := s.store.Threads(ctx, conv, roots)
		if err != nil {
			return storeErr(err)
		}
		for seq, t := range ts {
			if m := bySeq[seq]; m != nil {
				m.Thread = &pb.ThreadSummary{ReplyCount: t.ReplyCount, LastReplySeq: t.LastReplySeq, LastReplyAt: t.LastReplyAt}
			}
		}
	}
	for _, m := range msgs {
		if m.ReplyTo == 0 || m.Recalled {
			continue
		}
		orig, err := s.original(ctx, uid, conv, since, m.ReplyTo, bySeq)
		if err != nil {
			return err
		}
		m.ReplyPreview = rich.Preview(m.ReplyTo, orig)
	}
	return nil
}

// original is the message seq as uid may see it now, nil when they may not
// (before since, hidden for them, another's sender-only message, gone).
func (s *Service) original(ctx context.Context, uid, conv string, since, seq uint64, page map[uint64]*pb.Message) (*pb.Message, error) {
	if seq <= since {
		return nil, nil
	}
	if m, ok := page[seq]; ok {
		return m, nil // the page already left out what uid may not see
	}
	m, err := s.store.GetMessage(ctx, conv, seq)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err)
	}
	if m.SenderOnly && m.From != uid {
		return nil, nil
	}
	hidden, err := s.store.HiddenMessages(ctx, uid, conv, seq, seq)
	if err != nil {
		return nil, storeErr(err)
	}
	if len(hidden) > 0 {
		return nil, nil
	}
	return m, nil
}

// threadHistory pages through the replies of one thread, like History or
// SyncMessages.
func (s *Service) threadHistory(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.ThreadHistory) error {
	uid, conv, root := sess.UserID, r.ConversationId, r.RootSeq
	if root == 0 || (r.AfterSeq != 0 && r.BeforeSeq != 0) {
		return errBadRequest
	}
	since, upTo, err := s.readRange(ctx, uid, conv)
	if err != nil {
		return err
	}
	cleared, err := s.clearedSeq(ctx, uid, conv)
	if err != nil {
		return err
	}
	floor := max(cleared, since)
	if root <= since || (upTo > 0 && root > upTo) {
		return errDenied
	}
	m, err := s.store.GetMessage(ctx, conv, root)
	if errors.Is(err, store.ErrNotFound) || (err == nil && m.SenderOnly && m.From != uid) {
		return errDenied
	}
	if err != nil {
		return storeErr(err)
	}
	last, err := s.lastReadable(ctx, conv, upTo)
	if err != nil {
		return err
	}
	n := pageLimit(r.Limit)
	forward := r.AfterSeq != 0
	before := r.BeforeSeq
	if !forward && upTo > 0 && (before == 0 || before > upTo+1) {
		before = upTo + 1
	}
	release, err := s.ReserveRead(ctx, s.readWeight(n))
	if err != nil {
		return err
	}
	defer release()
	msgs, more, err := s.readPage(ctx, pageSpec{
		conv: conv, forward: forward, after: max(r.AfterSeq, floor), upTo: upTo, before: before, floor: floor, n: n,
		fetch: func(after, before uint64, k int) ([]*pb.Message, error) {
			if forward {
				return s.store.ThreadMessages(ctx, conv, root, after, k)
			}
			return s.store.ThreadHistory(ctx, conv, root, before, k)
		},
		visible: s.pageView(ctx, uid, conv, floor),
	})
	if err != nil {
		return err
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Messages{Messages: &pb.MessagePage{
		ConversationId: conv, Messages: msgs, HasMore: more, LastSeq: last}}})
	return nil
}

// pageView is a page's visible step: hidden messages left out, the shadow
// mute applied, the rest decorated for uid.
func (s *Service) pageView(ctx context.Context, uid, conv string, floor uint64) func([]*pb.Message) ([]*pb.Message, error) {
	return func(raw []*pb.Message) ([]*pb.Message, error) {
		msgs, err := s.dropHidden(ctx, uid, conv, raw)
		if err != nil {
			return nil, err
		}
		msgs = viewFor(uid, msgs)
		for _, m := range msgs {
			m.SearchText = "" // the server's to search, never sent to clients
		}
		return msgs, s.decorate(ctx, uid, conv, floor, msgs)
	}
}

// pin pins or unpins a message: a group's owner and admins, either side of
// a 1:1. The PINNED or UNPINNED event and the pin list's change are stored
// in one change, checked by the committer against the pins as they are.
func (s *Service) pin(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Pin) error {
	uid, conv := sess.UserID, r.ConversationId
	if r.Seq == 0 || len(r.ClientMsgId) > maxClientMsgID {
		return errBadRequest
	}
	g, peer, err := s.changeTarget(ctx, uid, conv)
	if err != nil {
		return err
	}
	if g != nil {
		if r.Seq <= g.readsAfter(g.members[uid]) {
			return errDenied
		}
		if role, _ := g.role(uid); !isAdmin(role) {
			return errDenied
		}
	}
	kind := pb.MessageKind_MESSAGE_KIND_PINNED
	if r.Unpin {
		kind = pb.MessageKind_MESSAGE_KIND_UNPINNED
	}
	ev := &pb.Message{ConversationId: conv, From: uid, To: peer, ClientMsgId: r.ClientMsgId,
		Kind: kind, Event: &pb.MessageEvent{TargetSeq: r.Seq}}
	p := s.changeWrite(c, sess, id, ev, func(m *pb.Message) error {
		if m.SenderOnly && m.From != uid {
			return errDenied
		}
		if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || (m.Recalled && !r.Unpin) {
			return errConflict
		}
		pins, err := s.store.Pins(s.life, conv)
		if err != nil {
			return storeErr(err)
		}
		pinned := slices.ContainsFunc(pins, func(p store.Pin) bool { return p.Seq == r.Seq })
		switch {
		case pinned != r.Unpin:
			return errConflict
		case !r.Unpin && len(pins) >= maxPins:
			return errTooLarge
		}
		return nil
	})
	p.change.Pin = &store.PinChange{Seq: r.Seq, Unpin: r.Unpin, By: uid, At: time.Now()}
	return s.submitChange(ctx, p)
}

// pinList is a conversation's pins uid may see (since, upTo as readRange).
func (s *Service) pinList(ctx context.Context, conv string, since, upTo uint64) ([]*pb.PinnedMessage, error) {
	pins, err := s.store.Pins(ctx, conv)
	if err != nil {
		return nil, storeErr(err)
	}
	var out []*pb.PinnedMessage
	for _, p := range pins {
		if p.Seq > since && (upTo == 0 || p.Seq <= upTo) {
			out = append(out, &pb.PinnedMessage{Seq: p.Seq, PinnedBy: p.By, PinnedAt: p.At.UnixMilli()})
		}
	}
	return out, nil
}

// unreadMentions counts the messages of conv after read, up to last, that
// mention uid (by name or everyone).
func (s *Service) unreadMentions(ctx context.Context, uid, conv string, read, last uint64) (uint32, error) {
	seqs, err := s.store.Mentions(ctx, uid, conv, read, mentionCountMax)
	if err != nil {
		return 0, storeErr(err)
	}
	n := 0
	for n < len(seqs) && seqs[n] <= last {
		n++
	}
	return uint32(n), nil
}

// mentions reports whether h mentions uid.
func mentions(h store.MessageHead, uid string) bool {
	return h.MentionAll || slices.Contains(h.Mentions, uid)
}

// TakesPart reports whether uid takes part in root's thread of conv (see
// takesPart).
func (s *Service) TakesPart(ctx context.Context, uid, conv string, root uint64) bool {
	return s.takesPart(ctx, uid, conv, root, map[uint64]bool{})
}

// takesPart reports whether uid takes part in root's thread (wrote the root
// or a reply); memo keeps the answers of one count. A failed read counts
// as taking part: a badge too high is better than a message missed.
func (s *Service) takesPart(ctx context.Context, uid, conv string, root uint64, memo map[uint64]bool) bool {
	if v, ok := memo[root]; ok {
		return v
	}
	in, err := s.store.InThread(ctx, conv, root, uid)
	if err == nil && !in {
		m, gerr := s.store.GetMessage(ctx, conv, root)
		in = gerr != nil && !errors.Is(gerr, store.ErrNotFound) || gerr == nil && m.From == uid
	}
	in = in || err != nil
	memo[root] = in
	return in
}

// Reactions

// reactReq is one reaction waiting for the reaction writer.
type reactReq struct {
	op     store.ReactionOp
	conn   Replier
	sessID string
	reqID  uint64
	// private: only the reactor is told (a shadow-muted sender's message).
	private bool
}

// react adds or removes a reaction. Checked here, stored by reactLoop in
// batches, answered and announced from there.
func (s *Service) react(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.React) error {
	uid, conv := sess.UserID, r.ConversationId
	if r.Seq == 0 || !rich.ValidEmoji(r.Emoji) {
		return errBadRequest
	}
	g, peer, err := s.changeTarget(ctx, uid, conv)
	if err != nil {
		return err
	}
	if g != nil && r.Seq <= g.readsAfter(g.members[uid]) {
		return errDenied
	}
	if g == nil && peer != uid {
		if err := s.mayMessage(ctx, uid, peer); err != nil {
			return err
		}
	}
	m, err := s.store.GetMessage(ctx, conv, r.Seq)
	if errors.Is(err, store.ErrNotFound) || (err == nil && m.SenderOnly && m.From != uid) {
		return errDenied
	}
	if err != nil {
		return storeErr(err)
	}
	if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled {
		return errConflict
	}
	req := &reactReq{conn: c, sessID: sess.ID, reqID: id, private: m.SenderOnly || sess.ShadowMuted,
		op: store.ReactionOp{ConversationID: conv, Seq: r.Seq, UserID: uid, Emoji: r.Emoji, Remove: r.Remove,
			MaxDistinct: rich.MaxDistinctReactions}}
	if s.router.Ready() != nil {
		return errUnavail
	}
	select {
	case s.reacts <- req:
		return nil
	case <-ctx.Done():
		return errUnavail
	case <-s.stop:
		return errUnavail
	}
}

// reactBatch is a stored (or failed) batch of reactions on its way to
// reactAnswerLoop.
type reactBatch struct {
	reqs []*reactReq
	res  []store.ReactionResult
	err  error
}

// reactLoop stores reactions in batches (one durable write each) and hands
// them to reactAnswerLoop, which answers them while the next batch is
// stored; the counts go to the members through the coalescer.
func (s *Service) reactLoop() {
	defer s.wg.Done()
	defer close(s.reactsDone)
	ops := make([]store.ReactionOp, 0, reactionBatchMax)
	for {
		var first *reactReq
		select {
		case first = <-s.reacts:
		case <-s.stop:
			select {
			case first = <-s.reacts:
			default:
				return
			}
		}
		batch := make([]*reactReq, 1, reactionBatchMax)
		batch[0] = first
	drain:
		for len(batch) < reactionBatchMax {
			select {
			case r := <-s.reacts:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		ops = ops[:0]
		for _, r := range batch {
			ops = append(ops, r.op)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
		res, err := s.store.React(ctx, ops)
		cancel()
		s.reactsDone <- reactBatch{reqs: batch, res: res, err: err}
	}
}

// reactAnswerLoop answers stored batches of reactions, in order.
func (s *Service) reactAnswerLoop() {
	defer s.wg.Done()
	for b := range s.reactsDone {
		s.reacted(b.reqs, b.res, b.err)
	}
}

// reacted answers a stored (or failed) batch of reactions.
func (s *Service) reacted(batch []*reactReq, res []store.ReactionResult, err error) {
	hold := &wire.Hold{}
	defer hold.Release()
	for i, r := range batch {
		if err != nil {
			if !errors.Is(err, store.ErrNoSpace) {
				s.log.Warn("store failed; reaction answered UNAVAILABLE", "err", err)
			}
			r.conn.SendFrame(errorFrame(r.reqID, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
			continue
		}
		rr := res[i]
		switch {
		case errors.Is(rr.Err, store.ErrNotFound):
			r.conn.SendFrame(errorFrame(r.reqID, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED))
			continue
		case errors.Is(rr.Err, store.ErrTooMany):
			r.conn.SendFrame(errorFrame(r.reqID, pb.ErrorCode_ERROR_CODE_TOO_LARGE))
			continue
		case rr.Err != nil:
			r.conn.SendFrame(errorFrame(r.reqID, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
			continue
		}
		s.stats.reactions.Add(1)
		mine := &pb.ReactionUpdate{ConversationId: r.op.ConversationID, Seq: r.op.Seq,
			Reactions: rr.Reactions, Version: rr.Version, Personal: true}
		if r.reqID != 0 {
			r.conn.SendFrame(&pb.ServerFrame{Id: r.reqID, Body: &pb.ServerFrame_Reaction{Reaction: mine}})
		}
		if !rr.Changed {
			continue
		}
		out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Reaction{Reaction: mine}})
		if err := s.router.DeliverToUsers(s.life, []string{r.op.UserID}, out, r.sessID, hold); err != nil {
			s.deliveryFailed("reaction", err)
		}
		if r.private {
			continue
		}
		counts := make([]*pb.Reaction, len(rr.Reactions))
		for j, x := range rr.Reactions {
			counts[j] = &pb.Reaction{Emoji: x.Emoji, Count: x.Count}
		}
		s.coalescer.Add(&pb.ReactionUpdate{ConversationId: r.op.ConversationID, Seq: r.op.Seq,
			Reactions: counts, Version: rr.Version})
	}
}

// announceReactions sends coalesced counts to the members' online devices.
func (s *Service) announceReactions(us []*pb.ReactionUpdate) {
	hold := &wire.Hold{}
	defer hold.Release()
	for _, u := range us {
		out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Reaction{Reaction: u}})
		if err := s.deliverToConversation(s.life, u.ConversationId, out, "", hold); err != nil {
			s.deliveryFailed("reaction", err)
		}
	}
}

// deliverToConversation sends a frame that is not stored to every online
// device of the conversation's members (except one session).
func (s *Service) deliverToConversation(ctx context.Context, conv string, out *wire.Outbound, exceptSession string, hold *wire.Hold) error {
	if isGroup(conv) {
		local, joined := s.groupDelivery(conv)
		return s.router.DeliverGroup(ctx, conv, local, joined, out, exceptSession, hold)
	}
	a, b, ok := parseDirect(conv)
	if !ok {
		return nil
	}
	users := []string{a, b}
	if a == b {
		users = users[:1]
	}
	return s.router.DeliverToUsers(ctx, users, out, exceptSession, hold)
}

// syncReactions pages through the reaction changes of a conversation.
func (s *Service) syncReactions(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.SyncReactions) error {
	uid, conv := sess.UserID, r.ConversationId
	since, upTo, err := s.readRange(ctx, uid, conv)
	if err != nil {
		return err
	}
	version, err := s.store.ReactionVersion(ctx, conv)
	if err != nil {
		return storeErr(err)
	}
	// Changes of messages outside what uid may read are skipped, reading
	// on (at most maxHiddenSkips pages' worth), so a page is empty only at
	// the end: a client pages on from the last update's version.
	n := pageLimit(r.Limit)
	page := &pb.ReactionPage{ConversationId: conv, Version: version}
	var changes []store.ReactionChange
	var seqs []uint64
	after := r.AfterVersion
	for scanned := 0; len(changes) < n && scanned < n*maxHiddenSkips; {
		chunk, err := s.store.ReactionChanges(ctx, conv, after, n+1)
		if err != nil {
			return storeErr(err)
		}
		page.HasMore = len(chunk) > n
		for _, ch := range chunk[:min(len(chunk), n)] {
			if len(changes) == n {
				page.HasMore = true
				break
			}
			after, scanned = ch.Version, scanned+1
			if ch.Seq > since && (upTo == 0 || ch.Seq <= upTo) {
				changes, seqs = append(changes, ch), append(seqs, ch.Seq)
			}
		}
		if !page.HasMore {
			break
		}
	}
	sets, err := s.store.Reactions(ctx, conv, seqs, uid)
	if err != nil {
		return storeErr(err)
	}
	for _, ch := range changes {
		set := sets[ch.Seq]
		page.Updates = append(page.Updates, &pb.ReactionUpdate{ConversationId: conv, Seq: ch.Seq,
			Reactions: set.Reactions, Version: max(set.Version, ch.Version), Personal: true})
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Reactions{Reactions: page}})
	return nil
}

// Streams

// streamOpen starts a streamed message of a bot user. The message is
// checked as a send would be (target, reply, mentions) when it opens.
func (s *Service) streamOpen(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.StreamOpen) error {
	u, err := s.store.GetUser(ctx, sess.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !u.Bot) {
		return errDenied
	}
	if err != nil {
		return storeErr(err)
	}
	ct := r.ContentType
	if ct == "" {
		ct = "text/plain"
	}
	msg, err := s.buildMessage(ctx, sess.UserID, &pb.Send{ClientMsgId: r.ClientMsgId, To: r.To,
		ConversationId: r.ConversationId, ContentType: ct, ReplyTo: r.ReplyTo, ThreadRoot: r.ThreadRoot,
		Mentions: r.Mentions, MentionAll: r.MentionAll})
	if err != nil {
		return err
	}
	msg.SenderOnly = sess.ShadowMuted
	st, err := s.streams.Open(s.nodeID+"-", sess.UserID, msg, time.Now())
	if errors.Is(err, rich.ErrTooManyStreams) {
		return errTooMany
	}
	if err != nil {
		return errInternal
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_StreamOpened{StreamOpened: &pb.StreamOpened{
		StreamId: st.ID, ConversationId: msg.ConversationId}}})
	return nil
}

// streamAppend adds text to the caller's stream and shows it to the
// members online (not stored).
func (s *Service) streamAppend(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.StreamAppend) error {
	st, off, err := s.streams.Append(sess.UserID, r.StreamId, r.Text, time.Now())
	switch {
	case errors.Is(err, rich.ErrNoStream):
		return errBadRequest
	case errors.Is(err, rich.ErrStreamFull):
		return errTooLarge
	case err != nil:
		return errInternal
	}
	if r.Text != "" {
		m := st.Msg
		out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_StreamChunk{StreamChunk: &pb.StreamChunk{
			StreamId: st.ID, ConversationId: m.ConversationId, From: m.From, Offset: uint32(off), Text: r.Text,
			ContentType: m.ContentType, ReplyTo: m.ReplyTo, ThreadRoot: m.ThreadRoot}}})
		// The bot is answered first: its next chunk need not wait for
		// this one's fan-out.
		s.replyOK(c, id)
		if m.SenderOnly {
			err = s.router.DeliverToUsers(ctx, []string{m.From}, out, sess.ID, nil)
		} else {
			err = s.deliverToConversation(ctx, m.ConversationId, out, sess.ID, nil)
		}
		if err != nil {
			s.deliveryFailed("stream", err)
		}
		return nil
	}
	s.replyOK(c, id)
	return nil
}

// streamFinish stores the caller's stream as one message.
func (s *Service) streamFinish(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.StreamFinish) error {
	st, err := s.streams.Finish(sess.UserID, r.StreamId)
	if err != nil {
		return errBadRequest
	}
	return s.storeStream(ctx, c, sess, id, st, r.Abandon)
}

// storeStream stores a stream's text as its message, through moderation
// and the committer like a send; the reply (to c) is its send_ack.
func (s *Service) storeStream(ctx context.Context, c Replier, sess *session.Session, id uint64, st *rich.Stream, incomplete bool) error {
	m := st.Msg
	m.Payload, m.Incomplete = st.Text(), incomplete
	if err := s.checkQuota(ctx, m.From, len(m.Payload)); err != nil {
		return err
	}
	p := &pendingSend{conn: c, sessID: sess.ID, reqID: id, msg: m, start: time.Now().UnixNano()}
	if s.cfg.Moderator != nil {
		return s.moderateSend(ctx, sess, p)
	}
	if !s.submit(ctx, p) {
		return errUnavail
	}
	return nil
}

// streamExpired stores a stream its sender stopped appending to, marked
// incomplete. Nobody waits for the answer.
func (s *Service) streamExpired(st *rich.Stream) {
	sess := &session.Session{ID: s.nodeID + "-stream-" + st.ID, UserID: st.Owner}
	if err := s.storeStream(s.life, discardReplier{}, sess, 0, st, true); err != nil {
		s.log.Warn("an expired stream was not stored", "stream", st.ID, "user", st.Owner, "err", err)
	}
}

// discardReplier drops the answers to writes nobody waits for.
type discardReplier struct{}

func (discardReplier) SendFrame(*pb.ServerFrame) bool { return true }
