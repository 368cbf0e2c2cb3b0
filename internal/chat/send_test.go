package chat

import (
	"bytes"
	"slices"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// 1:1 sends get seqs 1, 2, 3 in order; a retry with a client_msg_id already
// stored gets the first ACK back (marked duplicate) and takes no seq, and the
// stored message keeps its first content.
func TestSendSeqsAndRetry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	var first *pb.SendAck
	for i, cmid := range []string{"m1", "m2", "m3"} {
		ack := h.send("alice", textSend(cmid, "bob", "", cmid))
		if ack.Seq != uint64(i+1) || ack.Duplicate || ack.ClientMsgId != cmid || ack.MessageId == 0 {
			t.Fatalf("send %d: ack %v, want seq %d", i, ack, i+1)
		}
		if first == nil {
			first = ack
		} else if ack.ConversationId != first.ConversationId {
			t.Fatalf("send %d went to %q, the first to %q", i, ack.ConversationId, first.ConversationId)
		}
	}
	retry := h.send("alice", textSend("m1", "bob", "", "m1 resent with other text"))
	if !retry.Duplicate || retry.Seq != first.Seq || retry.MessageId != first.MessageId || retry.ConversationId != first.ConversationId {
		t.Fatalf("retry of m1: %v, want the first ack %v marked duplicate", retry, first)
	}
	if next := h.send("alice", textSend("m4", "bob", "", "m4")); next.Seq != 4 || next.Duplicate {
		t.Fatalf("the send after a retry: %v, want seq 4", next)
	}
	p := h.sync("bob", first.ConversationId, 0, 100)
	if got := texts(p); !slices.Equal(got, []string{"m1", "m2", "m3", "m4"}) {
		t.Fatalf("bob reads %q", got)
	}
}

