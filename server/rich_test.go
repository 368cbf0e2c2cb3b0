package server_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// text sends a text message with the rich fields of extra set.
func text(ctx context.Context, c *client.Client, conv, body string, extra func(*pb.Send)) (*pb.SendAck, error) {
	s := &pb.Send{ConversationId: conv, ContentType: "text/plain", Payload: []byte(body)}
	if extra != nil {
		extra(s)
	}
	return c.Send(ctx, s)
}

// bySeq finds the message seq in msgs (nil if absent).
func bySeq(msgs []*pb.Message, seq uint64) *pb.Message {
	for _, m := range msgs {
		if m.Seq == seq {
			return m
		}
	}
	return nil
}

// conversationOf returns conv from c's conversation list.
func conversationOf(t *testing.T, ctx context.Context, c *client.Client, conv string) *pb.Conversation {
	t.Helper()
	all, err := c.AllConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if x.ConversationId == conv {
			return x
		}
	}
	t.Fatalf("%s is not in the conversation list", conv)
	return nil
}

// A reply names the message it answers; receivers see a preview of the
// original live and in history, as the original is at the time: a recall
// shows in the preview later. Replies to what the sender may not read, or
// to nothing, are refused.
func TestReplies(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, bobRec := ts.connect(t, "bob", "b1", "phone", transports[1])
	stranger, _ := ts.connect(t, "eve", "e1", "phone", transports[2])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	long := strings.Repeat("é", 200) // 400 bytes: cut at a character boundary
	orig, err := text(ctx, alice, conv, long, nil)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := text(ctx, alice, conv, "answering myself", func(s *pb.Send) { s.ReplyTo = orig.Seq })
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the reply", func() bool { return bySeq(bobRec.messages(), reply.Seq) != nil })
	live := bySeq(bobRec.messages(), reply.Seq)
	p := live.GetReplyPreview()
	if live.ReplyTo != orig.Seq || p == nil || p.Seq != orig.Seq || p.From != "alice" || !p.Truncated ||
		len(p.Snippet) != 256 || !bytes.HasPrefix([]byte(long), p.Snippet) {
		t.Fatalf("live reply: reply_to %d, preview %v", live.ReplyTo, p)
	}

	if _, err := alice.Recall(ctx, conv, orig.Seq); err != nil {
		t.Fatal(err)
	}
	page, err := bob.History(ctx, conv, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	m := bySeq(page.Messages, reply.Seq)
	if m == nil || m.ReplyPreview == nil || !m.ReplyPreview.Recalled || len(m.ReplyPreview.Snippet) != 0 {
		t.Fatalf("after the recall, history shows the reply's preview as %v", m.GetReplyPreview())
	}
	// Stored without the preview: the store keeps reply_to only.
	stored, err := adminClient(ts).Messages(ctx, conv, 0, true, 50)
	if err != nil {
		t.Fatal(err)
	}
	if s := bySeq(stored.Messages, reply.Seq); s == nil || s.ReplyTo != orig.Seq {
		t.Fatalf("stored reply: %v", s)
	}

	for name, s := range map[string]func(*pb.Send){
		"no such seq":   func(s *pb.Send) { s.ReplyTo = 999 },
		"an event":      func(s *pb.Send) { s.ReplyTo = 1 }, // the group-created event
		"thread on one": func(s *pb.Send) { s.ThreadRoot = 1 },
	} {
		if _, err := text(ctx, bob, conv, "x", s); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
			t.Errorf("reply to %s: %v, want BAD_REQUEST", name, err)
		}
	}
	if _, err := text(ctx, stranger, conv, "x", func(s *pb.Send) { s.ReplyTo = orig.Seq }); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a non-member's reply: %v, want PERMISSION_DENIED", err)
	}
}

