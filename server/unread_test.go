package server_test

import (
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Unread counts are messages from others after the read cursor: not the
// group's events (creation, members, edits), not one's own messages.
func TestUnreadCountsMessagesNotEvents(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	adm := adminClient(ts)
	g, err := adm.CreateGroup(ctx, groupSpec("alice", "bob", "carol"))
	if err != nil {
		t.Fatal(err)
	}
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	var last *pb.SendAck
	for _, text := range []string{"one", "two"} {
		if last, err = alice.Send(ctx, &pb.Send{ClientMsgId: text, ConversationId: g.ConversationId, ContentType: "text", Payload: []byte(text)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Do(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Edit{Edit: &pb.Edit{ConversationId: g.ConversationId, Seq: last.Seq, ContentType: "text", Payload: []byte("two!")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Send(ctx, &pb.Send{ClientMsgId: "b", ConversationId: g.ConversationId, Payload: []byte("mine")}); err != nil {
		t.Fatal(err)
	}
	unread := func(uid string) uint64 {
		t.Helper()
		list, err := adm.Conversations(ctx, uid, 10)
		if err != nil || len(list.Conversations) != 1 {
			t.Fatalf("%s's conversations: %v %v", uid, list, err)
		}
		return list.Conversations[0].UnreadCount
	}
	// carol: creation, two messages, an edit, bob's message → 3 unread messages.
	if n := unread("carol"); n != 3 {
		t.Fatalf("carol's unread = %d, want 3 (events do not count)", n)
	}
	// bob's own send moves his read cursor past everything before it
	// (cursors are written within 100 ms).
	eventually(t, "bob's unread to be 0", func() bool { return unread("bob") == 0 })
}
