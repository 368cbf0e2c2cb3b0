package chat

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Limits on the requests of this file.
const (
	maxHideSeqs      = 1000 // seqs in one DeleteForMe
	maxReadCountSeqs = 100  // seqs in one ReadCounts
	// changeLockWait bounds how long a settings change or a login waits
	// for another one of the same key (keyLocks).
	changeLockWait = 5 * time.Second
)

// keyLocks serializes read-modify-write sequences per key that run on one
// goroutine from the read to the write: a user's conversation settings
// (settingsLockKey: a pin and a clear must not overwrite each other) and a
// user's logins while MaxUserSessions is counted (admitLockKey). A waiter
// gives up after a bound, which a sync.Mutex cannot do, hence a channel per
// held key.
//
// Changes of messages (recall, edit) need no lock: the committer reads and
// checks the message right before storing the change (see commitChange), so
// two changes of one message are serialized by the committer itself.
//
// The table lives in the Service (Service.changeLocks); an entry exists only
// while held. The lock is per node.
type keyLocks struct {
	mu sync.Mutex
	m  map[any]chan struct{} // closed when released
}

type settingsLockKey struct {
	uid, conv string
}

// lock waits until k is free and takes it; false when wait passed first.
func (l *keyLocks) lock(k any, wait time.Duration) bool {
	var timeout <-chan time.Time
	for {
		l.mu.Lock()
		held, busy := l.m[k]
		if !busy {
			l.m[k] = make(chan struct{})
			l.mu.Unlock()
			return true
		}
		l.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-held:
		case <-timeout:
			return false
		}
	}
}

func (l *keyLocks) unlock(k any) {
	l.mu.Lock()
	held := l.m[k]
	delete(l.m, k)
	l.mu.Unlock()
	close(held)
}

// changeTarget checks that uid may change messages of conv (recall, edit):
// a 1:1 conversation they are in, or a group of which they are a current
// member and that is not dissolved. It returns the group's state for a
// group, and the peer for a 1:1 conversation. Anything else is errDenied,
// whether or not the conversation exists.
func (s *Service) changeTarget(ctx context.Context, uid, conv string) (*groupState, string, error) {
	if isGroup(conv) {
		g, _, err := s.loadForChange(ctx, uid, conv)
		return g, "", err
	}
	peer, ok := directPeer(conv, uid)
	if !ok {
		return nil, "", errDenied
	}
	return nil, peer, nil
}

// targetMessage reads the message a change refers to, as a copy the caller
// may modify. A missing message is errDenied (as for an unreadable one).
// The committer calls it right before storing the change.
func (s *Service) targetMessage(ctx context.Context, conv string, seq uint64) (*pb.Message, error) {
	m, err := s.store.GetMessage(ctx, conv, seq)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errDenied
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return proto.Clone(m).(*pb.Message), nil
}

// mayRecallAny reports whether uid may recall sender's messages in group g
// at any time: the owner anyone's, an admin their own and plain members'
// (and those of users no longer in the group).
func mayRecallAny(g *groupState, uid, sender string) bool {
	if g == nil {
		return false
	}
	role, ok := g.role(uid)
	if !ok {
		return false
	}
	switch role {
	case pb.GroupRole_GROUP_ROLE_OWNER:
		return true
	case pb.GroupRole_GROUP_ROLE_ADMIN:
		senderRole, in := g.role(sender)
		return sender == uid || !in || senderRole == pb.GroupRole_GROUP_ROLE_MEMBER
	}
	return false
}