// Reactions: idempotent adds and removes, counts per emoji with whether I
// reacted, live to every member, a cap on distinct emojis, and convergence
// after a reconnect through the conversation's reaction version.
func TestReactions(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, aliceRec := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[1])
	_, bob2Rec := ts.connect(t, "bob", "b2", "desktop", transports[2])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])
	outsider, _ := ts.connect(t, "eve", "e1", "phone", transports[0])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	msg, err := text(ctx, alice, conv, "react to me", nil)
	if err != nil {
		t.Fatal(err)
	}

	u, err := bob.React(ctx, conv, msg.Seq, "👍")
	if err != nil {
		t.Fatal(err)
	}
	if !u.Personal || len(u.Reactions) != 1 || u.Reactions[0].Emoji != "👍" || u.Reactions[0].Count != 1 || !u.Reactions[0].Me || u.Version == 0 {
		t.Fatalf("bob's reaction: %v", u)
	}
	again, err := bob.React(ctx, conv, msg.Seq, "👍")
	if err != nil || again.Reactions[0].Count != 1 || again.Version != u.Version {
		t.Fatalf("reacting twice: %v, %v (want the same count and version)", again, err)
	}
	if _, err := carol.React(ctx, conv, msg.Seq, "👍"); err != nil {
		t.Fatal(err)
	}
	last, err := carol.React(ctx, conv, msg.Seq, "❤️")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"👍=2", "❤️=1"}
	if got := counts(last.Reactions); !slices.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}

	// Alice (the sender, not reacting) converges live on the newest counts.
	var live client.ReactionState
	eventually(t, "alice gets the counts live", func() bool {
		for _, u := range aliceRec.snapshot().reacts {
			live.Apply(u)
		}
		rs, v := live.Get(conv, msg.Seq)
		return v == last.Version && slices.Equal(counts(rs), want)
	})
	// Bob's other device is told his own reaction as his (personal).
	eventually(t, "bob's other device gets his reaction", func() bool {
		for _, u := range bob2Rec.snapshot().reacts {
			if u.Personal && len(u.Reactions) > 0 && u.Reactions[0].Me {
				return true
			}
		}
		return false
	})

	// History carries the counts, with Me for the reader.
	page, err := bob.History(ctx, conv, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	m := bySeq(page.Messages, msg.Seq)
	if got := counts(m.GetReactions()); !slices.Equal(got, want) || !m.Reactions[0].Me || m.Reactions[1].Me || m.ReactionVersion != last.Version {
		t.Fatalf("bob's history: %v (version %d)", m.GetReactions(), m.GetReactionVersion())
	}

	// Carol goes away; bob takes his reaction back; carol catches up by
	// the conversation's reaction version.
	held := conversationOf(t, ctx, carol, conv).ReactionVersion
	carol.Close()
	if _, err := bob.Unreact(ctx, conv, msg.Seq, "👍"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Unreact(ctx, conv, msg.Seq, "🎉"); err != nil {
		t.Fatalf("removing a reaction one does not have: %v", err)
	}
	carol, _ = ts.connect(t, "carol", "c1", "phone", transports[1])
	now := conversationOf(t, ctx, carol, conv)
	if now.ReactionVersion <= held {
		t.Fatalf("reaction version %d after a change, was %d", now.ReactionVersion, held)
	}
	rp, err := carol.SyncReactions(ctx, conv, held, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Updates) != 1 || rp.Updates[0].Seq != msg.Seq || rp.HasMore || rp.Version != now.ReactionVersion {
		t.Fatalf("carol's reaction sync: %v", rp)
	}
	if got := counts(rp.Updates[0].Reactions); !slices.Equal(got, []string{"👍=1", "❤️=1"}) || !rp.Updates[0].Reactions[0].Me {
		t.Fatalf("carol's synced counts: %v", rp.Updates[0].Reactions)
	}

	// Limits and refusals.
	for i := 0; i < 18; i++ {
		if _, err := alice.React(ctx, conv, msg.Seq, fmt.Sprintf(":e%d:", i)); err != nil {
			t.Fatalf("reaction %d: %v", i, err)
		}
	}
	if _, err := alice.React(ctx, conv, msg.Seq, ":one-too-many:"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_LARGE) {
		t.Fatalf("a 21st distinct emoji: %v, want TOO_LARGE", err)
	}
	if _, err := alice.React(ctx, conv, msg.Seq, "👍"); err != nil {
		t.Fatalf("an emoji the message already has, at the cap: %v", err)
	}
	for _, bad := range []string{"", "a b", strings.Repeat("x", 33), "\x00"} {
		if _, err := alice.React(ctx, conv, msg.Seq, bad); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
			t.Errorf("emoji %q: %v, want BAD_REQUEST", bad, err)
		}
	}
	if _, err := alice.React(ctx, conv, 1, "👍"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		t.Errorf("reacting to an event: %v, want CONFLICT", err)
	}
	if _, err := outsider.React(ctx, conv, msg.Seq, "👍"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a non-member reacting: %v, want PERMISSION_DENIED", err)
	}
	if _, err := outsider.React(ctx, conv, 999, "👍"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a non-member reacting to nothing: %v, want PERMISSION_DENIED (no tell)", err)
	}
	if _, err := outsider.SyncReactions(ctx, conv, 0, 0); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a non-member's reaction sync: %v, want PERMISSION_DENIED", err)
	}
	// 25 taken (a repeat and a removal of nothing among them), refusals not counted.
	if n := diskMetric(t, ts, "parley_reactions_total"); n != 25 {
		t.Errorf("parley_reactions_total = %v, want 25", n)
	}
}

