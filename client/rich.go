package client

import (
	"context"
	"sync"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Rich messages (docs/rich-messages.md). Replies, mentions and thread
// replies are fields of [pb.Send] (ReplyTo, Mentions, MentionAll,
// ThreadRoot); the methods here cover the rest.

// React adds your emoji reaction to the message seq of a conversation and
// returns its counts (Personal: Reaction.Me is yours). Adding a reaction
// you already have changes nothing. A message holds at most 20 distinct
// emojis (ERROR_CODE_TOO_LARGE past that).
func (c *Client) React(ctx context.Context, conversationID string, seq uint64, emoji string) (*pb.ReactionUpdate, error) {
	return c.reaction(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_React{React: &pb.React{
		ConversationId: conversationID, Seq: seq, Emoji: emoji}}}))
}

// Unreact takes your emoji reaction back (none: nothing changes).
func (c *Client) Unreact(ctx context.Context, conversationID string, seq uint64, emoji string) (*pb.ReactionUpdate, error) {
	return c.reaction(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_React{React: &pb.React{
		ConversationId: conversationID, Seq: seq, Emoji: emoji, Remove: true}}}))
}

func (c *Client) reaction(r *pb.ServerFrame, err error) (*pb.ReactionUpdate, error) {
	if err != nil {
		return nil, err
	}
	if u := r.GetReaction(); u != nil {
		return u, nil
	}
	return nil, ErrProtocol
}

// SyncReactions returns the counts of the messages whose reactions changed
// after afterVersion (one page; ask again from the last update's version
// while HasMore). limit 0: the server's default.
func (c *Client) SyncReactions(ctx context.Context, conversationID string, afterVersion uint64, limit uint32) (*pb.ReactionPage, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SyncReactions{SyncReactions: &pb.SyncReactions{
		ConversationId: conversationID, AfterVersion: afterVersion, Limit: limit}}})
	if err != nil {
		return nil, err
	}
	if p := r.GetReactions(); p != nil {
		return p, nil
	}
	return nil, ErrProtocol
}

// Pin pins the message seq of a conversation (a group's owner and admins,
// either side of a 1:1) and returns the SendAck of the PINNED event. At
// most 50 pins per conversation; pinning a pinned message gives
// ERROR_CODE_CONFLICT.
func (c *Client) Pin(ctx context.Context, conversationID string, seq uint64) (*pb.SendAck, error) {
	return c.sendAck(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Pin{Pin: &pb.Pin{
		ConversationId: conversationID, Seq: seq, ClientMsgId: c.ids.next()}}}))
}

// Unpin unpins it (the UNPINNED event's SendAck).
func (c *Client) Unpin(ctx context.Context, conversationID string, seq uint64) (*pb.SendAck, error) {
	return c.sendAck(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Pin{Pin: &pb.Pin{
		ConversationId: conversationID, Seq: seq, Unpin: true, ClientMsgId: c.ids.next()}}}))
}

// ThreadHistory pages backward through the replies in root's thread: the
// newest before seq before (0: from the newest), ascending.
func (c *Client) ThreadHistory(ctx context.Context, conversationID string, root, before uint64, limit uint32) (*pb.MessagePage, error) {
	return c.page(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ThreadHistory{ThreadHistory: &pb.ThreadHistory{
		ConversationId: conversationID, RootSeq: root, BeforeSeq: before, Limit: limit}}}))
}

// ThreadSync pages forward through the replies in root's thread after seq after.
func (c *Client) ThreadSync(ctx context.Context, conversationID string, root, after uint64, limit uint32) (*pb.MessagePage, error) {
	return c.page(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ThreadHistory{ThreadHistory: &pb.ThreadHistory{
		ConversationId: conversationID, RootSeq: root, AfterSeq: after, Limit: limit}}}))
}

// Stream is a streamed message being written (users with the bot role).
type Stream struct {
	c              *Client
	ID             string
	ConversationID string
}

// OpenStream starts a streamed message to o's conversation (or user);
// ClientMsgId is filled in when empty. Members online see its text as you
// Append it; Finish stores it as one message.
func (c *Client) OpenStream(ctx context.Context, o *pb.StreamOpen) (*Stream, error) {
	if o.ClientMsgId == "" {
		o.ClientMsgId = c.ids.next()
	}
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_StreamOpen{StreamOpen: o}})
	if err != nil {
		return nil, err
	}
	so := r.GetStreamOpened()
	if so == nil {
		return nil, ErrProtocol
	}
	return &Stream{c: c, ID: so.StreamId, ConversationID: so.ConversationId}, nil
}

