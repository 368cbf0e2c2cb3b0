package server_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// waitForEvent waits until r was pushed an event of kind about target and returns it.
func waitForEvent(t *testing.T, who string, r *recorder, kind pb.MessageKind, target uint64) *pb.Message {
	t.Helper()
	var found *pb.Message
	eventually(t, who+" gets the "+kind.String()+" event", func() bool {
		for _, m := range r.messages() {
			if m.Kind == kind && m.GetEvent().GetTargetSeq() == target {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// messageAt returns the message with seq from msgs, or nil.
func messageAt(msgs []*pb.Message, seq uint64) *pb.Message {
	for _, m := range msgs {
		if m.Seq == seq {
			return m
		}
	}
	return nil
}

func sendText(t *testing.T, c *client.Client, conv, text string) *pb.SendAck {
	t.Helper()
	ack, err := c.SendToConversation(ctx10(t), conv, "text", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// waitPastWindow returns once a message stored at serverTime (unix ms) is
// older than the recall window.
func waitPastWindow(serverTime int64, window time.Duration) {
	for time.Now().UnixMilli() <= serverTime+window.Milliseconds()+1 {
		time.Sleep(10 * time.Millisecond)
	}
}

// The sender recalls a 1:1 message: the peer and the sender's other devices
// get the RECALL event, history shows the message recalled without content,
// and a device that was offline sees the same through sync.
func TestRecallOneToOne(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, recA2 := ts.connect(t, "alice", "a2", "web", transports[1])
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[2])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[0])

	ack, err := alice.SendText(ctx, "bob", "oops, wrong chat")
	if err != nil {
		t.Fatal(err)
	}
	conv := ack.ConversationId
	bobs, err := bob.SendText(ctx, "alice", "what?")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob receives", func() bool { return recB.count() == 1 })

	// Nobody but the sender recalls a 1:1 message; nor can a stranger, and
	// a seq that does not exist is refused like one that is not yours.
	_, err = bob.Recall(ctx, conv, ack.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = carol.Recall(ctx, conv, ack.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = alice.Recall(ctx, conv, 99)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = alice.Recall(ctx, "p:alice:nobody", 1)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)

	rack, err := alice.Recall(ctx, conv, ack.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if rack.ConversationId != conv || rack.Seq != bobs.Seq+1 || rack.Duplicate {
		t.Fatalf("recall ack %v", rack)
	}
	for who, r := range map[string]*recorder{"bob": recB, "alice's other device": recA2} {
		ev := waitForEvent(t, who, r, pb.MessageKind_MESSAGE_KIND_RECALL, ack.Seq)
		if ev.From != "alice" || ev.Seq != rack.Seq || len(ev.Payload) != 0 {
			t.Fatalf("%s got %v", who, ev)
		}
	}
	// Recalling again, or recalling an event, is a conflict.
	_, err = alice.Recall(ctx, conv, ack.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_CONFLICT)
	_, err = alice.Recall(ctx, conv, rack.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_CONFLICT)

	h, err := bob.History(ctx, conv, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	m := messageAt(h.Messages, ack.Seq)
	if m == nil || !m.Recalled || len(m.Payload) != 0 || m.ContentType != "" || m.From != "alice" {
		t.Fatalf("history shows %v", m)
	}
	if other := messageAt(h.Messages, bobs.Seq); other == nil || other.Recalled || string(other.Payload) != "what?" {
		t.Fatalf("the other message became %v", other)
	}

	// Bob's tablet was offline: sync shows the message recalled, then the event.
	tablet, _ := ts.connect(t, "bob", "b2", "tablet", transports[1])
	all := syncAll(t, tablet, conv)
	if len(all) != 3 || !all[0].Recalled || len(all[0].Payload) != 0 ||
		all[2].Kind != pb.MessageKind_MESSAGE_KIND_RECALL || all[2].GetEvent().GetTargetSeq() != ack.Seq {
		t.Fatalf("tablet syncs %v", all)
	}
	convs, err := tablet.AllConversations(ctx)
	if err != nil || len(convs) != 1 || convs[0].LastMessage.GetKind() != pb.MessageKind_MESSAGE_KIND_RECALL {
		t.Fatalf("tablet's conversation list %v %v", convs, err)
	}
}

// Past the window the sender may not recall; in a group the owner and
// admins may at any time (an admin not the owner's), plain members never
// recall others' messages.
func TestRecallWindowAndGroupAdmins(t *testing.T) {
	// Not parallel: a recall must land inside a short recall window.
	const window = time.Second
	ts := startServer(t, func(c *server.Config) { c.RecallWindow = window })
	ctx := ctx10(t)
	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[1])
	carol, recC := ts.connect(t, "carol", "c1", "phone", transports[2])
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[0])
	eve, _ := ts.connect(t, "eve", "e1", "phone", transports[1])

	// 1:1: within the window, then past it.
	quick, err := alice.SendText(ctx, "bob", "recall me fast")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Recall(ctx, quick.ConversationId, quick.Seq); err != nil {
		t.Fatalf("recall within the window: %v", err)
	}
	late, err := alice.SendText(ctx, "bob", "too late to take back")
	if err != nil {
		t.Fatal(err)
	}

	// Whole-history visibility: eve, added at the end, reads the recalls of earlier messages.
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "team", UserIds: []string{"bob", "carol", "dave"},
		HistoryVisibility: pb.HistoryVisibility_HISTORY_VISIBILITY_ALL})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	if err := alice.SetRole(ctx, conv, "bob", pb.GroupRole_GROUP_ROLE_ADMIN); err != nil {
		t.Fatal(err)
	}
	fromCarol := sendText(t, carol, conv, "carol's message")
	fromDave := sendText(t, dave, conv, "dave's message")
	fromAlice := sendText(t, alice, conv, "the owner's message")
	fromCarol2 := sendText(t, carol, conv, "carol again")

	// Within the window, a member still may not recall another's message;
	// nor may someone outside the group.
	_, err = dave.Recall(ctx, conv, fromCarol.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = eve.Recall(ctx, conv, fromCarol.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)

	waitPastWindow(fromCarol2.ServerTime, window)
	_, err = alice.Recall(ctx, late.ConversationId, late.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED)
	_, err = carol.Recall(ctx, conv, fromCarol.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED)
	_, err = bob.Recall(ctx, conv, fromAlice.Seq) // an admin, the owner's message
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)

	// The admin recalls a member's message, the owner another: any time.
	byAdmin, err := bob.Recall(ctx, conv, fromCarol.Seq)
	if err != nil {
		t.Fatalf("admin recall: %v", err)
	}
	if _, err := alice.Recall(ctx, conv, fromDave.Seq); err != nil {
		t.Fatalf("owner recall: %v", err)
	}
	ev := waitForEvent(t, "carol", recC, pb.MessageKind_MESSAGE_KIND_RECALL, fromCarol.Seq)
	if ev.From != "bob" || ev.Seq != byAdmin.Seq {
		t.Fatalf("carol got %v", ev)
	}
	waitForEvent(t, "alice", recA, pb.MessageKind_MESSAGE_KIND_RECALL, fromCarol.Seq)
	waitForEvent(t, "carol", recC, pb.MessageKind_MESSAGE_KIND_RECALL, fromDave.Seq)

	all := syncAll(t, eveJoins(t, ts, alice, conv), conv)
	for _, seq := range []uint64{fromCarol.Seq, fromDave.Seq} {
		if m := messageAt(all, seq); m == nil || !m.Recalled || len(m.Payload) != 0 {
			t.Fatalf("seq %d after recall: %v", seq, m)
		}
	}
	for _, seq := range []uint64{fromAlice.Seq, fromCarol2.Seq} {
		if m := messageAt(all, seq); m == nil || m.Recalled || len(m.Payload) == 0 {
			t.Fatalf("seq %d not recalled: %v", seq, m)
		}
	}
}

// eveJoins adds eve to the group and returns a fresh device of hers (one
// that was never online: it converges by sync).
func eveJoins(t *testing.T, ts *testServer, owner *client.Client, conv string) *client.Client {
	t.Helper()
	if err := owner.AddMembers(ctx10(t), conv, "eve"); err != nil {
		t.Fatal(err)
	}
	eve, _ := ts.connect(t, "eve", "e2", "tablet", transports[2])
	return eve
}

func TestEdit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[1])
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[2])

	ack, err := alice.SendText(ctx, "bob", "helo")
	if err != nil {
		t.Fatal(err)
	}
	conv := ack.ConversationId
	eack, err := alice.Edit(ctx, conv, ack.Seq, "text", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	ev := waitForEvent(t, "bob", recB, pb.MessageKind_MESSAGE_KIND_EDIT, ack.Seq)
	if ev.Seq != eack.Seq || string(ev.Payload) != "hello" || ev.ContentType != "text" || ev.From != "alice" {
		t.Fatalf("bob got %v", ev)
	}
	h, err := bob.History(ctx, conv, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	m := messageAt(h.Messages, ack.Seq)
	if m == nil || string(m.Payload) != "hello" || m.EditedAt < ack.ServerTime || m.Recalled {
		t.Fatalf("history shows %v", m)
	}

	// Only the sender edits; only a live, plain message; within the limits.
	_, err = bob.Edit(ctx, conv, ack.Seq, "text", []byte("hijacked"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = alice.Edit(ctx, conv, eack.Seq, "text", []byte("edit an event"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_CONFLICT)
	_, err = alice.Edit(ctx, conv, ack.Seq, string(bytes.Repeat([]byte("x"), 65)), nil)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_TOO_LARGE)

	// Recall it: editing is a conflict now, and the earlier EDIT event no
	// longer serves the recalled text.
	if _, err := alice.Recall(ctx, conv, ack.Seq); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Edit(ctx, conv, ack.Seq, "text", []byte("back again"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_CONFLICT)
	all := syncAll(t, bob, conv)
	if m := messageAt(all, ack.Seq); !m.Recalled || len(m.Payload) != 0 {
		t.Fatalf("recalled message %v", m)
	}
	if e := messageAt(all, eack.Seq); e.Kind != pb.MessageKind_MESSAGE_KIND_EDIT || len(e.Payload) != 0 || e.ContentType != "" {
		t.Fatalf("the edit of a recalled message still shows %v", e)
	}
	// A group member edits their own group message; others see it by sync.
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	gm := sendText(t, bob, g.ConversationId, "typo")
	if _, err := bob.Edit(ctx, g.ConversationId, gm.Seq, "text", []byte("fixed")); err != nil {
		t.Fatal(err)
	}
	if m := messageAt(syncAll(t, alice, g.ConversationId), gm.Seq); string(m.Payload) != "fixed" || m.EditedAt == 0 {
		t.Fatalf("group message after edit %v", m)
	}
	_, err = alice.Edit(ctx, g.ConversationId, gm.Seq, "text", []byte("owner edits"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
}

func TestDeleteForMe(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, pushA2 := ts.connect(t, "alice", "a2", "web", transports[1])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[2])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])

	var conv string
	for _, text := range []string{"one", "two", "three"} {
		ack, err := alice.SendText(ctx, "bob", text)
		if err != nil {
			t.Fatal(err)
		}
		conv = ack.ConversationId
	}

	if err := alice.DeleteForMe(ctx, conv, 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's other device is told", func() bool {
		h := pushA2.lastHidden()
		return h != nil && h.ConversationId == conv && slices.Equal(h.Seqs, []uint64{2})
	})
	seqs := func(c *client.Client) []uint64 {
		var s []uint64
		for _, m := range syncAll(t, c, conv) {
			s = append(s, m.Seq)
		}
		return s
	}
	if got := seqs(alice); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("alice syncs %v", got)
	}
	if h, err := alice.History(ctx, conv, 0, 10); err != nil || len(h.Messages) != 2 || h.Messages[1].Seq != 3 {
		t.Fatalf("alice's history %v %v", h, err)
	}
	if got := seqs(bob); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("bob syncs %v", got)
	}

	// Refusals: not yours, not there yet, malformed, too many.
	wantCode(t, carol.DeleteForMe(ctx, conv, 1), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	wantCode(t, alice.DeleteForMe(ctx, conv, 4), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	wantCode(t, alice.DeleteForMe(ctx, conv, 0), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	wantCode(t, alice.DeleteForMe(ctx, conv), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	wantCode(t, alice.DeleteForMe(ctx, conv, make([]uint64, 1001)...), pb.ErrorCode_ERROR_CODE_TOO_LARGE)

	// Delete the whole conversation for alice.
	if err := alice.ClearConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice's other device is told of the clear", func() bool {
		h := pushA2.lastHidden()
		return h != nil && h.ClearedSeq == 3
	})
	if got := seqs(alice); len(got) != 0 {
		t.Fatalf("alice syncs %v after clearing", got)
	}
	if h, err := alice.History(ctx, conv, 0, 10); err != nil || len(h.Messages) != 0 {
		t.Fatalf("alice's history after clearing %v %v", h, err)
	}
	convs, err := alice.AllConversations(ctx)
	if err != nil || len(convs) != 1 || convs[0].ClearedSeq != 3 || convs[0].LastMessage != nil || convs[0].UnreadCount != 0 {
		t.Fatalf("alice's conversation list %v %v", convs, err)
	}
	if got := seqs(bob); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("bob syncs %v after alice cleared", got)
	}
	// New messages show again.
	if _, err := bob.SendText(ctx, "alice", "four"); err != nil {
		t.Fatal(err)
	}
	if got := seqs(alice); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("alice syncs %v after a new message", got)
	}
}

func TestGroupReadCounts(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[2])
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[0])
	eve, _ := ts.connect(t, "eve", "e1", "phone", transports[1])

	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "readers", UserIds: []string{"bob", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	m1 := sendText(t, alice, conv, "first")
	m2 := sendText(t, alice, conv, "second")
	if err := bob.MarkRead(ctx, conv, m2.Seq); err != nil {
		t.Fatal(err)
	}
	if err := carol.MarkRead(ctx, conv, m1.Seq); err != nil {
		t.Fatal(err)
	}
	var l *pb.ReadCountList
	eventually(t, "read counts", func() bool {
		l, err = dave.ReadCounts(ctx, conv, m1.Seq, m2.Seq)
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Counts) == 2 && l.Counts[0].Count == 2 && l.Counts[1].Count == 1
	})
	// The sender (alice, whose cursor moved when she sent) is not counted.
	if l.ConversationId != conv || l.Counts[0].Seq != m1.Seq || !slices.Equal(l.Counts[0].Readers, []string{"bob", "carol"}) ||
		!slices.Equal(l.Counts[1].Readers, []string{"bob"}) {
		t.Fatalf("read counts %v", l)
	}

	// Dave's own message: alice's read counts, dave not.
	m3 := sendText(t, dave, conv, "third")
	if err := alice.MarkRead(ctx, conv, m3.Seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "read count of dave's message", func() bool {
		l, err = bob.ReadCounts(ctx, conv, m3.Seq)
		return err == nil && l.Counts[0].Count == 1 && slices.Equal(l.Counts[0].Readers, []string{"alice"})
	})

	// Outsiders, missing seqs and too many seqs are refused.
	_, err = eve.ReadCounts(ctx, conv, m1.Seq)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = bob.ReadCounts(ctx, conv, 999)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = bob.ReadCounts(ctx, conv, make([]uint64, 101)...)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_TOO_LARGE)

	// A removed member no longer counts (dave now does: sending moved his
	// read cursor past m1).
	if err := alice.RemoveMember(ctx, conv, "carol"); err != nil {
		t.Fatal(err)
	}
	l, err = bob.ReadCounts(ctx, conv, m1.Seq)
	if err != nil || l.Counts[0].Count != 2 || !slices.Equal(l.Counts[0].Readers, []string{"bob", "dave"}) {
		t.Fatalf("after carol's removal: %v %v", l, err)
	}

	// 1:1: the peer's read cursor.
	ack, err := alice.SendText(ctx, "eve", "read me")
	if err != nil {
		t.Fatal(err)
	}
	if err := eve.MarkRead(ctx, ack.ConversationId, ack.Seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "1:1 read count", func() bool {
		l, err = alice.ReadCounts(ctx, ack.ConversationId, ack.Seq)
		return err == nil && l.Counts[0].Count == 1 && slices.Equal(l.Counts[0].Readers, []string{"eve"})
	})
}

