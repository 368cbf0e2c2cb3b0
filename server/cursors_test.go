package server_test

import (
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A read or delivered ACK beyond a conversation's last seq moves the cursor
// only to the last seq, over a socket and over HTTP: later messages are
// unread for the reader and unread for the sender's receipts.
func TestCursorsClampToLastSeq(t *testing.T) {
	t.Parallel()
	const huge = ^uint64(0)
	ts := startServer(t, nil)
	ctx := ctx10(t)
	adm := adminClient(ts)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")

	// 1:1 over a socket.
	first, err := alice.SendText(ctx, "bob", "one")
	if err != nil {
		t.Fatal(err)
	}
	direct := first.ConversationId
	if err := bob.MarkDelivered(ctx, direct, huge); err != nil {
		t.Fatal(err)
	}
	if err := bob.MarkRead(ctx, direct, huge); err != nil {
		t.Fatal(err)
	}

	// A group over HTTP (POST /v1/rpc).
	g, err := adm.CreateGroup(ctx, groupSpec("alice", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	gFirst, err := alice.Send(ctx, &pb.Send{ClientMsgId: "g1", ConversationId: g.ConversationId, Payload: []byte("hi")})
	if err != nil {
		t.Fatal(err)
	}
	bobTok := ts.mint(t, "bob")
	for _, f := range []*pb.ClientFrame{
		{Body: &pb.ClientFrame_Delivered{Delivered: &pb.DeliveredAck{ConversationId: g.ConversationId, Seq: huge}}},
		{Body: &pb.ClientFrame_Read{Read: &pb.ReadAck{ConversationId: g.ConversationId, Seq: huge}}},
	} {
		if status, body := rpc(t, ts, bobTok, f); status != 200 {
			t.Fatalf("cursor over HTTP: %d %s", status, body)
		}
	}

	conv := func(uid, id string) *pb.Conversation {
		t.Helper()
		list, err := adm.Conversations(ctx, uid, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Conversations {
			if c.ConversationId == id {
				return c
			}
		}
		t.Fatalf("%s has no conversation %s", uid, id)
		return nil
	}
	// Cursors are written within 100 ms (delivered-only group moves within 1 s).
	eventually(t, "bob's cursors to be stored", func() bool {
		d, gc := conv("bob", direct), conv("bob", g.ConversationId)
		return d.ReadSeq != 0 && d.DeliveredSeq != 0 && gc.ReadSeq != 0 && gc.DeliveredSeq != 0
	})
	if d := conv("bob", direct); d.ReadSeq != first.Seq || d.DeliveredSeq != first.Seq {
		t.Fatalf("bob's 1:1 cursors = delivered %d read %d, want both %d (the last seq)", d.DeliveredSeq, d.ReadSeq, first.Seq)
	}
	if gc := conv("bob", g.ConversationId); gc.ReadSeq != gFirst.Seq || gc.DeliveredSeq != gFirst.Seq {
		t.Fatalf("bob's group cursors = delivered %d read %d, want both %d (the last seq)", gc.DeliveredSeq, gc.ReadSeq, gFirst.Seq)
	}

	// Messages after the bogus ACK are unread for bob and not read for alice.
	second, err := alice.SendText(ctx, "bob", "two")
	if err != nil {
		t.Fatal(err)
	}
	gSecond, err := alice.Send(ctx, &pb.Send{ClientMsgId: "g2", ConversationId: g.ConversationId, Payload: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	if c := conv("bob", direct); c.UnreadCount != 1 {
		t.Fatalf("bob's 1:1 unread after a new message = %d, want 1", c.UnreadCount)
	}
	if c := conv("bob", g.ConversationId); c.UnreadCount != 1 {
		t.Fatalf("bob's group unread after a new message = %d, want 1", c.UnreadCount)
	}
	if c := conv("alice", direct); c.PeerReadSeq >= second.Seq || c.PeerDeliveredSeq >= second.Seq {
		t.Fatalf("alice sees bob's cursors at delivered %d read %d, past her new message %d", c.PeerDeliveredSeq, c.PeerReadSeq, second.Seq)
	}
	counts, err := alice.ReadCounts(ctx, g.ConversationId, gSecond.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts.Counts) != 1 || counts.Counts[0].Count != 0 {
		t.Fatalf("read count of a message nobody read = %v, want 0", counts.Counts)
	}
}

// The receipt a 1:1 peer gets at once carries the clamped seq too: a read
// ACK of 2^64-1 does not show the peer every later message as read.
func TestLiveReceiptsClampToLastSeq(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, rec := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[0])
	ack, err := alice.SendText(ctx, "bob", "one")
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.MarkRead(ctx, ack.ConversationId, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	var got *pb.Receipt
	eventually(t, "alice to get bob's read receipt", func() bool {
		for _, r := range rec.snapshot().receipts {
			if r.UserId == "bob" && r.ReadSeq != 0 {
				got = r
				return true
			}
		}
		return false
	})
	if got.ReadSeq != ack.Seq || got.DeliveredSeq != ack.Seq {
		t.Fatalf("receipt read %d delivered %d, want both %d (the last seq)", got.ReadSeq, got.DeliveredSeq, ack.Seq)
	}
}
