package server_test

import (
	"errors"
	"testing"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// groupRequests builds every request that targets a conversation, named.
func groupRequests(conv string) map[string]*pb.ClientFrame {
	name, yes := "x", true
	return map[string]*pb.ClientFrame{
		"send":              {Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "authz-" + conv, ConversationId: conv, Payload: []byte("x")}}},
		"syncMessages":      {Body: &pb.ClientFrame_SyncMessages{SyncMessages: &pb.SyncMessages{ConversationId: conv}}},
		"history":           {Body: &pb.ClientFrame_History{History: &pb.History{ConversationId: conv}}},
		"delivered":         {Body: &pb.ClientFrame_Delivered{Delivered: &pb.DeliveredAck{ConversationId: conv, Seq: 1}}},
		"read":              {Body: &pb.ClientFrame_Read{Read: &pb.ReadAck{ConversationId: conv, Seq: 1}}},
		"updateGroup":       {Body: &pb.ClientFrame_UpdateGroup{UpdateGroup: &pb.UpdateGroup{ConversationId: conv, Name: &name, OpenJoin: &yes}}},
		"addMembers":        {Body: &pb.ClientFrame_AddMembers{AddMembers: &pb.AddMembers{ConversationId: conv, UserIds: []string{"zed"}}}},
		"removeMember":      {Body: &pb.ClientFrame_RemoveMember{RemoveMember: &pb.RemoveMember{ConversationId: conv, UserId: "bob"}}},
		"joinGroup":         {Body: &pb.ClientFrame_JoinGroup{JoinGroup: &pb.JoinGroup{ConversationId: conv}}},
		"leaveGroup":        {Body: &pb.ClientFrame_LeaveGroup{LeaveGroup: &pb.LeaveGroup{ConversationId: conv}}},
		"setRole":           {Body: &pb.ClientFrame_SetRole{SetRole: &pb.SetRole{ConversationId: conv, UserId: "bob", Role: pb.GroupRole_GROUP_ROLE_ADMIN}}},
		"muteMember":        {Body: &pb.ClientFrame_MuteMember{MuteMember: &pb.MuteMember{ConversationId: conv, UserId: "bob", DurationSeconds: 60}}},
		"transferOwnership": {Body: &pb.ClientFrame_TransferOwnership{TransferOwnership: &pb.TransferOwnership{ConversationId: conv, UserId: "bob"}}},
		"dissolveGroup":     {Body: &pb.ClientFrame_DissolveGroup{DissolveGroup: &pb.DissolveGroup{ConversationId: conv}}},
		"getGroup":          {Body: &pb.ClientFrame_GetGroup{GetGroup: &pb.GetGroup{ConversationId: conv}}},
		"listMembers":       {Body: &pb.ClientFrame_ListMembers{ListMembers: &pb.ListMembers{ConversationId: conv}}},
		"recall":            {Body: &pb.ClientFrame_Recall{Recall: &pb.Recall{ConversationId: conv, Seq: 2}}},
		"edit":              {Body: &pb.ClientFrame_Edit{Edit: &pb.Edit{ConversationId: conv, Seq: 2, Payload: []byte("y")}}},
		"deleteForMe":       {Body: &pb.ClientFrame_DeleteForMe{DeleteForMe: &pb.DeleteForMe{ConversationId: conv, Seqs: []uint64{2}}}},
		"readCounts":        {Body: &pb.ClientFrame_ReadCounts{ReadCounts: &pb.ReadCounts{ConversationId: conv, Seqs: []uint64{2}}}},
		"typing":            {Body: &pb.ClientFrame_Typing{Typing: &pb.Typing{ConversationId: conv}}},
		"setConversation":   {Body: &pb.ClientFrame_SetConversation{SetConversation: &pb.SetConversation{ConversationId: conv, Pinned: &yes}}},
	}
}

func code(r *pb.ServerFrame, err error) string {
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) {
			return e.Code.String()
		}
		return "error: " + err.Error()
	}
	switch r.Body.(type) {
	case *pb.ServerFrame_Error:
		return r.GetError().Code.String()
	default:
		return "ok"
	}
}

// Every conversation command, run by outsiders of every kind against a group
// that exists and one that does not: each outsider is refused with the same
// code for both, so no answer tells whether the group exists.
func TestAuthorizationTable(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctx10(t)
	owner, _ := ts.connect(t, "owner", "o1", "phone", transports[0])
	g, err := owner.CreateGroup(ctx, &pb.CreateGroup{Name: "private", UserIds: []string{"bob", "removed", "muted"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	if _, err := owner.SendToConversation(ctx, conv, "text", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if err := owner.RemoveMember(ctx, conv, "removed"); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.SendToConversation(ctx, conv, "text", []byte("after removal")); err != nil {
		t.Fatal(err)
	}
	if err := owner.MuteMember(ctx, conv, "muted", 3600); err != nil {
		t.Fatal(err)
	}
	missing := "g:0123456789abcdef"
	denied := pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED.String()

	// What each kind of outsider may still do (everything else: denied).
	allowed := map[string]map[string]string{
		// A stranger may only ask to join, which a closed group refuses like a missing one.
		"stranger": {},
		// A removed member still reads up to their removal.
		"removed": {"syncMessages": "ok", "history": "ok", "delivered": "ok", "read": "ok", "getGroup": "ok",
			"readCounts": "ok", "deleteForMe": "ok", "setConversation": "ok"},
	}
	for who, ok := range allowed {
		for _, tc := range transports {
			t.Run(who+"/"+tc.name, func(t *testing.T) {
				c, _ := ts.connect(t, who, "d-"+tc.name, tc.name, tc)
				for name, f := range groupRequests(conv) {
					got := code(c.Do(ctx, f))
					want := denied
					if w, in := ok[name]; in {
						want = w
					}
					if got != want {
						t.Errorf("%s on the group: %s, want %s", name, got, want)
					}
				}
				for name, f := range groupRequests(missing) {
					if got := code(c.Do(ctx, f)); got != denied {
						t.Errorf("%s on a missing group: %s, want %s (no hint of existence)", name, got, denied)
					}
				}
			})
		}
	}
	// A removed member reads nothing written after the removal.
	removed, _ := ts.connect(t, "removed", "r9", "r9", transports[1])
	msgs := syncAll(t, removed, conv)
	for _, m := range msgs {
		if string(m.Payload) == "after removal" {
			t.Fatal("a removed member read a message written after the removal")
		}
	}
	// A muted member: sends refused with MUTED; reading still works.
	muted, _ := ts.connect(t, "muted", "m1", "m1", transports[2])
	_, err = muted.SendToConversation(ctx, conv, "text", []byte("hi"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MUTED)
	if _, err := muted.History(ctx, conv, 0, 10); err != nil {
		t.Fatalf("muted member cannot read: %v", err)
	}
	// A plain member cannot manage the group.
	bob, _ := ts.connect(t, "bob", "b1", "b1", transports[0])
	for _, name := range []string{"updateGroup", "setRole", "muteMember", "transferOwnership", "dissolveGroup"} {
		f := groupRequests(conv)[name]
		if name == "setRole" || name == "muteMember" || name == "transferOwnership" {
			continue // bob targeting himself is a bad request; covered in TestGroupLifecycle
		}
		if got := code(bob.Do(ctx, f)); got != denied {
			t.Errorf("member %s: %s, want %s", name, got, denied)
		}
	}
}
