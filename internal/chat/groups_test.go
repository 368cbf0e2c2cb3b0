package chat

import (
	"slices"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Creating a group, adding, removing and leaving: only the owner (or an
// admin) removes; a removed member is told, can no longer send, gets no
// later message live and reads nothing said after the removal; a member who
// left cannot send either; the owner cannot leave without handing over.
func TestGroupMembership(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	carolDev := h.connect("carol", "phone")
	conv := h.createGroup("alice", &pb.CreateGroup{Name: "trip", UserIds: []string{"bob", "carol"}})
	info := h.ok("alice", &pb.ClientFrame{Body: &pb.ClientFrame_GetGroup{GetGroup: &pb.GetGroup{ConversationId: conv}}}).GetGroup()
	if info.Owner != "alice" || info.MemberCount != 3 || info.Name != "trip" {
		t.Fatalf("new group %v", info)
	}
	for _, uid := range []string{"alice", "bob", "carol"} {
		h.send(uid, textSend("hi-"+uid, "", conv, "hi from "+uid))
	}

	h.refused("bob", removeReq(conv, "carol"), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.ok("alice", removeReq(conv, "carol"))
	carolDev.waitMessage("her removal", func(m *pb.Message) bool {
		return m.Kind == pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED && slices.Contains(m.GetEvent().GetUserIds(), "carol")
	})
	after := h.send("alice", textSend("after", "", conv, "after carol left"))
	h.refused("carol", sendReq(textSend("still", "", conv, "still here?")), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)

	// What carol reads ends at her removal, by sync and by history.
	p := h.sync("carol", conv, 0, 100)
	if last := p.Messages[len(p.Messages)-1]; last.Kind != pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED || last.Seq >= after.Seq || p.LastSeq >= after.Seq {
		t.Fatalf("carol syncs up to %v (last seq %d); the message after her removal is %d", last, p.LastSeq, after.Seq)
	}
	if got := texts(p); !slices.Equal(got, []string{"hi from alice", "hi from bob", "hi from carol"}) {
		t.Fatalf("carol reads %q", got)
	}
	hp := h.history("carol", conv, 0, 100)
	if messageAt(hp.Messages, after.Seq) != nil || hp.LastSeq >= after.Seq {
		t.Fatalf("carol's history reaches past her removal: last seq %d", hp.LastSeq)
	}
	// Nor is it pushed to her: a 1:1 message sent after it reaches her
	// connection behind anything queued before it.
	h.send("alice", textSend("ping", "carol", "", "ping"))
	carolDev.waitMessage("alice's 1:1 message", func(m *pb.Message) bool { return m.ClientMsgId == "ping" })
	for _, m := range carolDev.messages() {
		if m.ConversationId == conv && m.Seq >= after.Seq {
			t.Fatalf("carol got %v after her removal", m)
		}
	}

	// Adding and leaving.
	h.ok("alice", addReq(conv, "dave"))
	h.send("dave", textSend("d1", "", conv, "hello all"))
	h.ok("dave", leaveReq(conv))
	h.refused("dave", sendReq(textSend("d2", "", conv, "one more")), pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	h.refused("alice", leaveReq(conv), pb.ErrorCode_ERROR_CODE_CONFLICT)
	info = h.ok("bob", &pb.ClientFrame{Body: &pb.ClientFrame_GetGroup{GetGroup: &pb.GetGroup{ConversationId: conv}}}).GetGroup()
	if info.MemberCount != 2 {
		t.Fatalf("after carol's removal and dave's leaving the group has %d members, want 2", info.MemberCount)
	}
	if got := texts(h.sync("bob", conv, after.Seq-1, 100)); !slices.Equal(got, []string{"after carol left", "hello all"}) {
		t.Fatalf("bob reads %q since carol's removal", got)
	}
}

// A member removed and added again reads, under "since join" (also the
// default), only what was said after they were added back; under "all"
// they read the whole history.
func TestHistoryVisibilityForReAddedMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		vis  pb.HistoryVisibility
		want []string
	}{
		{pb.HistoryVisibility_HISTORY_VISIBILITY_UNSPECIFIED, []string{"back"}},
		{pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN, []string{"back"}},
		{pb.HistoryVisibility_HISTORY_VISIBILITY_ALL, []string{"before", "while out", "back"}},
	} {
		t.Run(tc.vis.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, Config{})
			conv := h.createGroup("alice", &pb.CreateGroup{Name: "h", UserIds: []string{"bob", "dave"}, HistoryVisibility: tc.vis})
			h.send("alice", textSend("1", "", conv, "before"))
			h.ok("alice", removeReq(conv, "dave"))
			h.send("alice", textSend("2", "", conv, "while out"))
			h.ok("alice", addReq(conv, "dave"))
			h.send("alice", textSend("3", "", conv, "back"))
			if got := texts(h.sync("dave", conv, 0, 100)); !slices.Equal(got, tc.want) {
				t.Errorf("re-added dave syncs %q, want %q", got, tc.want)
			}
			if got := texts(h.history("dave", conv, 0, 100)); !slices.Equal(got, tc.want) {
				t.Errorf("re-added dave's history is %q, want %q", got, tc.want)
			}
			if got := texts(h.sync("bob", conv, 0, 100)); !slices.Equal(got, []string{"before", "while out", "back"}) {
				t.Errorf("bob, a member throughout, reads %q", got)
			}
		})
	}
}
