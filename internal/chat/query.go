package chat

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/reqerr"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func pageLimit(l uint32) int {
	switch {
	case l == 0:
		return defaultPageLimit
	case l > maxPageLimit:
		return maxPageLimit
	}
	return int(l)
}

// SyncMessages returns the messages of conv after seq `after` that uid may read.
func (s *Service) SyncMessages(ctx context.Context, uid, conv string, after uint64, limit uint32) (*pb.MessagePage, error) {
	p, err := s.page(ctx, uid, conv, after, 0, limit, true)
	if err == nil && after > p.LastSeq {
		s.cursorBeyondLast(ctx, uid, conv, after)
	}
	return p, err
}

// History returns up to limit messages of conv before seq `before` (0: newest), ascending.
func (s *Service) History(ctx context.Context, uid, conv string, before uint64, limit uint32) (*pb.MessagePage, error) {
	return s.page(ctx, uid, conv, 0, before, limit, false)
}

// page reads one page forward (after) or backward (before), bounded by count
// and by bytes (readPage), within what uid may see: a member who left reads up to their leaving; a conversation the
// user deleted starts after its cleared seq; hidden messages are left out.
// Anything else — including a conversation that does not exist — is
// PERMISSION_DENIED, so the answer never tells whether it exists.
func (s *Service) page(ctx context.Context, uid, conv string, after, before uint64, limit uint32, forward bool) (*pb.MessagePage, error) {
	since, upTo, err := s.readRange(ctx, uid, conv)
	if err != nil {
		return nil, err
	}
	cleared, err := s.clearedSeq(ctx, uid, conv)
	if err != nil {
		return nil, err
	}
	cleared = max(cleared, since) // what the group's history visibility hides reads as cleared
	last, err := s.store.LastSeq(ctx, conv)
	if err != nil {
		return nil, storeErr(err)
	}
	if upTo > 0 {
		last = min(last, upTo)
	}
	n := pageLimit(limit)
	if forward {
		after = max(after, cleared)
	} else if upTo > 0 && (before == 0 || before > upTo+1) {
		before = upTo + 1
	}
	release, err := s.ReserveRead(ctx, s.readWeight(n))
	if err != nil {
		return nil, err
	}
	defer release()
	msgs, more, err := s.readPage(ctx, pageSpec{
		conv: conv, forward: forward, after: after, upTo: upTo, before: before, floor: cleared, n: n,
		visible: s.pageView(ctx, uid, conv, cleared),
	})
	if err != nil {
		return nil, err
	}
	return &pb.MessagePage{ConversationId: conv, Messages: msgs, HasMore: more, LastSeq: last}, nil
}

// ConversationList returns uid's conversations, newest activity first, paged
// by count and by bytes: each conversation carries its last message, so a
// page stops at PageBytes (always holding at least one conversation) and
// says so with a next page token.
func (s *Service) ConversationList(ctx context.Context, uid string, limit uint32, pageToken string) (*pb.ConversationList, error) {
	after, hasAfter, ok := parsePageToken(pageToken)
	if !ok {
		return nil, errBadRequest
	}
	n := pageLimit(limit)
	release, err := s.ReserveRead(ctx, s.readWeight(n))
	if err != nil {
		return nil, err
	}
	defer release()
	ids, err := s.store.Conversations(ctx, uid)
	if err != nil {
		return nil, storeErr(err)
	}
	convs := make([]*pb.Conversation, 0, len(ids))
	for _, id := range ids {
		c, err := s.conversation(ctx, uid, id)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		// Sorting needs only the last message's time and id; its content
		// is read again below for the conversations that make the page,
		// so a user with many conversations does not hold every one.
		if m := c.LastMessage; m != nil {
			c.LastMessage = &pb.Message{ConversationId: m.ConversationId, Seq: m.Seq, ServerTime: m.ServerTime, MessageId: m.MessageId}
		}
		convs = append(convs, c)
	}
	slices.SortFunc(convs, compareConversations)
	if hasAfter {
		i, _ := slices.BinarySearchFunc(convs, after, compareConversations)
		for i < len(convs) && compareConversations(convs[i], after) <= 0 {
			i++
		}
		convs = convs[i:]
	}
	out := &pb.ConversationList{}
	size := 0
	for i, c := range convs {
		if i == n {
			out.NextPageToken = makePageToken(convs[i-1])
			break
		}
		if m := c.LastMessage; m != nil {
			full, err := s.store.History(ctx, c.ConversationId, m.Seq+1, 1)
			if err != nil {
				return nil, storeErr(err)
			}
			if full = viewFor(uid, full); len(full) == 1 && full[0].Seq == m.Seq {
				c.LastMessage = full[0]
			}
		}
		cost := proto.Size(c) + msgSlack
		if i > 0 && size+cost > s.cfg.PageBytes {
			c.LastMessage = nil // not sent; the token is the previous one's
			out.NextPageToken = makePageToken(convs[i-1])
			break
		}
		out.Conversations, size = append(out.Conversations, c), size+cost
	}
	return out, nil
}