// recall withdraws a message: its sender within the recall window, a group's
// owner or admin at any time (see mayRecallAny). The RECALL event and the
// message without its payload are stored in one change, in seq order with
// the conversation's messages; the reply is the event's send_ack and every
// member's devices (the caller's other devices too) get the event.
//
// A recall of a message that is already recalled is ERROR_CODE_CONFLICT —
// also for a retry of a recall that was stored: the message is recalled,
// which is what the retry wanted.
func (s *Service) recall(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Recall) error {
	uid, conv := sess.UserID, r.ConversationId
	if r.Seq == 0 || len(r.ClientMsgId) > maxClientMsgID {
		return errBadRequest
	}
	g, peer, err := s.changeTarget(ctx, uid, conv)
	if err != nil {
		return err
	}
	if g != nil && r.Seq <= g.readsAfter(g.members[uid]) {
		return errDenied // not a message uid may read
	}
	ev := &pb.Message{ConversationId: conv, From: uid, To: peer, ClientMsgId: r.ClientMsgId,
		Kind: pb.MessageKind_MESSAGE_KIND_RECALL, Event: &pb.MessageEvent{TargetSeq: r.Seq}}
	return s.commitChange(ctx, c, sess, id, ev, func(m *pb.Message) error {
		if m.SenderOnly && m.From != uid {
			return errDenied // nobody but its sender knows of it
		}
		if err := s.checkRecall(g, uid, m); err != nil {
			return err
		}
		ev.SenderOnly = m.SenderOnly // the recall of a sender-only message is one too
		// Its files go with it: FileUrl refuses a recalled message's.
		m.Recalled, m.Payload, m.ContentType, m.Attachments = true, nil, "", nil
		return nil
	})
}

// checkRecall says whether uid may recall m (as stored now).
func (s *Service) checkRecall(g *groupState, uid string, m *pb.Message) error {
	privileged := mayRecallAny(g, uid, m.From)
	switch {
	case m.From != uid && !privileged:
		return errDenied
	case m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled:
		return errConflict
	case !privileged && time.Now().UnixMilli()-m.ServerTime > s.cfg.RecallWindow.Milliseconds():
		return errWindow
	}
	return nil
}

// edit replaces the content of the caller's own message. The EDIT event
// (carrying the new content) and the updated message are stored in one
// change; the reply is the event's send_ack and the conversation's devices
// get the event. Editing is sending: a muted group member or a blocked 1:1
// sender is refused as a send would be.
func (s *Service) edit(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Edit) error {
	uid, conv := sess.UserID, r.ConversationId
	if r.Seq == 0 || len(r.ClientMsgId) > maxClientMsgID {
		return errBadRequest
	}
	if len(r.ContentType) > maxContentType || len(r.Payload) > int(s.cfg.MaxFrameBytes) {
		return errTooLarge
	}
	if err := checkSearchText(r.SearchText); err != nil {
		return err
	}
	g, peer, err := s.changeTarget(ctx, uid, conv)
	if err != nil {
		return err
	}
	if g != nil && r.Seq <= g.readsAfter(g.members[uid]) {
		return errDenied // not a message uid may read
	}
	if g != nil {
		err = s.maySendToGroup(ctx, uid, conv)
	} else {
		err = s.mayMessage(ctx, uid, peer)
	}
	if err != nil {
		return err
	}
	ev := &pb.Message{ConversationId: conv, From: uid, To: peer, ClientMsgId: r.ClientMsgId,
		ContentType: r.ContentType, Payload: r.Payload, SearchText: r.SearchText,
		Kind: pb.MessageKind_MESSAGE_KIND_EDIT, Event: &pb.MessageEvent{TargetSeq: r.Seq}}
	p := s.changeWrite(c, sess, id, ev, func(m *pb.Message) error {
		switch {
		case m.From != uid:
			return errDenied
		case m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled:
			return errConflict
		case sess.ShadowMuted && !m.SenderOnly:
			// Its new content would reach everyone who has the message.
			return errConflict
		}
		ev.SenderOnly = m.SenderOnly
		// ev's content: the word filter or a hook may have replaced the client's.
		m.ContentType, m.Payload, m.EditedAt = ev.ContentType, ev.Payload, time.Now().UnixMilli()
		m.SearchText = ev.SearchText
		return nil
	})
	if s.cfg.Moderator != nil {
		return s.moderateEdit(ctx, sess, p, ev)
	}
	return s.submitChange(ctx, p)
}

// commitChange stores a change of one message (recall, edit) with its event
// ev through the committer, then replies send_ack and delivers the event to
// the conversation (except the calling session). The committer reads the
// target message (ev's conversation, ev.Event.TargetSeq) right before
// storing, after every write queued before this one, and hands a copy to
// check, which refuses the change (an *Error answered to the client) or
// turns the copy into the updated message. As the committer stores one
// write at a time, a change is checked against every change of the message
// stored before it on this node: a recall and an edit racing each other
// cannot both pass their checks. Another node's committer may store a
// recall between this read and the write; store.Apply refuses to update a
// recalled message (ErrConflict, answered CONFLICT), so the recall stands.
func (s *Service) commitChange(ctx context.Context, c Replier, sess *session.Session, reqID uint64, ev *pb.Message, check func(*pb.Message) error) error {
	return s.submitChange(ctx, s.changeWrite(c, sess, reqID, ev, check))
}

