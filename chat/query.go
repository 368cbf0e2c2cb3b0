package chat

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/store"
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

// canRead reports whether uid may read conv. Anything else — including a
// conversation that does not exist — is PERMISSION_DENIED, so the answer never
// tells whether it exists.
func canRead(uid, conv string) bool {
	_, ok := directPeer(conv, uid)
	return ok
}

// SyncMessages returns the messages of conv after seq `after` that uid may read.
func (s *Service) SyncMessages(ctx context.Context, uid, conv string, after uint64, limit uint32) (*pb.MessagePage, error) {
	return s.page(ctx, uid, conv, limit, func(n int) ([]*pb.Message, error) {
		return s.store.Messages(ctx, conv, after, n)
	}, func(msgs []*pb.Message, n int) []*pb.Message { return msgs[:n] })
}

// History returns up to limit messages of conv before seq `before` (0: newest), ascending.
func (s *Service) History(ctx context.Context, uid, conv string, before uint64, limit uint32) (*pb.MessagePage, error) {
	return s.page(ctx, uid, conv, limit, func(n int) ([]*pb.Message, error) {
		return s.store.History(ctx, conv, before, n)
	}, func(msgs []*pb.Message, n int) []*pb.Message { return msgs[len(msgs)-n:] })
}

// page reads one more message than the page holds, to learn whether another
// page follows, and trims the extra one from the far end (keep).
func (s *Service) page(ctx context.Context, uid, conv string, limit uint32,
	read func(n int) ([]*pb.Message, error), keep func(msgs []*pb.Message, n int) []*pb.Message) (*pb.MessagePage, error) {
	if !canRead(uid, conv) {
		return nil, errDenied
	}
	n := pageLimit(limit)
	msgs, err := read(n + 1)
	if err != nil {
		return nil, storeErr(err)
	}
	last, err := s.store.LastSeq(ctx, conv)
	if err != nil {
		return nil, storeErr(err)
	}
	more := len(msgs) > n
	if more {
		msgs = keep(msgs, n)
	}
	return &pb.MessagePage{ConversationId: conv, Messages: msgs, HasMore: more, LastSeq: last}, nil
}

// ConversationList returns uid's conversations, newest activity first, paged.
func (s *Service) ConversationList(ctx context.Context, uid string, limit uint32, pageToken string) (*pb.ConversationList, error) {
	after, hasAfter, ok := parsePageToken(pageToken)
	if !ok {
		return nil, errBadRequest
	}
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
		if c != nil {
			convs = append(convs, c)
		}
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
	n := pageLimit(limit)
	if len(convs) > n {
		convs = convs[:n]
		out.NextPageToken = makePageToken(convs[n-1])
	}
	out.Conversations = convs
	return out, nil
}

func (s *Service) conversation(ctx context.Context, uid, id string) (*pb.Conversation, error) {
	peer, ok := directPeer(id, uid)
	if !ok {
		return nil, nil // not a kind this build knows; skip rather than fail the list
	}
	last, err := s.store.History(ctx, id, 0, 1)
	if err != nil {
		return nil, storeErr(err)
	}
	mine, err := s.store.GetCursor(ctx, id, uid)
	if err != nil {
		return nil, storeErr(err)
	}
	theirs, err := s.store.GetCursor(ctx, id, peer)
	if err != nil {
		return nil, storeErr(err)
	}
	c := &pb.Conversation{
		ConversationId: id, Type: pb.ConversationType_CONVERSATION_TYPE_DIRECT, Peer: peer,
		DeliveredSeq: mine.Delivered, ReadSeq: mine.Read,
		PeerDeliveredSeq: theirs.Delivered, PeerReadSeq: theirs.Read,
	}
	if len(last) > 0 {
		c.LastMessage = last[0]
		c.LastSeq = last[0].Seq
	}
	if c.LastSeq > c.ReadSeq {
		c.UnreadCount = c.LastSeq - c.ReadSeq
	}
	return c, nil
}

// compareConversations orders by last activity, newest first: by the last
// message's time, then its id (ids grow within a millisecond), then by
// conversation id.
func compareConversations(a, b *pb.Conversation) int {
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
// page: "<last message time>|<last message id>|<conversation id>", base64url.
func makePageToken(c *pb.Conversation) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(lastTime(c), 10) + "|" +
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
	parts := strings.SplitN(string(raw), "|", 3)
	if len(parts) != 3 {
		return nil, false, false
	}
	t, err1 := strconv.ParseInt(parts[0], 10, 64)
	mid, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false, false
	}
	return &pb.Conversation{ConversationId: parts[2], LastMessage: &pb.Message{ServerTime: t, MessageId: mid}}, true, true
}

func storeErr(err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return errInternal
	}
	return errUnavail
}