// Past receipt_list_max members a group gets counts without names.
func TestReadCountsWithoutReaderList(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.ReceiptListMax = 2 })
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[2])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	m := sendText(t, alice, g.ConversationId, "hi")
	if err := bob.MarkRead(ctx, g.ConversationId, m.Seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "count", func() bool {
		l, err := alice.ReadCounts(ctx, g.ConversationId, m.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Counts[0].Readers) != 0 {
			t.Fatalf("readers listed in a group over the limit: %v", l)
		}
		return l.Counts[0].Count == 1
	})
}

func TestPinAndMuteConversation(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	_, pushA2 := ts.connect(t, "alice", "a2", "web", transports[1])
	carol, _ := ts.connect(t, "carol", "c1", "phone", transports[0])

	older, err := alice.SendText(ctx, "bob", "older")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SendText(ctx, "carol", "newer"); err != nil {
		t.Fatal(err)
	}
	order := func() []string {
		convs, err := alice.AllConversations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range convs {
			ids = append(ids, c.Peer)
		}
		return ids
	}
	if got := order(); !slices.Equal(got, []string{"carol", "bob"}) {
		t.Fatalf("order before pinning %v", got)
	}
	if err := alice.PinConversation(ctx, older.ConversationId, true); err != nil {
		t.Fatal(err)
	}
	if got := order(); !slices.Equal(got, []string{"bob", "carol"}) {
		t.Fatalf("order after pinning %v", got)
	}
	eventually(t, "the other device learns of the pin", func() bool {
		e := pushA2.lastConv()
		return e != nil && e.ConversationId == older.ConversationId && e.Pinned && !e.Muted
	})
	if err := alice.MuteConversation(ctx, older.ConversationId, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other device learns of the mute", func() bool {
		e := pushA2.lastConv()
		return e != nil && e.Pinned && e.Muted
	})
	convs, err := alice.AllConversations(ctx)
	if err != nil || !convs[0].Pinned || !convs[0].Muted || convs[1].Pinned || convs[1].Muted {
		t.Fatalf("conversation list %v %v", convs, err)
	}
	if err := alice.PinConversation(ctx, older.ConversationId, false); err != nil {
		t.Fatal(err)
	}
	if got := order(); !slices.Equal(got, []string{"carol", "bob"}) {
		t.Fatalf("order after unpinning %v", got)
	}
	// Settings are per user: carol's view of her conversation is unchanged,
	// and she cannot touch alice and bob's.
	cc, err := carol.AllConversations(ctx)
	if err != nil || len(cc) != 1 || cc[0].Pinned || cc[0].Muted {
		t.Fatalf("carol's list %v %v", cc, err)
	}
	wantCode(t, carol.PinConversation(ctx, older.ConversationId, true), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	wantCode(t, alice.SetConversation(ctx, &pb.SetConversation{ConversationId: older.ConversationId}), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
}