func counts(rs []*pb.Reaction) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s=%d", r.Emoji, r.Count))
	}
	return out
}

// Mentions: by name (members only) or everyone (owner and admins unless
// the group lets every member); each user's unread mention count, also in
// a muted conversation, gone once read.
func TestMentions(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, bobRec := ts.connect(t, "bob", "b1", "phone", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	if err := bob.MuteConversation(ctx, conv, true); err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, carol, conv, "@bob look", func(s *pb.Send) { s.Mentions = []string{"bob", "bob"} }); err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, carol, conv, "@all", func(s *pb.Send) { s.MentionAll = true }); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a member's @all: %v, want PERMISSION_DENIED", err)
	}
	all, err := text(ctx, alice, conv, "@all meeting", func(s *pb.Send) { s.MentionAll = true })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, carol, conv, "plain", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, carol, conv, "@eve", func(s *pb.Send) { s.Mentions = []string{"eve"} }); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("mentioning a non-member: %v, want BAD_REQUEST", err)
	}
	eventually(t, "bob gets the mentions", func() bool { return bobRec.count() >= 4 })
	if m := bySeq(bobRec.messages(), all.Seq); m == nil || !m.MentionAll {
		t.Fatalf("the @all message as delivered: %v", m)
	}
	c := conversationOf(t, ctx, bob, conv)
	if !c.Muted || c.UnreadMentions != 2 || c.UnreadCount != 3 {
		t.Fatalf("bob (muted): %d unread, %d mentions; want 3 and 2", c.UnreadCount, c.UnreadMentions)
	}
	if c := conversationOf(t, ctx, alice, conv); c.UnreadMentions != 0 {
		t.Fatalf("alice's own @all counts for her: %d", c.UnreadMentions)
	}
	if c := conversationOf(t, ctx, carol, conv); c.UnreadMentions != 1 {
		t.Fatalf("carol: %d unread mentions, want 1 (the @all)", c.UnreadMentions)
	}
	if err := bob.MarkRead(ctx, conv, c.LastSeq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob's mentions are read", func() bool { return conversationOf(t, ctx, bob, conv).UnreadMentions == 0 })

	// The group may let every member mention everyone.
	yes := true
	if _, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: conv, MembersMentionAll: &yes}); err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, carol, conv, "@all now allowed", func(s *pb.Send) { s.MentionAll = true }); err != nil {
		t.Fatalf("a member's @all once allowed: %v", err)
	}
}