// submitChange queues a change made by changeWrite.
func (s *Service) submitChange(ctx context.Context, p *pendingSend) error {
	if !s.submit(ctx, p) {
		return errUnavail
	}
	return nil
}

// changeWrite is commitChange's write, not yet queued.
func (s *Service) changeWrite(c Replier, sess *session.Session, reqID uint64, ev *pb.Message, check func(*pb.Message) error) *pendingSend {
	if ev.ClientMsgId == "" {
		ev.ClientMsgId = "evt-" + randomID()
	}
	p := &pendingSend{conn: c, sessID: sess.ID, reqID: reqID, change: &store.Change{Event: ev}, check: check}
	p.after = func(r store.AppendResult, err error) {
		if err != nil {
			var ce *Error
			code := pb.ErrorCode_ERROR_CODE_UNAVAILABLE
			switch {
			case errors.As(err, &ce): // refused by check, or the read before it failed
				code = ce.Code
			case errors.Is(err, store.ErrNotFound):
				code = pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED
			default:
				s.log.Warn("store failed; change answered UNAVAILABLE", "err", err)
			}
			c.SendFrame(errorFrame(reqID, code))
			return
		}
		c.SendFrame(sendAckFrame(reqID, r))
		if !r.Duplicate {
			s.deliverMessage(s.life, r.Msg, sess.ID)
		}
	}
	return p
}

// checkChange runs on the committer: it reads the message p's change
// targets and lets p.check turn it into the change's Update.
func (s *Service) checkChange(ctx context.Context, p *pendingSend) error {
	ev := p.change.Event
	m, err := s.targetMessage(ctx, ev.ConversationId, ev.GetEvent().GetTargetSeq())
	if err != nil {
		return err
	}
	if err := p.check(m); err != nil {
		return err
	}
	if p.change.Pin == nil { // a pin leaves the message as it is
		p.change.Update = m
	}
	return nil
}

// lastReadable returns the newest seq of conv that a reader limited to upTo
// (0: no limit, see readLimit) may read.
func (s *Service) lastReadable(ctx context.Context, conv string, upTo uint64) (uint64, error) {
	last, err := s.store.LastSeq(ctx, conv)
	if err != nil {
		return 0, storeErr(err)
	}
	if upTo > 0 {
		last = min(last, upTo)
	}
	return last, nil
}

// updateSettings changes uid's settings of conv under a per-user,
// per-conversation lock (pins and clears do not overwrite each other).
func (s *Service) updateSettings(ctx context.Context, uid, conv string, change func(*store.ConversationSettings)) (store.ConversationSettings, error) {
	k := settingsLockKey{uid: uid, conv: conv}
	if !s.changeLocks.lock(k, changeLockWait) {
		return store.ConversationSettings{}, errUnavail
	}
	defer s.changeLocks.unlock(k)
	cs, err := s.store.GetConversationSettings(ctx, uid, conv)
	if err != nil {
		return cs, storeErr(err)
	}
	change(&cs)
	if err := s.store.SetConversationSettings(ctx, uid, conv, cs); err != nil {
		return cs, storeErr(err)
	}
	return cs, nil
}

