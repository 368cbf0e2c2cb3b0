package server_test

import (
	"fmt"
	"slices"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// On PostgreSQL a message is searchable once acknowledged, from any node
// (the database searches; no index follows a log): found through node 2
// right after node 1 stored it, and its edit and recall likewise at once.
func TestClusterSearchAcrossNodes(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 2, nil)
	tc := transports[0]
	ctx := ctx10(t)
	alice, _ := nodes[0].connect(t, "alice", "a1", "cli", tc)
	bob, _ := nodes[1].connect(t, "bob", "b1", "cli", tc)

	expect := func(query string, want ...string) {
		t.Helper()
		got := found(t, bob, &pb.Search{Query: query})
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("search %q through node 2: %v, want %v", query, got, want)
		}
	}
	ack, err := alice.SendText(ctx, "bob", "Meet at the Harbour Café, 東京タワー later")
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("%s#%d", ack.ConversationId, ack.Seq)
	expect("harbour cafe", ref)
	expect("タワー", ref)
	expect("lighthouse")

	if _, err := alice.Edit(ctx, ack.ConversationId, ack.Seq, "text/plain", []byte("meet at the lighthouse")); err != nil {
		t.Fatal(err)
	}
	expect("lighthouse", ref)
	expect("harbour")
	if _, err := alice.Recall(ctx, ack.ConversationId, ack.Seq); err != nil {
		t.Fatal(err)
	}
	expect("lighthouse")
}
