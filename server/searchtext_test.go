package server_test

import (
	"strings"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Send.search_text (the plain text an app lets the server search beside a
// payload it cannot read) is stored and replaced by an edit, and never sent
// back to clients: not live, not in a page.
func TestSearchTextStoredNotSent(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tc := transports[0]
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	bob, rec := ts.connect(t, "bob", "b1", "cli", tc)
	ctx := ctx10(t)

	send := func(id, text string) (*pb.ServerFrame, error) {
		return alice.Do(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: &pb.Send{
			ClientMsgId: id, To: "bob", ContentType: "application/x-sealed", Payload: []byte{0xde, 0xad}, SearchText: text}}})
	}
	f, err := send("m1", "meet at the old mill")
	if err != nil {
		t.Fatal(err)
	}
	conv, seq := f.GetSendAck().ConversationId, f.GetSendAck().Seq
	if _, err := send("m2", strings.Repeat("x", 4097)); errCode(err) != pb.ErrorCode_ERROR_CODE_TOO_LARGE {
		t.Fatalf("search text over 4,096 bytes: %v, want TOO_LARGE", err)
	}

	eventually(t, "bob receives the message", func() bool { return rec.count() == 1 })
	if got := rec.messages()[0]; got.SearchText != "" || len(got.Payload) != 2 {
		t.Fatalf("live delivery carries search text: %v", got)
	}
	page, err := bob.SyncMessages(ctx, conv, 0, 10)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].SearchText != "" {
		t.Fatalf("a page carries search text: %v %v", page, err)
	}
	stored := func() string {
		p, err := adminClient(ts).Messages(ctx, conv, 0, true, 10)
		if err != nil || len(p.Messages) == 0 {
			t.Fatalf("admin history: %v %v", p, err)
		}
		return p.Messages[0].SearchText
	}
	if got := stored(); got != "meet at the old mill" {
		t.Fatalf("stored search text %q", got)
	}

	_, err = alice.Do(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Edit{Edit: &pb.Edit{
		ConversationId: conv, Seq: seq, ContentType: "application/x-sealed", Payload: []byte{1}, SearchText: "meet at the new mill", ClientMsgId: "e1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := stored(); got != "meet at the new mill" {
		t.Fatalf("search text after the edit %q", got)
	}
	eventually(t, "bob receives the edit", func() bool { return rec.count() == 2 })
	if got := rec.messages()[1]; got.SearchText != "" {
		t.Fatalf("the edit event carries search text: %v", got)
	}
}