// Pins: either side of a 1:1, a group's owner and admins; the list is part
// of the conversation and every device gets the events.
func TestPins(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, bobRec := ts.connect(t, "bob", "b1", "phone", transports[1])
	first, err := sendTo(ctx, alice, "bob", "pin me")
	if err != nil {
		t.Fatal(err)
	}
	dm := first.ConversationId
	ack, err := bob.Pin(ctx, dm, first.Seq)
	if err != nil {
		t.Fatalf("the other side of a 1:1 pins: %v", err)
	}
	if _, err := alice.Pin(ctx, dm, first.Seq); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		t.Fatalf("pinning a pinned message: %v, want CONFLICT", err)
	}
	c := conversationOf(t, ctx, alice, dm)
	if len(c.Pins) != 1 || c.Pins[0].Seq != first.Seq || c.Pins[0].PinnedBy != "bob" || c.Pins[0].PinnedAt == 0 {
		t.Fatalf("alice's pins: %v", c.Pins)
	}
	page, err := alice.SyncMessages(ctx, dm, first.Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if ev := bySeq(page.Messages, ack.Seq); ev == nil || ev.Kind != pb.MessageKind_MESSAGE_KIND_PINNED || ev.Event.GetTargetSeq() != first.Seq {
		t.Fatalf("the PINNED event in sync: %v", ev)
	}
	if _, err := alice.Unpin(ctx, dm, first.Seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the UNPINNED event", func() bool {
		for _, m := range bobRec.messages() {
			if m.Kind == pb.MessageKind_MESSAGE_KIND_UNPINNED {
				return true
			}
		}
		return false
	})
	if c := conversationOf(t, ctx, bob, dm); len(c.Pins) != 0 {
		t.Fatalf("pins after the unpin: %v", c.Pins)
	}
	if _, err := alice.Unpin(ctx, dm, first.Seq); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		t.Fatalf("unpinning what is not pinned: %v, want CONFLICT", err)
	}

	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	gm, err := text(ctx, bob, g.ConversationId, "rules", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Pin(ctx, g.ConversationId, gm.Seq); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a plain member pins: %v, want PERMISSION_DENIED", err)
	}
	if _, err := alice.Pin(ctx, g.ConversationId, gm.Seq); err != nil {
		t.Fatalf("the owner pins: %v", err)
	}
	if _, err := alice.Pin(ctx, g.ConversationId, 1); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		t.Fatalf("pinning an event: %v, want CONFLICT", err)
	}
	if c := conversationOf(t, ctx, bob, g.ConversationId); len(c.Pins) != 1 || c.Pins[0].Seq != gm.Seq {
		t.Fatalf("bob's group pins: %v", c.Pins)
	}
}

