package server_test

import (
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A shadow-muted user's messages reach only themselves: their own devices
// get them live and in history (as ordinary messages); nobody else gets
// them live, in sync, history, the conversation list, unread counts or
// typing, and cannot report them. Lifting it lets new messages through.
func TestShadowMute(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	admin := adminClient(ts)
	if _, err := admin.CreateUser(ctx, "alice", ""); err != nil {
		t.Fatal(err)
	}
	bob, bobRec := ts.connect(t, "bob", "b1", "phone", transports[0])
	carol, carolRec := ts.connect(t, "carol", "c1", "phone", transports[1])
	dave, _ := ts.connect(t, "dave", "d1", "phone", transports[2])
	alice0, _ := ts.connect(t, "alice", "a0", "phone", transports[0])
	before, err := sendTo(ctx, alice0, "bob", "hi bob")
	if err != nil {
		t.Fatal(err)
	}
	g, err := alice0.CreateGroup(ctx, &pb.CreateGroup{Name: "club", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}

	if err := admin.SetShadowMuted(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if u, err := admin.GetUser(ctx, "alice"); err != nil || u == nil {
		t.Fatal(err)
	}
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	_, alice2Rec := ts.connect(t, "alice", "a2", "desktop", transports[1])
	direct, err := sendTo(ctx, alice, "bob", "buy followers")
	if err != nil {
		t.Fatalf("a shadow-muted send: %v", err)
	}
	group, err := alice.Send(ctx, &pb.Send{ConversationId: g.ConversationId, ContentType: "text", Payload: []byte("cheap pills")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sendTo(ctx, alice, "dave", "hello stranger"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Typing(ctx, before.ConversationId); err != nil {
		t.Fatal(err)
	}
	// Her other device has them, as ordinary messages.
	eventually(t, "alice's other device gets her messages", func() bool { return alice2Rec.count() >= 3 })
	for _, m := range alice2Rec.messages() {
		if m.SenderOnly || m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL {
			t.Errorf("alice's device got %v", m)
		}
	}
	time.Sleep(300 * time.Millisecond) // anything routed to the others has arrived by now
	for who, rec := range map[string]*recorder{"bob": bobRec, "carol": carolRec} {
		for _, m := range rec.messages() {
			if m.From == "alice" && m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL && string(m.Payload) != "hi bob" {
				t.Errorf("%s got %v", who, m)
			}
		}
	}
	if n := len(bobRec.typings()); n != 0 {
		t.Errorf("bob got %d typing events", n)
	}

	for _, c := range []struct {
		who  *client.Client
		conv string
		n    int
	}{{bob, before.ConversationId, 1}, {carol, g.ConversationId, 1}, {bob, g.ConversationId, 1}} {
		page, err := c.who.SyncMessages(ctx, c.conv, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if m.From == "alice" && m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL && m.Seq >= direct.Seq && c.conv == before.ConversationId {
				t.Errorf("sync of %s shows %v", c.conv, m)
			}
			if string(m.Payload) == "buy followers" || string(m.Payload) == "cheap pills" {
				t.Errorf("sync of %s shows %q", c.conv, m.Payload)
			}
		}
		hist, err := c.who.History(ctx, c.conv, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range hist.Messages {
			if string(m.Payload) == "buy followers" || string(m.Payload) == "cheap pills" {
				t.Errorf("history of %s shows %q", c.conv, m.Payload)
			}
		}
	}
	convs, err := bob.AllConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		if c.UnreadCount > 0 && c.ConversationId == before.ConversationId && c.UnreadCount != 1 {
			t.Errorf("bob's unread in %s: %d", c.ConversationId, c.UnreadCount)
		}
		if lm := c.LastMessage; lm != nil && (string(lm.Payload) == "buy followers" || string(lm.Payload) == "cheap pills") {
			t.Errorf("bob's list shows %q as a last message", lm.Payload)
		}
	}
	daveConvs, err := dave.AllConversations(ctx)
	if err != nil || len(daveConvs) != 0 {
		t.Errorf("dave's conversation list: %v, %v; want none (alice's message reached only her)", daveConvs, err)
	}
	if err := bob.ReportMessage(ctx, direct.ConversationId, direct.Seq, "spam", ""); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("bob reports a message he never got: %v", err)
	}

	// Alice sees them in her history, as ordinary messages.
	mine, err := alice.History(ctx, direct.ConversationId, 0, 100)
	if err != nil || len(mine.Messages) != 2 || string(mine.Messages[1].Payload) != "buy followers" || mine.Messages[1].SenderOnly {
		t.Errorf("alice's history: %v, %v", mine, err)
	}
	if gm, err := alice.History(ctx, group.ConversationId, 0, 100); err != nil || string(gm.Messages[len(gm.Messages)-1].Payload) != "cheap pills" {
		t.Errorf("alice's group history: %v, %v", gm, err)
	}
	// She may edit what only she has, not what others have.
	if _, err := alice.Edit(ctx, direct.ConversationId, direct.Seq, "text", []byte("buy more followers")); err != nil {
		t.Errorf("editing her own hidden message: %v", err)
	}
	if _, err := alice.Edit(ctx, before.ConversationId, before.Seq, "text", []byte("hi bob, buy followers")); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_CONFLICT) {
		t.Errorf("editing a message bob has: %v", err)
	}

	if err := admin.SetShadowMuted(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	alice3, _ := ts.connect(t, "alice", "a3", "phone", transports[0])
	if _, err := sendTo(ctx, alice3, "bob", "sorry"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets alice's message once she is no longer muted", func() bool {
		ms := bobRec.messages()
		return len(ms) > 0 && string(ms[len(ms)-1].Payload) == "sorry"
	})
}