// deleteForMe hides messages (seqs), or the whole conversation up to its
// newest readable seq (all), for the caller only. The caller's other devices
// get a HiddenEvent. Every seq must be one the caller may read.
func (s *Service) deleteForMe(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.DeleteForMe) error {
	uid, conv := sess.UserID, r.ConversationId
	if r.All == (len(r.Seqs) > 0) {
		return errBadRequest // exactly one of seqs and all
	}
	if len(r.Seqs) > maxHideSeqs {
		return errTooLarge
	}
	upTo, err := s.readLimit(ctx, uid, conv)
	if err != nil {
		return err
	}
	last, err := s.lastReadable(ctx, conv, upTo)
	if err != nil {
		return err
	}
	ev := &pb.HiddenEvent{ConversationId: conv}
	if r.All {
		cs, err := s.updateSettings(ctx, uid, conv, func(cs *store.ConversationSettings) {
			cs.ClearedSeq = max(cs.ClearedSeq, last)
		})
		if err != nil {
			return err
		}
		ev.ClearedSeq = cs.ClearedSeq
	} else {
		seqs := slices.Clone(r.Seqs)
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
		if seqs[0] == 0 {
			return errBadRequest
		}
		if seqs[len(seqs)-1] > last {
			return errDenied // not (yet) a message the caller can read
		}
		if err := s.store.HideMessages(ctx, uid, conv, seqs); err != nil {
			return storeErr(err)
		}
		ev.Seqs = seqs
	}
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Hidden{Hidden: ev}})
	if err := s.router.DeliverToUsers(ctx, []string{uid}, out, sess.ID, nil); err != nil {
		s.deliveryFailed("hidden event", err)
	}
	s.replyOK(c, id)
	return nil
}

// clearedSeq returns the seq up to which uid deleted conv for themselves.
func (s *Service) clearedSeq(ctx context.Context, uid, conv string) (uint64, error) {
	cs, err := s.store.GetConversationSettings(ctx, uid, conv)
	if err != nil {
		return 0, storeErr(err)
	}
	return cs.ClearedSeq, nil
}

// dropHidden prepares a page (ascending by seq) for uid: it leaves out the
// messages uid hid (one range read for the page), and serves EDIT events of
// recalled messages without their content, so a recalled message's text
// never reaches a client through an earlier edit of it. msgs is not modified.
func (s *Service) dropHidden(ctx context.Context, uid, conv string, msgs []*pb.Message) ([]*pb.Message, error) {
	if len(msgs) == 0 {
		return msgs, nil
	}
	hidden, err := s.store.HiddenMessages(ctx, uid, conv, msgs[0].Seq, msgs[len(msgs)-1].Seq)
	if err != nil {
		return nil, storeErr(err)
	}
	if len(hidden) > 0 {
		out := make([]*pb.Message, 0, len(msgs))
		h := 0
		for _, m := range msgs {
			for h < len(hidden) && hidden[h] < m.Seq {
				h++
			}
			if h < len(hidden) && hidden[h] == m.Seq {
				continue
			}
			out = append(out, m)
		}
		msgs = out
	}
	return s.scrubEdits(ctx, conv, msgs, len(hidden) > 0)
}

// scrubEdits replaces EDIT events whose target was recalled by copies
// without content. owned says msgs may be modified in place.
func (s *Service) scrubEdits(ctx context.Context, conv string, msgs []*pb.Message, owned bool) ([]*pb.Message, error) {
	for i, m := range msgs {
		if m.Kind != pb.MessageKind_MESSAGE_KIND_EDIT || (len(m.Payload) == 0 && m.ContentType == "") {
			continue
		}
		target := m.GetEvent().GetTargetSeq()
		var t *pb.Message
		if j, found := slices.BinarySearchFunc(msgs, target, func(m *pb.Message, seq uint64) int { return cmp.Compare(m.Seq, seq) }); found {
			t = msgs[j]
		} else {
			var err error
			t, err = s.store.GetMessage(ctx, conv, target)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, storeErr(err)
			}
		}
		if !t.Recalled {
			continue
		}
		if !owned {
			msgs, owned = slices.Clone(msgs), true
		}
		cp := proto.Clone(m).(*pb.Message)
		cp.Payload, cp.ContentType = nil, ""
		msgs[i] = cp
	}
	return msgs, nil
}

