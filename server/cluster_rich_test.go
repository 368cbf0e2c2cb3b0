package server_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Rich messages across a cluster: a reaction made through one node reaches
// members on the others live and converges in their sync; a stream opened
// on one node shows its chunks on the others; a mention and a pin made
// through one node show in the conversation list read through another.
func TestClusterRichMessages(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	ctx := ctx10(t)
	if _, err := adminClient(nodes[0]).CreateUser(ctx, "cluster-bot", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient(nodes[1]).SetBot(ctx, "cluster-bot", true); err != nil {
		t.Fatal(err)
	}
	alice, _ := nodes[0].connect(t, "alice", "a1", "phone", transports[0])
	bob, bobRec := nodes[1].connect(t, "bob", "b1", "phone", transports[1])
	carol, carolRec := nodes[2].connect(t, "carol", "c1", "phone", transports[2])
	bot, _ := nodes[0].connect(t, "cluster-bot", "bot", "server", transports[0])
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob", "carol", "cluster-bot"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	msg, err := text(ctx, alice, conv, "@carol hello", func(s *pb.Send) { s.Mentions = []string{"carol"} })
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob and carol get the message", func() bool {
		return bySeq(bobRec.messages(), msg.Seq) != nil && bySeq(carolRec.messages(), msg.Seq) != nil
	})

	// Reactions through two nodes; every node's members converge live.
	if _, err := bob.React(ctx, conv, msg.Seq, "👍"); err != nil {
		t.Fatal(err)
	}
	last, err := carol.React(ctx, conv, msg.Seq, "👍")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"👍=2"}
	var bobView client.ReactionState
	eventually(t, "bob (node 1) sees carol's reaction (node 2) live", func() bool {
		for _, u := range bobRec.snapshot().reacts {
			bobView.Apply(u)
		}
		rs, v := bobView.Get(conv, msg.Seq)
		return v >= last.Version && slices.Equal(counts(rs), want)
	})
	rp, err := alice.SyncReactions(ctx, conv, 0, 0)
	if err != nil || len(rp.Updates) != 1 || !slices.Equal(counts(rp.Updates[0].Reactions), want) {
		t.Fatalf("alice's reaction sync on node 0: %v, %v", rp, err)
	}

	// A pin through node 1, read through node 2.
	if _, err := alice.Pin(ctx, conv, msg.Seq); err != nil {
		t.Fatal(err)
	}
	c := conversationOf(t, ctx, carol, conv)
	if len(c.Pins) != 1 || c.Pins[0].Seq != msg.Seq || c.UnreadMentions != 1 {
		t.Fatalf("carol on node 2: pins %v, %d unread mentions", c.Pins, c.UnreadMentions)
	}

	// A stream on node 0 shows on nodes 1 and 2.
	st, err := bot.OpenStream(ctx, &pb.StreamOpen{ConversationId: conv})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"across ", "the ", "cluster"} {
		if err := st.Append(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the chunks reach nodes 1 and 2", func() bool {
		return len(bobRec.snapshot().chunks) == 3 && len(carolRec.snapshot().chunks) == 3
	})
	var sb strings.Builder
	for _, ch := range carolRec.snapshot().chunks {
		sb.WriteString(ch.Text)
	}
	ack, err := st.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finished stream reaches node 2", func() bool {
		m := bySeq(carolRec.messages(), ack.Seq)
		return m != nil && string(m.Payload) == sb.String() && m.StreamId == st.ID
	})
}
