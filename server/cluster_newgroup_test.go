package server_test

import (
	"fmt"
	"testing"
	"time"
)

// A message sent into a group at once after the group was made through
// another node reaches every member live, on every node: a node starts
// watching the group for its members when it hears of the change, and NATS
// carries that interest to the sender's NATS server a moment later, so a
// first message sent in that moment must not depend on it. The nodes are
// processes of their own, as in a deployment (in one process the moment was
// never seen to be long enough).
func TestClusterFirstMessageOfANewGroup(t *testing.T) {
	t.Parallel()
	children := startClusterChildren(t, 3)
	nodes := make([]*testServer, len(children))
	for i, nd := range children {
		nodes[i] = &testServer{httpBase: nd.http, wsURL: nd.ws, tcpAddr: nd.tcp}
	}
	ctx := ctx10(t)
	for i := range 15 {
		// Fresh users each round, connected just before, as a new app user
		// would be: their nodes' interests are new too.
		a, b, c := fmt.Sprintf("alice%d", i), fmt.Sprintf("bob%d", i), fmt.Sprintf("carol%d", i)
		alice, _ := dialObserved(t, nodes[0], a, "a1", "phone")
		_, ob := dialObserved(t, nodes[1], b, "b1", "phone")
		_, oc := dialObserved(t, nodes[2], c, "c1", "phone")
		g, err := adminClient(nodes[2]).CreateGroup(ctx, groupSpec(a, b, c))
		if err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf("first %d", i)
		if _, err := alice.SendToConversation(ctx, g.ConversationId, "text/plain", []byte(text)); err != nil {
			t.Fatal(err)
		}
		wantOne(t, "bob (node 2)", ob, g.ConversationId, text)
		wantOne(t, "carol (node 3)", oc, g.ConversationId, text)
	}
}

// wantOne waits until o has received exactly the message text in conv.
func wantOne(t *testing.T, who string, o *recorder, conv, text string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(o.texts(conv)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := o.texts(conv); len(got) != 1 || got[0] != text {
		t.Fatalf("%s: %q in %s, want just %q", who, got, conv, text)
	}
}