// Sync pages forward and history backward through a conversation, both in
// ascending order within a page, with has_more true until the end.
func TestSyncAndHistoryPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	var conv string
	for i := range 7 {
		conv = h.send("alice", textSend(string(rune('a'+i)), "bob", "", string(rune('a'+i)))).ConversationId
	}
	type page struct {
		from     uint64 // after_seq (sync) or before_seq (history)
		want     string // the payloads, concatenated
		has_more bool
	}
	read := func(p *pb.MessagePage) string {
		var b []byte
		for _, m := range p.Messages {
			b = append(b, m.Payload...)
		}
		return string(b)
	}
	for _, pg := range []page{{0, "abc", true}, {3, "def", true}, {6, "g", false}, {7, "", false}} {
		p := h.sync("bob", conv, pg.from, 3)
		if got := read(p); got != pg.want || p.HasMore != pg.has_more || p.LastSeq != 7 {
			t.Errorf("sync after %d: %q has_more %v last %d, want %q has_more %v last 7", pg.from, got, p.HasMore, p.LastSeq, pg.want, pg.has_more)
		}
	}
	for _, pg := range []page{{0, "efg", true}, {5, "bcd", true}, {2, "a", false}} {
		p := h.history("alice", conv, pg.from, 3)
		if got := read(p); got != pg.want || p.HasMore != pg.has_more {
			t.Errorf("history before %d: %q has_more %v, want %q has_more %v", pg.from, got, p.HasMore, pg.want, pg.has_more)
		}
	}
	// Someone else's conversation is not readable at all.
	h.refused("carol", &pb.ClientFrame{Body: &pb.ClientFrame_SyncMessages{SyncMessages: &pb.SyncMessages{ConversationId: conv}}},
		pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("carol", &pb.ClientFrame{Body: &pb.ClientFrame_History{History: &pb.History{ConversationId: conv}}},
		pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
}

// Read and delivered ACKs past the last seq move the cursors to the last
// seq only: a later message is unread for the reader and not shown read to
// the sender, in 1:1 and in groups; the receipt the sender gets live is
// clamped the same way.
func TestCursorsStopAtLastSeq(t *testing.T) {
	t.Parallel()
	const huge = ^uint64(0)
	h := newHarness(t, Config{})
	aliceDev := h.connect("alice", "phone")
	direct := h.send("alice", textSend("d1", "bob", "", "one")).ConversationId
	group := h.createGroup("alice", &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	gLast := h.send("alice", textSend("g1", "", group, "hi")).Seq

	h.ok("bob", deliveredReq(direct, huge))
	h.ok("bob", readReq(direct, huge))
	h.ok("bob", readReq(group, huge))
	aliceDev.wait(func() bool {
		for _, f := range aliceDev.pushed {
			if r := f.GetReceipt(); r != nil && r.UserId == "bob" && r.ReadSeq != 0 {
				return true
			}
		}
		return false
	}, "bob's read receipt")
	for _, f := range aliceDev.frames() {
		if r := f.GetReceipt(); r != nil && (r.ReadSeq > 1 || r.DeliveredSeq > 1) {
			t.Fatalf("alice was told bob is at delivered %d read %d, past the last seq 1", r.DeliveredSeq, r.ReadSeq)
		}
	}
	// Cursors are written in the background (every 100 ms).
	eventually(t, "bob's cursors to be stored", func() bool {
		d, g := h.conversation("bob", direct), h.conversation("bob", group)
		return d.GetReadSeq() != 0 && d.GetDeliveredSeq() != 0 && g.GetReadSeq() != 0
	})
	if d := h.conversation("bob", direct); d.ReadSeq != 1 || d.DeliveredSeq != 1 {
		t.Fatalf("bob's 1:1 cursors: delivered %d read %d, want 1 (the last seq)", d.DeliveredSeq, d.ReadSeq)
	}
	if g := h.conversation("bob", group); g.ReadSeq != gLast {
		t.Fatalf("bob's group read cursor %d, want %d (the last seq)", g.ReadSeq, gLast)
	}

	second := h.send("alice", textSend("d2", "bob", "", "two"))
	h.send("alice", textSend("g2", "", group, "again"))
	if c := h.conversation("bob", direct); c.UnreadCount != 1 {
		t.Fatalf("bob's 1:1 unread after a new message: %d, want 1", c.UnreadCount)
	}
	if c := h.conversation("bob", group); c.UnreadCount != 1 {
		t.Fatalf("bob's group unread after a new message: %d, want 1", c.UnreadCount)
	}
	if c := h.conversation("alice", direct); c.PeerReadSeq >= second.Seq || c.PeerDeliveredSeq >= second.Seq {
		t.Fatalf("alice sees bob at delivered %d read %d, at or past her new message %d", c.PeerDeliveredSeq, c.PeerReadSeq, second.Seq)
	}
	h.refused("bob", readReq(direct, 0), pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	h.refused("carol", readReq(direct, 1), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
}

// A user who blocked another gets nothing from them, by user id or by
// conversation id; the blocker can still write; unblocking lets messages in.
func TestBlockedSenderIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	conv := h.send("alice", textSend("before", "bob", "", "before")).ConversationId
	block := &pb.ClientFrame{Body: &pb.ClientFrame_Block{Block: &pb.Block{UserId: "alice"}}}
	h.ok("bob", block)
	h.refused("alice", sendReq(textSend("after", "bob", "", "after")), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("alice", sendReq(textSend("by-id", "", conv, "by id")), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("alice", editReq(conv, 1, "edited"), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.send("bob", textSend("reply", "alice", "", "I can still write"))

	h.ok("bob", &pb.ClientFrame{Body: &pb.ClientFrame_Unblock{Unblock: &pb.Unblock{UserId: "alice"}}})
	h.send("alice", textSend("again", "bob", "", "again"))
	if got := texts(h.sync("bob", conv, 0, 100)); !slices.Equal(got, []string{"before", "I can still write", "again"}) {
		t.Fatalf("bob's conversation holds %q", got)
	}
}

// Malformed requests get the documented error codes and store nothing.
func TestBadRequestsGetTheirCodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{MaxFrameBytes: 1 << 10})
	for _, tc := range []struct {
		name string
		f    *pb.ClientFrame
		want pb.ErrorCode
	}{
		{"send with neither user nor conversation", sendReq(textSend("x", "", "", "hi")), pb.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"send with both user and conversation", sendReq(textSend("x", "bob", DirectID("alice", "bob"), "hi")), pb.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"send without client_msg_id", sendReq(textSend("", "bob", "", "hi")), pb.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"send to an invalid user id", sendReq(textSend("x", "no spaces allowed", "", "hi")), pb.ErrorCode_ERROR_CODE_BAD_REQUEST},
		{"send of a payload over the frame limit", sendReq(&pb.Send{ClientMsgId: "x", To: "bob", Payload: bytes.Repeat([]byte{'x'}, 1<<10+1)}), pb.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"send with an oversized content type", sendReq(&pb.Send{ClientMsgId: "x", To: "bob", ContentType: string(bytes.Repeat([]byte{'t'}, 65))}), pb.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"send into someone else's conversation", sendReq(textSend("x", "", DirectID("bob", "carol"), "hi")), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{"sync with an empty conversation id", &pb.ClientFrame{Body: &pb.ClientFrame_SyncMessages{SyncMessages: &pb.SyncMessages{}}}, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{"history with an empty conversation id", &pb.ClientFrame{Body: &pb.ClientFrame_History{History: &pb.History{}}}, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED},
		{"a frame without a body", &pb.ClientFrame{}, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME},
		{"a ping, which needs a connection", &pb.ClientFrame{Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}, pb.ErrorCode_ERROR_CODE_BAD_REQUEST},
	} {
		if got := h.call("alice", tc.f).GetError().GetCode(); got != tc.want {
			t.Errorf("%s: answered %v, want %v", tc.name, got, tc.want)
		}
	}
	if c := h.conversation("alice", DirectID("alice", "bob")); c != nil {
		t.Fatalf("refused sends stored messages (last seq %d)", c.LastSeq)
	}
}

// On a live connection a frame without a known body is answered
// UNKNOWN_FRAME and the connection is closed as a protocol error.
func TestUnknownFrameClosesTheConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	d := h.connect("alice", "phone")
	if r := d.request(&pb.ClientFrame{}); r.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME {
		t.Fatalf("a frame without a body answered %v, want UNKNOWN_FRAME", r)
	}
	d.wait(func() bool { return d.closed }, "the server to close the connection")
	var disc *pb.Disconnect
	for _, f := range d.frames() {
		if f.GetDisconnect() != nil {
			disc = f.GetDisconnect()
		}
	}
	if disc.GetCode() != pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR {
		t.Fatalf("disconnect %v, want PROTOCOL_ERROR", disc)
	}
}