// Threads: replies under a root are delivered and stored in the
// conversation's sequence; the root carries the reply count and last
// reply; the thread pages both ways; thread replies count as unread only
// for those taking part in the thread or mentioned.
func TestThreads(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[0])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	root, err := text(ctx, alice, conv, "thread here", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{carol, dave} { // everyone has read up to the root
		if err := c.MarkRead(ctx, conv, root.Seq); err != nil {
			t.Fatal(err)
		}
	}
	var replies []*pb.SendAck
	for i := 0; i < 3; i++ {
		r, err := text(ctx, bob, conv, fmt.Sprintf("reply %d", i), func(s *pb.Send) { s.ThreadRoot = root.Seq })
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, r)
	}
	mention, err := text(ctx, bob, conv, "@carol see this", func(s *pb.Send) {
		s.ThreadRoot = root.Seq
		s.Mentions = []string{"carol"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, bob, conv, "nested", func(s *pb.Send) { s.ThreadRoot = replies[0].Seq }); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("a thread under a thread reply: %v, want BAD_REQUEST", err)
	}
	page, err := dave.History(ctx, conv, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	rm := bySeq(page.Messages, root.Seq)
	if th := rm.GetThread(); th == nil || th.ReplyCount != 4 || th.LastReplySeq != mention.Seq || th.LastReplyAt == 0 {
		t.Fatalf("the root's thread summary: %v", th)
	}
	if r := bySeq(page.Messages, replies[1].Seq); r == nil || r.ThreadRoot != root.Seq {
		t.Fatalf("a thread reply in history: %v", r)
	}

	tp, err := dave.ThreadHistory(ctx, conv, root.Seq, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Messages) != 2 || !tp.HasMore || tp.Messages[0].Seq != replies[2].Seq || tp.Messages[1].Seq != mention.Seq {
		t.Fatalf("thread history, newest 2: %v", seqsOf(tp.Messages))
	}
	tp, err = dave.ThreadSync(ctx, conv, root.Seq, root.Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(tp.Messages); !slices.Equal(got, []uint64{replies[0].Seq, replies[1].Seq, replies[2].Seq, mention.Seq}) || tp.HasMore {
		t.Fatalf("thread sync from the root: %v", got)
	}

	// Dave took no part: the thread does not bump his unread count.
	// Carol is mentioned in one reply: that one counts. Alice wrote the
	// root: all four count.
	// (Read cursors are written in the background: wait for them.)
	unread := func(c *client.Client, name string, want uint64) {
		t.Helper()
		var got uint64
		deadline := time.Now().Add(5 * time.Second)
		for {
			got = conversationOf(t, ctx, c, conv).UnreadCount
			if got == want || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got != want {
			t.Errorf("%s: %d unread, want %d", name, got, want)
		}
	}
	unread(dave, "dave", 0)
	unread(carol, "carol (mentioned once)", 1)
	unread(alice, "alice (the root's author)", 4)
	// Once dave replies in the thread he takes part.
	mine, err := text(ctx, dave, conv, "me too", func(s *pb.Send) { s.ThreadRoot = root.Seq })
	if err != nil {
		t.Fatal(err)
	}
	if err := dave.MarkRead(ctx, conv, mine.Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := text(ctx, bob, conv, "welcome", func(s *pb.Send) { s.ThreadRoot = root.Seq }); err != nil {
		t.Fatal(err)
	}
	unread(dave, "dave, now in the thread", 1)
}

func seqsOf(msgs []*pb.Message) []uint64 {
	var out []uint64
	for _, m := range msgs {
		out = append(out, m.Seq)
	}
	return out
}

// Streaming: a bot opens a message, appends chunks that members online see
// live, and finishes it: stored once, with the whole text; a device that
// was offline sees only the finished message. Users without the bot role
// may not stream; a stream left idle is stored as what it had, marked
// incomplete; the admin API streams as a bot.
func TestStreams(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.StreamIdleTimeout = 500 * time.Millisecond })
	ctx := ctx10(t)
	admin := adminClient(ts)
	if _, err := admin.CreateUser(ctx, "helper-bot", ""); err != nil {
		t.Fatal(err)
	}
	if u, err := admin.SetBot(ctx, "helper-bot", true); err != nil || !u.Bot {
		t.Fatalf("SetBot: %v, %v", u, err)
	}
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, bobRec := ts.connect(t, "bob", "b1", "phone", transports[1])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob", "carol", "helper-bot"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	if _, err := alice.OpenStream(ctx, &pb.StreamOpen{ConversationId: conv}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a user without the bot role streams: %v, want PERMISSION_DENIED", err)
	}
	bot, _ := ts.connect(t, "helper-bot", "bot1", "server", transports[2])
	st, err := bot.OpenStream(ctx, &pb.StreamOpen{ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"The ", "answer ", "is ", "42."}
	for _, w := range words {
		if err := st.Append(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "bob sees the chunks live", func() bool { return len(bobRec.snapshot().chunks) == len(words) })
	var live strings.Builder
	for _, c := range bobRec.snapshot().chunks {
		if c.StreamId != st.ID || c.From != "helper-bot" || c.ConversationId != conv || int(c.Offset) != live.Len() {
			t.Fatalf("chunk %v", c)
		}
		live.WriteString(c.Text)
	}
	for _, m := range bobRec.messages() {
		if m.From == "helper-bot" {
			t.Fatalf("bob got a stored message before the stream finished: %v", m)
		}
	}
	ack, err := st.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the finished message", func() bool { return bySeq(bobRec.messages(), ack.Seq) != nil })
	m := bySeq(bobRec.messages(), ack.Seq)
	if string(m.Payload) != live.String() || m.StreamId != st.ID || m.Incomplete || m.ContentType != "text/plain" {
		t.Fatalf("finished message: %v", m)
	}
	if err := st.Append(ctx, "more"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("appending to a finished stream: %v, want BAD_REQUEST", err)
	}

	// Carol was offline: she sees the finished message only, once.
	carol, carolRec := ts.connect(t, "carol", "c1", "phone", transports[0])
	page, err := carol.SyncMessages(ctx, conv, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range page.Messages {
		if x.StreamId == st.ID {
			n++
		}
	}
	if n != 1 || len(carolRec.snapshot().chunks) != 0 {
		t.Fatalf("carol has %d stored copies and %d chunks", n, len(carolRec.snapshot().chunks))
	}

	// Abandoned: stored with what it had, marked incomplete.
	left, err := bot.OpenStream(ctx, &pb.StreamOpen{ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	if err := left.Append(ctx, "half a thou"); err != nil {
		t.Fatal(err)
	}
	var stored *pb.Message
	eventually(t, "the idle stream is stored", func() bool {
		for _, x := range bobRec.messages() {
			if x.StreamId == left.ID {
				stored = x
				return true
			}
		}
		return false
	})
	if !stored.Incomplete || string(stored.Payload) != "half a thou" {
		t.Fatalf("the idle stream stored as %v", stored)
	}

	// Too much text for one message.
	big, err := bot.OpenStream(ctx, &pb.StreamOpen{ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Append(ctx, strings.Repeat("x", 40<<10)); err != nil {
		t.Fatal(err)
	}
	if err := big.Append(ctx, strings.Repeat("x", 40<<10)); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_LARGE) {
		t.Fatalf("past the largest payload: %v, want TOO_LARGE", err)
	}

	// Through the admin API, as the bot.
	so, err := admin.OpenStream(ctx, "helper-bot", &pb.StreamOpen{ClientMsgId: "admin-stream-1", ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"via ", "the ", "API"} {
		if err := admin.StreamAppend(ctx, "helper-bot", so.StreamId, w); err != nil {
			t.Fatal(err)
		}
	}
	aack, err := admin.StreamFinish(ctx, "helper-bot", so.StreamId, false)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets the admin's stream", func() bool {
		m := bySeq(bobRec.messages(), aack.Seq)
		return m != nil && string(m.Payload) == "via the API"
	})
	if _, err := admin.OpenStream(ctx, "alice", &pb.StreamOpen{ConversationId: conv}); err == nil {
		t.Fatal("the admin API streamed as a user without the bot role")
	}
}

// Bad rich-message requests get a clear code each, and the connection
// keeps working.
func TestRichBadInput(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[1])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	m, err := text(ctx, alice, conv, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = fmt.Sprintf("u%d", i)
	}
	bad := pb.ErrorCode_ERROR_CODE_BAD_REQUEST
	for _, tc := range []struct {
		name string
		f    *pb.ClientFrame
		want pb.ErrorCode
	}{
		{"reply to seq 2^64-1", sendF(conv, func(s *pb.Send) { s.ReplyTo = ^uint64(0) }), bad},
		{"thread under 2^64-1", sendF(conv, func(s *pb.Send) { s.ThreadRoot = ^uint64(0) }), bad},
		{"51 mentions", sendF(conv, func(s *pb.Send) { s.Mentions = many }), pb.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"an invalid user id mentioned", sendF(conv, func(s *pb.Send) { s.Mentions = []string{"a b\x00"} }), bad},
		{"@all in a 1:1", &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "dm-all", To: "bob", Payload: []byte("x"), MentionAll: true}}}, bad},
		{"react to seq 0", &pb.ClientFrame{Body: &pb.ClientFrame_React{React: &pb.React{ConversationId: conv, Emoji: "👍"}}}, bad},
		{"react to seq 2^64-1", &pb.ClientFrame{Body: &pb.ClientFrame_React{React: &pb.React{ConversationId: conv, Seq: ^uint64(0), Emoji: "👍"}}}, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{"pin seq 0", &pb.ClientFrame{Body: &pb.ClientFrame_Pin{Pin: &pb.Pin{ConversationId: conv}}}, bad},
		{"pin seq 2^64-1", &pb.ClientFrame{Body: &pb.ClientFrame_Pin{Pin: &pb.Pin{ConversationId: conv, Seq: ^uint64(0)}}}, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{"thread history of root 0", &pb.ClientFrame{Body: &pb.ClientFrame_ThreadHistory{ThreadHistory: &pb.ThreadHistory{ConversationId: conv}}}, bad},
		{"thread history both ways", &pb.ClientFrame{Body: &pb.ClientFrame_ThreadHistory{ThreadHistory: &pb.ThreadHistory{ConversationId: conv, RootSeq: m.Seq, AfterSeq: 1, BeforeSeq: 9}}}, bad},
		{"thread history of a missing root", &pb.ClientFrame{Body: &pb.ClientFrame_ThreadHistory{ThreadHistory: &pb.ThreadHistory{ConversationId: conv, RootSeq: 999}}}, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{"append to no stream", &pb.ClientFrame{Body: &pb.ClientFrame_StreamAppend{StreamAppend: &pb.StreamAppend{StreamId: "0-nope", Text: "x"}}}, bad},
		{"finish no stream", &pb.ClientFrame{Body: &pb.ClientFrame_StreamFinish{StreamFinish: &pb.StreamFinish{StreamId: strings.Repeat("z", 5000)}}}, bad},
		{"sync reactions of a missing conversation", &pb.ClientFrame{Body: &pb.ClientFrame_SyncReactions{SyncReactions: &pb.SyncReactions{ConversationId: "g:missing", Limit: 1 << 31}}}, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
	} {
		if got := code(alice.Do(ctx, tc.f)); got != tc.want.String() {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := text(ctx, alice, conv, "still here", nil); err != nil {
		t.Fatalf("the connection after bad requests: %v", err)
	}
	// A reaction sync with a huge limit is served within the page bound.
	rp, err := alice.SyncReactions(ctx, conv, 0, 1<<31)
	if err != nil || len(rp.Updates) != 0 {
		t.Fatalf("reaction sync: %v, %v", rp, err)
	}
}

func sendF(conv string, extra func(*pb.Send)) *pb.ClientFrame {
	s := &pb.Send{ClientMsgId: "bad-" + fmt.Sprint(time.Now().UnixNano()), ConversationId: conv, Payload: []byte("x")}
	extra(s)
	return &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: s}}
}

// A stream still open when its server shuts down is stored as it is,
// marked incomplete, not lost: after a restart the members read it.
func TestStreamOpenAtShutdownIsStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	ctx := ctx10(t)
	admin := adminClient(ts)
	if _, err := admin.CreateUser(ctx, "writer-bot", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetBot(ctx, "writer-bot", true); err != nil {
		t.Fatal(err)
	}
	bot, _ := ts.connect(t, "writer-bot", "bot1", "server", transports[0])
	st, err := bot.OpenStream(ctx, &pb.StreamOpen{To: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, "cut short by a restart"); err != nil {
		t.Fatal(err)
	}
	shutdown(t, ts)

	ts2 := startServer(t, func(c *server.Config) { c.DataDir = dir })
	bob, _ := ts2.connect(t, "bob", "b1", "phone", transports[1])
	page, err := bob.SyncMessages(ctx, st.ConversationID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || !page.Messages[0].Incomplete || string(page.Messages[0].Payload) != "cut short by a restart" ||
		page.Messages[0].StreamId != st.ID {
		t.Fatalf("after the restart bob reads %v", page.Messages)
	}
}

// Many members reacting to one message at once: every reaction is counted
// exactly once, and a member watching live converges on the final counts.
func TestReactionsConcurrent(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	const n = 40
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	owner, ownerRec := ts.connect(t, "owner", "o1", "phone", transports[0])
	g, err := owner.CreateGroup(ctx, &pb.CreateGroup{Name: "big", UserIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	msg, err := text(ctx, owner, conv, "vote", nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, n)
	for i, id := range ids {
		c, _ := ts.connect(t, id, "d", "phone", transports[i%len(transports)])
		go func() {
			for _, e := range []string{"👍", "🎉", "🚀"} {
				if _, err := c.React(ctx, conv, msg.Seq, e); err != nil {
					errs <- err
					return
				}
			}
			if i%2 == 0 { // half take their rocket back
				if _, err := c.Unreact(ctx, conv, msg.Seq, "🚀"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{fmt.Sprintf("👍=%d", n), fmt.Sprintf("🎉=%d", n), fmt.Sprintf("🚀=%d", n/2)}
	page, err := owner.History(ctx, conv, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(bySeq(page.Messages, msg.Seq).GetReactions()); !slices.Equal(got, want) {
		t.Fatalf("stored counts %v, want %v", got, want)
	}
	var live client.ReactionState
	eventually(t, "the owner's live view reaches the final counts", func() bool {
		for _, u := range ownerRec.snapshot().reacts {
			live.Apply(u)
		}
		rs, _ := live.Get(conv, msg.Seq)
		return slices.Equal(counts(rs), want)
	})
	if k := len(ownerRec.snapshot().reacts); k >= 3*n+n/2 {
		t.Logf("the owner got %d updates for %d changes (none coalesced this run)", k, 3*n+n/2)
	}
}

// The Go SDK's Session catches up on reaction changes made while it was
// away (from the versions it was seeded with) and, fed to a ReactionState,
// shows the same counts as a fresh read.
func TestSessionCatchesUpReactions(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, arec := ts.connect(t, "alice", "a1", "phone", transports[0])
	m, err := sendTo(ctx, alice, "bob", "react while bob is away")
	if err != nil {
		t.Fatal(err)
	}
	still, err := sendTo(ctx, alice, "bob", "this one does not change")
	if err != nil {
		t.Fatal(err)
	}
	conv := m.ConversationId
	for _, seq := range []uint64{m.Seq, still.Seq} {
		if _, err := alice.React(ctx, conv, seq, "👍"); err != nil {
			t.Fatal(err)
		}
	}
	// The live update of the unchanged message has gone out (alice gets it
	// too) before bob comes: a slow flush could otherwise hand it, live,
	// to bob's second session, which is not a catch-up.
	eventually(t, "the live update of the unchanged message", func() bool {
		arec.mu.Lock()
		defer arec.mu.Unlock()
		for _, u := range arec.reacts {
			if u.Seq == still.Seq {
				return true
			}
		}
		return false
	})
	var state client.ReactionState
	var mu sync.Mutex
	updates := map[uint64]int{} // per message
	open := func(seed map[string]uint64) *client.Session {
		s, err := client.NewSession(client.SessionOptions{
			Options: client.Options{Token: ts.mint(t, "bob"), DeviceID: "b1", DeviceType: "phone",
				OnReaction: func(u *pb.ReactionUpdate) { mu.Lock(); updates[u.Seq]++; mu.Unlock(); state.Apply(u) }},
			Addrs: []string{"tcp://" + ts.tcpAddr}, ReactionVersions: seed,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(nil)
	for _, seq := range []uint64{m.Seq, still.Seq} {
		if rs, _ := state.Get(conv, seq); !slices.Equal(counts(rs), []string{"👍=1"}) {
			t.Fatalf("after the first catch-up, #%d: %v", seq, counts(rs))
		}
	}
	held := s.ReactionVersions()
	s.Close()

	if _, err := alice.React(ctx, conv, m.Seq, "🎉"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Unreact(ctx, conv, m.Seq, "👍"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	before := updates[still.Seq]
	mu.Unlock()
	s = open(held)
	defer s.Close()
	rs, v := state.Get(conv, m.Seq)
	if !slices.Equal(counts(rs), []string{"🎉=1"}) {
		t.Fatalf("after catching up from version %d: %v (v%d)", held[conv], counts(rs), v)
	}
	// The catch-up reads from the held version on: the message that did
	// not change is not handed again. (The changed one may come twice: in
	// the catch-up and as a live update coalesced while bob reconnected.)
	mu.Lock()
	if n := updates[still.Seq] - before; n != 0 {
		t.Errorf("the second catch-up handed %d updates of the unchanged message, want 0", n)
	}
	mu.Unlock()
}

// A reaction sync skips the changes of messages the reader may not read
// (from before they joined) instead of handing back an empty page that
// says more follow.
func TestSyncReactionsSkipsUnreadable(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	old, err := text(ctx, alice, conv, "before dave", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := alice.React(ctx, conv, old.Seq, fmt.Sprintf(":e%d:", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.AddMembers(ctx, conv, "dave"); err != nil {
		t.Fatal(err)
	}
	seen, err := text(ctx, alice, conv, "after dave", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.React(ctx, conv, seen.Seq, "👍"); err != nil {
		t.Fatal(err)
	}
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[1])
	rp, err := dave.SyncReactions(ctx, conv, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Updates) != 1 || rp.Updates[0].Seq != seen.Seq || rp.HasMore {
		t.Fatalf("dave's first reaction page: %v", rp)
	}
}