// readCounts answers, for each asked seq, how many members have read it:
// the members (a group's current members; the two users of a 1:1
// conversation) other than the message's sender whose read cursor is at or
// past the seq. Groups up to ReceiptListMax members (and 1:1 conversations)
// also list who. One read of the conversation's cursors serves the request.
// Read cursors are written a few milliseconds after the ReadAck's Ok, so a
// count may lag that much behind.
func (s *Service) readCounts(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.ReadCounts) error {
	uid, conv := sess.UserID, r.ConversationId
	if len(r.Seqs) > maxReadCountSeqs {
		return errTooLarge
	}
	since, upTo, err := s.readRange(ctx, uid, conv)
	if err != nil {
		return err
	}
	var isMember func(string) bool
	size := 2
	if isGroup(conv) {
		g, err := s.group(ctx, conv)
		if err != nil {
			return err
		}
		isMember = func(u string) bool { _, ok := g.members[u]; return ok }
		size = len(g.members)
	} else {
		a, b, _ := parseDirect(conv) // valid: readLimit passed
		isMember = func(u string) bool { return u == a || u == b }
	}
	senders := make([]string, len(r.Seqs))
	for i, seq := range r.Seqs {
		if seq == 0 {
			return errBadRequest
		}
		if upTo > 0 && seq > upTo || seq <= since {
			return errDenied
		}
		m, err := s.store.GetMessage(ctx, conv, seq)
		if errors.Is(err, store.ErrNotFound) {
			return errDenied
		}
		if err != nil {
			return storeErr(err)
		}
		senders[i] = m.From
	}
	cursors, err := s.store.Cursors(ctx, conv)
	if err != nil {
		return storeErr(err)
	}
	// The members' read seqs, ascending: a count is one binary search.
	readers := make([]store.Cursor, 0, len(cursors))
	reads := make([]uint64, 0, len(cursors))
	readOf := make(map[string]uint64, len(r.Seqs))
	for _, from := range senders {
		readOf[from] = 0
	}
	for _, cur := range cursors {
		if cur.Read == 0 || !isMember(cur.UserID) {
			continue
		}
		readers = append(readers, cur)
		reads = append(reads, cur.Read)
		if _, ok := readOf[cur.UserID]; ok {
			readOf[cur.UserID] = cur.Read
		}
	}
	slices.Sort(reads)
	list := size <= s.cfg.ReceiptListMax
	if list {
		slices.SortFunc(readers, func(a, b store.Cursor) int {
			return strings.Compare(a.UserID, b.UserID)
		})
	}
	out := &pb.ReadCountList{ConversationId: conv, Counts: make([]*pb.ReadCount, 0, len(r.Seqs))}
	encoded := 0
	for i, seq := range r.Seqs {
		from, _ := slices.BinarySearch(reads, seq)
		n := len(reads) - from
		if readOf[senders[i]] >= seq {
			n-- // the sender has read their own message; not counted
		}
		rc := &pb.ReadCount{Seq: seq, Count: uint32(n)}
		if list {
			for _, cur := range readers {
				if cur.Read >= seq && cur.UserID != senders[i] {
					rc.Readers = append(rc.Readers, cur.UserID)
				}
			}
		}
		// With reader lists (up to ReceiptListMax user ids per seq) an
		// answer for many seqs can pass the page budget: it then covers
		// the seqs asked first, and the client asks again for the rest.
		if encoded += proto.Size(rc); list && i > 0 && encoded > s.cfg.PageBytes {
			break
		}
		out.Counts = append(out.Counts, rc)
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_ReadCounts{ReadCounts: out}})
	return nil
}

// setConversation changes the caller's pinned and muted settings of a
// conversation they can read; their other devices get a ConversationEvent.
func (s *Service) setConversation(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.SetConversation) error {
	uid, conv := sess.UserID, r.ConversationId
	if r.Pinned == nil && r.Muted == nil {
		return errBadRequest
	}
	if _, err := s.readLimit(ctx, uid, conv); err != nil {
		return err
	}
	cs, err := s.updateSettings(ctx, uid, conv, func(cs *store.ConversationSettings) {
		if r.Pinned != nil {
			cs.Pinned = *r.Pinned
		}
		if r.Muted != nil {
			cs.Muted = *r.Muted
		}
	})
	if err != nil {
		return err
	}
	ev := &pb.ConversationEvent{ConversationId: conv, Pinned: cs.Pinned, Muted: cs.Muted, ClearedSeq: cs.ClearedSeq}
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_ConversationEvent{ConversationEvent: ev}})
	if err := s.router.DeliverToUsers(ctx, []string{uid}, out, sess.ID, nil); err != nil {
		s.deliveryFailed("conversation event", err)
	}
	s.replyOK(c, id)
	return nil
}
