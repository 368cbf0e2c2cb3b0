package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

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
		"fileUrl":           {Body: &pb.ClientFrame_FileUrl{FileUrl: &pb.FileUrl{FileId: "0123456789abcdef0123456789abcdef", ConversationId: conv, Seq: 2}}},
		"react":             {Body: &pb.ClientFrame_React{React: &pb.React{ConversationId: conv, Seq: 2, Emoji: "👍"}}},
		"syncReactions":     {Body: &pb.ClientFrame_SyncReactions{SyncReactions: &pb.SyncReactions{ConversationId: conv}}},
		"pin":               {Body: &pb.ClientFrame_Pin{Pin: &pb.Pin{ConversationId: conv, Seq: 2}}},
		"threadHistory":     {Body: &pb.ClientFrame_ThreadHistory{ThreadHistory: &pb.ThreadHistory{ConversationId: conv, RootSeq: 2}}},
		"reply":             {Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "authz-r-" + conv, ConversationId: conv, Payload: []byte("x"), ReplyTo: 2, Mentions: []string{"owner"}}}},
		// End-to-end encryption (e2ee_test.go): an outsider learns nothing
		// of a group's MLS state, nor whether it is encrypted.
		"mlsCommit":     {Body: &pb.ClientFrame_MlsCommit{MlsCommit: &pb.MlsCommit{ClientMsgId: "authz-c-" + conv, ConversationId: conv, Commit: mlsPublicCommit(conv, 0, 0, "x")}}},
		"getMlsState":   {Body: &pb.ClientFrame_GetMlsState{GetMlsState: &pb.GetMlsState{ConversationId: conv}}},
		"addMembersMLS": {Body: &pb.ClientFrame_AddMembers{AddMembers: &pb.AddMembers{ConversationId: conv, UserIds: []string{"zed"}, MlsCommit: mlsPublicCommit(conv, 0, 0, "x")}}},
		"sendMLS":       {Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "authz-m-" + conv, ConversationId: conv, ContentType: "message/mls", Payload: mlsPrivate(conv, 0, 1, []byte("c"))}}},
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
	t.Parallel()
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
			"readCounts": "ok", "deleteForMe": "ok", "setConversation": "ok", "syncReactions": "ok", "threadHistory": "ok",
			"getMlsState": "ok"},
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
	// The same table over HTTP (POST /v1/rpc with the user's token).
	for who, ok := range allowed {
		t.Run(who+"/http", func(t *testing.T) {
			tok := ts.mint(t, who)
			for _, target := range []string{conv, missing} {
				for name, f := range groupRequests(target) {
					status, body := rpc(t, ts, tok, f)
					want := http.StatusForbidden
					if w, in := ok[name]; in && target == conv && w == "ok" {
						want = http.StatusOK
					}
					if status != want {
						t.Errorf("%s on %s over HTTP: %d %s, want %d", name, target, status, body, want)
					}
					if want == http.StatusForbidden && !strings.Contains(body, `"permission_denied"`) {
						t.Errorf("%s over HTTP: body %s", name, body)
					}
				}
			}
		})
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

// rpc posts one frame to /v1/rpc as the token's user.
func rpc(t *testing.T, ts *testServer, token string, f *pb.ClientFrame) (int, string) {
	t.Helper()
	b, err := protojson.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	code, out := httpDo(t, http.MethodPost, ts.httpBase+"/v1/rpc", bearer(token), b)
	return code, string(out)
}

// Every command works over HTTP for the user's own token.
func TestRPCOverHTTP(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tok := ts.mint(t, "alice")
	status, body := rpc(t, ts, tok, &pb.ClientFrame{Body: &pb.ClientFrame_CreateGroup{CreateGroup: &pb.CreateGroup{Name: "from curl", UserIds: []string{"bob"}}}})
	if status != 200 || !strings.Contains(body, `"group"`) {
		t.Fatalf("create group over HTTP: %d %s", status, body)
	}
	var g pb.ServerFrame
	if err := protojson.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err)
	}
	conv := g.GetGroup().GetConversationId()
	_, rec := ts.connect(t, "bob", "b1", "phone", transports[0])
	status, body = rpc(t, ts, tok, &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "h1", ConversationId: conv, Payload: []byte("hi")}}})
	if status != 200 || !strings.Contains(body, `"sendAck"`) {
		t.Fatalf("send over HTTP: %d %s", status, body)
	}
	eventually(t, "bob gets the HTTP-sent message", func() bool {
		for _, m := range rec.messages() {
			if string(m.Payload) == "hi" {
				return true
			}
		}
		return false
	})
	for _, f := range []*pb.ClientFrame{
		{Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: tok}}},
		{Body: &pb.ClientFrame_SubscribePresence{SubscribePresence: &pb.SubscribePresence{}}},
		{},
	} {
		if status, body := rpc(t, ts, tok, f); status != http.StatusBadRequest {
			t.Fatalf("%v over HTTP: %d %s", f, status, body)
		}
	}
	if code, _ := httpDo(t, http.MethodPost, ts.httpBase+"/v1/rpc", bearer(tok), []byte(`{"send":`)); code != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %d", code)
	}
}