func (s *Service) conversation(ctx context.Context, uid, id string) (*pb.Conversation, error) {
	c := &pb.Conversation{ConversationId: id}
	since, upTo, err := s.readRange(ctx, uid, id)
	if errors.Is(err, errDenied) {
		return nil, nil // not readable (or a kind this build does not know): leave it out
	}
	if err != nil {
		return nil, err
	}
	if isGroup(id) {
		g, err := s.group(ctx, id)
		if err != nil {
			return nil, err
		}
		c.Type = pb.ConversationType_CONVERSATION_TYPE_GROUP
		c.Group = groupInfo(g)
		if c.Group.Encrypted, err = s.isEncrypted(ctx, id); err != nil {
			return nil, storeErr(err)
		}
		c.Left, c.LeftSeq = upTo > 0, upTo
	} else {
		peer, _ := directPeer(id, uid)
		c.Type, c.Peer = pb.ConversationType_CONVERSATION_TYPE_DIRECT, peer
		theirs, err := s.store.GetCursor(ctx, id, peer)
		if err != nil {
			return nil, storeErr(err)
		}
		c.PeerDeliveredSeq, c.PeerReadSeq = theirs.Delivered, theirs.Read
	}
	before := uint64(0)
	if upTo > 0 {
		before = upTo + 1
	}
	lastMsg, onlyOthersHidden, err := s.lastVisible(ctx, uid, id, before)
	if err != nil {
		return nil, storeErr(err)
	}
	if onlyOthersHidden {
		return nil, nil // nothing in it uid may see (a shadow-muted user's first messages)
	}
	var last []*pb.Message
	if lastMsg != nil {
		last = []*pb.Message{lastMsg}
	}
	mine, err := s.store.GetCursor(ctx, id, uid)
	if err != nil {
		return nil, storeErr(err)
	}
	settings, err := s.store.GetConversationSettings(ctx, uid, id)
	if err != nil {
		return nil, storeErr(err)
	}
	c.DeliveredSeq, c.ReadSeq = mine.Delivered, mine.Read
	c.Pinned, c.Muted, c.ClearedSeq = settings.Pinned, settings.Muted, settings.ClearedSeq
	if len(last) > 0 {
		c.LastSeq = last[0].Seq
		if last[0].Seq > max(settings.ClearedSeq, since) {
			c.LastMessage = last[0]
		}
	}
	if read := max(c.ReadSeq, c.ClearedSeq, since); c.LastSeq > read {
		if c.UnreadCount, err = s.unread(ctx, uid, id, read, c.LastSeq); err != nil {
			return nil, err
		}
		if c.UnreadMentions, err = s.unreadMentions(ctx, uid, id, read, c.LastSeq); err != nil {
			return nil, err
		}
	}
	if c.Pins, err = s.pinList(ctx, id, since, upTo); err != nil {
		return nil, err
	}
	if c.ReactionVersion, err = s.store.ReactionVersion(ctx, id); err != nil {
		return nil, storeErr(err)
	}
	if err := s.describeRetention(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// unreadScan bounds the entries read to count a conversation's unread
// messages exactly; past it the rest of the gap counts as unread. It is
// read per unread conversation of a conversation list (after every
// reconnect), so it stays small.
const unreadScan = 32

// unread counts the messages after seq read, up to last, that uid has to
// read: messages from others, not events (group changes, edits, recalls).
// Only the messages' heads are read: not their payloads, nor the user
// lists of group events.
func (s *Service) unread(ctx context.Context, uid, conv string, read, last uint64) (uint64, error) {
	return s.unreadMemo(ctx, uid, conv, read, last, nil)
}

// unreadMemo is unread, taking the heads from memo when it has them.
func (s *Service) unreadMemo(ctx context.Context, uid, conv string, read, last uint64, memo *HeadsMemo) (uint64, error) {
	heads, ok := memo.get(read, last)
	if !ok {
		var err error
		if heads, err = s.store.MessageHeads(ctx, conv, read, unreadScan); err != nil {
			return 0, storeErr(err)
		}
		memo.put(read, last, heads)
	}
	n, scanned := uint64(0), read
	now := time.Now().UnixMilli()
	var threads map[uint64]bool
	for _, h := range heads {
		if h.Seq > last {
			return n, nil
		}
		if h.ExpiresAt != 0 && h.ExpiresAt <= now {
			scanned = h.Seq // disappeared: never counted, swept or not
			continue
		}
		if h.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL && h.From != uid && !h.Recalled && !h.SenderOnly {
			// A thread reply counts only for those in the thread or mentioned.
			if h.ThreadRoot != 0 && !mentions(h, uid) {
				if threads == nil {
					threads = make(map[uint64]bool)
				}
				if !s.takesPart(ctx, uid, conv, h.ThreadRoot, threads) {
					scanned = h.Seq
					continue
				}
			}
			n++
		}
		scanned = h.Seq
	}
	if len(heads) == unreadScan && last > scanned {
		n += last - scanned
	}
	return n, nil
}

// compareConversations orders pinned conversations first, then by last
// activity, newest first: by the last message's time, then its id (ids grow
// within a millisecond), then by conversation id.
func compareConversations(a, b *pb.Conversation) int {
	if a.Pinned != b.Pinned {
		if a.Pinned {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(lastTime(b), lastTime(a)); c != 0 {
		return c
	}
	if c := cmp.Compare(b.GetLastMessage().GetMessageId(), a.GetLastMessage().GetMessageId()); c != 0 {
		return c
	}
	return strings.Compare(a.ConversationId, b.ConversationId)
}

func lastTime(c *pb.Conversation) int64 {
	if c.LastMessage == nil {
		return 0
	}
	return c.LastMessage.ServerTime
}

// A page token is the sort position of the last conversation of the previous
// page: "<pinned 0|1>|<last message time>|<last message id>|<conversation id>", base64url.
func makePageToken(c *pb.Conversation) string {
	pin := "0"
	if c.Pinned {
		pin = "1"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(pin + "|" + strconv.FormatInt(lastTime(c), 10) + "|" +
		strconv.FormatUint(c.GetLastMessage().GetMessageId(), 10) + "|" + c.ConversationId))
}

func parsePageToken(tok string) (*pb.Conversation, bool, bool) {
	if tok == "" {
		return nil, false, true
	}
	if len(tok) > 512 {
		return nil, false, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, false, false
	}
	parts := strings.SplitN(string(raw), "|", 4)
	if len(parts) != 4 || (parts[0] != "0" && parts[0] != "1") {
		return nil, false, false
	}
	t, err1 := strconv.ParseInt(parts[1], 10, 64)
	mid, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false, false
	}
	return &pb.Conversation{ConversationId: parts[3], Pinned: parts[0] == "1",
		LastMessage: &pb.Message{ServerTime: t, MessageId: mid}}, true, true
}

// storeErr maps a store failure to what the client is told.
func storeErr(err error) error { return reqerr.Store(err) }
