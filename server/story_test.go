package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The "done when", as one story: three users on different transports
// create a group, chat, recall, edit, see read counts and typing; one goes
// offline and converges after sync.
func TestGroupStory(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	dial := func(uid string, tc transportCase) (*client.Client, *recorder) {
		return ts.connect(t, uid, uid+"-1", "phone", tc)
	}
	alice, recA := dial("alice", transports[0]) // WebSocket, protobuf
	bob, recB := dial("bob", transports[1])     // WebSocket, JSON
	carol, recC := dial("carol", transports[2]) // TCP

	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "story", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	hello, err := alice.SendToConversation(ctx, conv, "text", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.SendToConversation(ctx, conv, "text", []byte("hi alice")); err != nil {
		t.Fatal(err)
	}
	// Typing reaches the others.
	if err := carol.Typing(ctx, conv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "typing shown to alice and bob", func() bool {
		return len(recA.typings()) == 1 && len(recB.typings()) == 1 && len(recC.typings()) == 0
	})

	// Carol goes offline; meanwhile alice edits, bob recalls, everyone reads.
	carol.Close()
	if _, err := alice.Edit(ctx, conv, hello.Seq, "text", []byte("hello, edited")); err != nil {
		t.Fatal(err)
	}
	oops, err := bob.SendToConversation(ctx, conv, "text", []byte("oops"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Recall(ctx, conv, oops.Seq); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{alice, bob} {
		if err := c.MarkRead(ctx, conv, oops.Seq); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "read counts", func() bool {
		rc, err := alice.ReadCounts(ctx, conv, hello.Seq)
		return err == nil && len(rc.Counts) == 1 && rc.Counts[0].Count == 1 && len(rc.Counts[0].Readers) == 1 && rc.Counts[0].Readers[0] == "bob"
	})

	// Online members saw the other's edit or recall as events (the device
	// that made a change gets its ACK instead), in seq order.
	hasKind := func(r *recorder, k pb.MessageKind) func() bool {
		return func() bool {
			var last uint64
			found := false
			for _, m := range r.messages() {
				if m.Seq <= last {
					return false
				}
				last = m.Seq
				found = found || m.Kind == k
			}
			return found
		}
	}
	eventually(t, "alice sees bob's recall", hasKind(recA, pb.MessageKind_MESSAGE_KIND_RECALL))
	eventually(t, "bob sees alice's edit", hasKind(recB, pb.MessageKind_MESSAGE_KIND_EDIT))

	// Carol comes back and converges: same sequence, the edit applied, the recall applied.
	carol2, _ := dial("carol", transports[2])
	convs, err := carol2.AllConversations(ctx)
	if err != nil || len(convs) != 1 || convs[0].UnreadCount == 0 {
		t.Fatalf("carol's conversations: %v %v", convs, err)
	}
	all := syncAll(t, carol2, conv)
	if uint64(len(all)) != convs[0].LastSeq {
		t.Fatalf("carol synced %d entries, last seq %d", len(all), convs[0].LastSeq)
	}
	byseq := map[uint64]*pb.Message{}
	for i, m := range all {
		if m.Seq != uint64(i+1) {
			t.Fatalf("gap or disorder at %d: seq %d", i, m.Seq)
		}
		byseq[m.Seq] = m
	}
	if m := byseq[hello.Seq]; string(m.Payload) != "hello, edited" || m.EditedAt == 0 {
		t.Fatalf("edited message as synced: %v", m)
	}
	if m := byseq[oops.Seq]; !m.Recalled || len(m.Payload) != 0 {
		t.Fatalf("recalled message as synced: %v", m)
	}
	if recC.count() == 0 {
		t.Fatal("carol received nothing while online")
	}
	if err := carol2.MarkRead(ctx, conv, convs[0].LastSeq); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	eventually(t, "read by both others", func() bool {
		rc, err := alice.ReadCounts(ctx2, conv, hello.Seq)
		return err == nil && rc.Counts[0].Count == 2
	})
}