// Append adds text and waits for the server to take it.
func (s *Stream) Append(ctx context.Context, text string) error {
	return s.c.expectOk(s.c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_StreamAppend{
		StreamAppend: &pb.StreamAppend{StreamId: s.ID, Text: text}}}))
}

// AppendNoWait adds text without waiting for a reply (frames of one
// connection are handled in order, so Finish still follows every append).
func (s *Stream) AppendNoWait(text string) error {
	return s.c.Notify(&pb.ClientFrame{Body: &pb.ClientFrame_StreamAppend{
		StreamAppend: &pb.StreamAppend{StreamId: s.ID, Text: text}}})
}

// Finish stores the text as one message and returns its SendAck.
func (s *Stream) Finish(ctx context.Context) (*pb.SendAck, error) {
	return s.c.sendAck(s.c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_StreamFinish{
		StreamFinish: &pb.StreamFinish{StreamId: s.ID}}}))
}

// Abandon stores what was written, marked incomplete.
func (s *Stream) Abandon(ctx context.Context) (*pb.SendAck, error) {
	return s.c.sendAck(s.c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_StreamFinish{
		StreamFinish: &pb.StreamFinish{StreamId: s.ID, Abandon: true}}}))
}

// ReactionState keeps the reaction counts of messages the way the protocol
// asks: of two updates of a message the higher version wins, and Me comes
// only from updates made for this user (Personal). Feed it every update
// (OnReaction, React's answer, SyncReactions pages, Message.Reactions) and
// two devices converge on the same counts. Safe for concurrent use.
type ReactionState struct {
	mu   sync.Mutex
	msgs map[reactionKey]*reactionEntry
}

type reactionKey struct {
	conv string
	seq  uint64
}

type reactionEntry struct {
	version   uint64 // of the counts
	counts    map[string]uint32
	order     []string
	meVersion uint64 // of the personal update mine came from
	mine      map[string]bool
}

// Apply takes in one update. The counts come from the highest version; the
// marks of what this user reacted with from the highest personal one (a
// personal update older than the counts still says what was this user's
// then, and only this user's own changes, each answered personally, change
// that).
func (rs *ReactionState) Apply(u *pb.ReactionUpdate) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.msgs == nil {
		rs.msgs = make(map[reactionKey]*reactionEntry)
	}
	k := reactionKey{u.ConversationId, u.Seq}
	e := rs.msgs[k]
	if e == nil {
		e = &reactionEntry{mine: map[string]bool{}}
		rs.msgs[k] = e
	}
	if u.Personal && u.Version >= e.meVersion {
		e.meVersion = u.Version
		clear(e.mine)
		for _, r := range u.Reactions {
			if r.Me {
				e.mine[r.Emoji] = true
			}
		}
	}
	if u.Version < e.version {
		return
	}
	e.version = u.Version
	e.counts, e.order = make(map[string]uint32, len(u.Reactions)), e.order[:0]
	for _, r := range u.Reactions {
		e.counts[r.Emoji] = r.Count
		e.order = append(e.order, r.Emoji)
	}
	// An emoji of mine gone from newer counts was taken back by this user
	// (no one else can): its mark goes, even if it comes back by others.
	for emoji := range e.mine {
		if _, ok := e.counts[emoji]; !ok {
			delete(e.mine, emoji)
		}
	}
}

// ApplyMessage takes in the reactions a message carries (from a page: personal).
func (rs *ReactionState) ApplyMessage(m *pb.Message) {
	if m.ReactionVersion == 0 && len(m.Reactions) == 0 {
		return
	}
	rs.Apply(&pb.ReactionUpdate{ConversationId: m.ConversationId, Seq: m.Seq, Reactions: m.Reactions,
		Version: m.ReactionVersion, Personal: true})
}

// Get returns a message's counts (oldest emoji first) and its version.
func (rs *ReactionState) Get(conversationID string, seq uint64) ([]*pb.Reaction, uint64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e := rs.msgs[reactionKey{conversationID, seq}]
	if e == nil {
		return nil, 0
	}
	out := make([]*pb.Reaction, 0, len(e.order))
	for _, emoji := range e.order {
		out = append(out, &pb.Reaction{Emoji: emoji, Count: e.counts[emoji], Me: e.mine[emoji]})
	}
	return out, e.version
}
