package server_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// findKind waits until rec has a message of kind k and returns it.
func findKind(t *testing.T, rec *recorder, k pb.MessageKind, what string) *pb.Message {
	t.Helper()
	var found *pb.Message
	eventually(t, what, func() bool {
		for _, m := range rec.messages() {
			if m.Kind == k {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// A backend drives everything over the admin API alone: users, tokens,
// groups (as the system), messages, recall, sessions, kicks, disabling.
func TestAdminAPIStory(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	adm := client.NewAdmin(ts.httpBase, testAPIKey)
	ctx := ctx10(t)

	for _, u := range []string{"alice", "bob", "carol"} {
		if _, err := adm.CreateUser(ctx, u, "pw-"+u+"-secret"); err != nil {
			t.Fatalf("create %s: %v", u, err)
		}
	}
	if _, err := adm.CreateUser(ctx, "alice", ""); !isHTTP(err, 409) {
		t.Fatalf("creating an existing user: %v, want 409", err)
	}
	if u, err := adm.GetUser(ctx, "bob"); err != nil || u.UserID != "bob" || !u.HasPassword || u.Disabled {
		t.Fatalf("get bob: %+v %v", u, err)
	}
	if _, err := adm.GetUser(ctx, "nobody"); !isHTTP(err, 404) {
		t.Fatalf("get missing user: %v, want 404", err)
	}
	// The password set by the admin API logs in.
	if _, err := client.Login(ctx, ts.httpBase, "carol", "pw-carol-secret"); err != nil {
		t.Fatalf("login with admin-set password: %v", err)
	}

	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[0])
	_, recB := ts.connect(t, "bob", "b1", "phone", transports[2])
	_, recC := ts.connect(t, "carol", "c1", "phone", transports[1])

	g, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "alice", Name: "team", UserIDs: []string{"bob"}})
	if err != nil || g.Owner != "alice" || g.MemberCount != 2 || !strings.HasPrefix(g.ConversationId, "g:") {
		t.Fatalf("create group: %v %v", g, err)
	}
	conv := g.ConversationId
	if err := adm.AddMembers(ctx, conv, []string{"carol"}); err != nil {
		t.Fatal(err)
	}
	findKind(t, recC, pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, "carol sees she was added")

	// A system message: no sender, delivered to every member.
	sys, err := adm.Send(ctx, client.Message{ConversationID: conv, ClientMsgID: "welcome-1", ContentType: "text", Payload: []byte("welcome")})
	if err != nil || sys.Seq == 0 {
		t.Fatalf("system message: %v %v", sys, err)
	}
	again, err := adm.Send(ctx, client.Message{ConversationID: conv, ClientMsgID: "welcome-1", ContentType: "text", Payload: []byte("welcome")})
	if err != nil || !again.Duplicate || again.Seq != sys.Seq {
		t.Fatalf("retried system message: %v %v, want the original ACK marked duplicate", again, err)
	}
	for _, rec := range []*recorder{recA, recB, recC} {
		eventually(t, "members get the system message", func() bool {
			return slices.ContainsFunc(rec.messages(), func(m *pb.Message) bool { return m.Seq == sys.Seq && m.From == "" && string(m.Payload) == "welcome" })
		})
	}
	// As a user: alice's message, from alice.
	ack, err := adm.Send(ctx, client.Message{From: "alice", To: "bob", ClientMsgID: "dm-1", Payload: []byte("hi bob")})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets alice's 1:1 message", func() bool {
		return slices.ContainsFunc(recB.messages(), func(m *pb.Message) bool { return m.From == "alice" && string(m.Payload) == "hi bob" })
	})
	if _, err := adm.Send(ctx, client.Message{To: "bob", ClientMsgID: "x", Payload: []byte("?")}); !isHTTP(err, 400) {
		t.Fatalf("a sender-less message to a user: %v, want 400", err)
	}

	// History of any conversation, and recall at any time.
	page, err := adm.Messages(ctx, ack.ConversationId, 0, false, 10)
	if err != nil || len(page.Messages) != 1 || string(page.Messages[0].Payload) != "hi bob" {
		t.Fatalf("admin history: %v %v", page, err)
	}
	if _, err := adm.Recall(ctx, ack.ConversationId, ack.Seq); err != nil {
		t.Fatalf("recall: %v", err)
	}
	rc := findKind(t, recB, pb.MessageKind_MESSAGE_KIND_RECALL, "bob sees the recall")
	if rc.Event.GetTargetSeq() != ack.Seq {
		t.Fatalf("recall event %v", rc)
	}
	page, _ = adm.Messages(ctx, ack.ConversationId, 0, true, 10)
	if len(page.Messages) == 0 || !page.Messages[0].Recalled || len(page.Messages[0].Payload) != 0 {
		t.Fatalf("recalled message still has content: %v", page.Messages)
	}

	// Group management as the system.
	if err := adm.SetRole(ctx, conv, "bob", "admin"); err != nil {
		t.Fatal(err)
	}
	if err := adm.Mute(ctx, conv, "carol", time.Hour); err != nil {
		t.Fatal(err)
	}
	cCarol := ts.dialOnly(t, "carol", "c2", "desktop")
	if _, err := cCarol.Send(ctx, &pb.Send{ClientMsgId: "m", ConversationId: conv, Payload: []byte("x")}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_MUTED) {
		t.Fatalf("muted member's send: %v, want MUTED", err)
	}
	mp, err := adm.Members(ctx, conv, "", 100)
	if err != nil || len(mp.Members) != 3 {
		t.Fatalf("members: %v %v", mp, err)
	}
	if err := adm.TransferOwnership(ctx, conv, "bob"); err != nil {
		t.Fatal(err)
	}
	if g, _ := adm.Group(ctx, conv); g.GetOwner() != "bob" {
		t.Fatalf("owner after transfer: %v", g)
	}
	if err := adm.RemoveMember(ctx, conv, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := cCarol.Send(ctx, &pb.Send{ClientMsgId: "m2", ConversationId: conv, Payload: []byte("x")}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("removed member's send: %v, want PERMISSION_DENIED", err)
	}
	if err := adm.Dissolve(ctx, conv); err != nil {
		t.Fatal(err)
	}
	findKind(t, recA, pb.MessageKind_MESSAGE_KIND_GROUP_DISSOLVED, "alice sees the group dissolved")
	if err := adm.AddMembers(ctx, conv, []string{"carol"}); !isHTTP(err, 409) {
		t.Fatalf("adding to a dissolved group: %v, want 409", err)
	}
	if _, err := adm.Group(ctx, "g:0000000000000000"); !isHTTP(err, 403) {
		t.Fatalf("missing group: %v, want 403", err)
	}

	// Contacts.
	if err := adm.Befriend(ctx, "alice", "carol"); err != nil {
		t.Fatal(err)
	}
	cl, err := adm.Contacts(ctx, "carol")
	if err != nil || len(cl.Contacts) != 1 || cl.Contacts[0].UserId != "alice" || cl.Contacts[0].State != pb.ContactState_CONTACT_STATE_FRIEND {
		t.Fatalf("carol's contacts: %v %v", cl, err)
	}
	convs, err := adm.Conversations(ctx, "bob", 10)
	if err != nil || len(convs.Conversations) != 2 {
		t.Fatalf("bob's conversations: %v %v", convs, err)
	}

	// Sessions and kicks.
	ss, err := adm.Sessions(ctx, "alice")
	if err != nil || len(ss) != 1 || ss[0].DeviceID != "a1" || ss[0].DeviceType != "phone" {
		t.Fatalf("alice's sessions: %v %v", ss, err)
	}
	if n, err := adm.Kick(ctx, "alice", ss[0].SessionID); err != nil || n != 1 {
		t.Fatalf("kick: %d %v", n, err)
	}
	<-alice.Done()
	var de *client.DisconnectError
	if !errors.As(alice.Err(), &de) || de.Code != pb.DisconnectCode_DISCONNECT_CODE_KICKED {
		t.Fatalf("kicked client's error: %v", alice.Err())
	}

	// Disabling revokes: the session closes, the old token and the password stop working.
	tok := ts.mint(t, "bob")
	if _, err := adm.SetDisabled(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob's session closes", func() bool { closed, _ := recB.isClosed(); return closed })
	if _, err := client.Dial(ctx, client.Options{Addr: ts.addr(transports[0]), Token: tok, DeviceID: "b9"}); err == nil {
		t.Fatal("a disabled user's earlier token still connects")
	}
	if _, err := client.Login(ctx, ts.httpBase, "bob", "pw-bob-secret"); !isHTTP(err, 401) {
		t.Fatalf("disabled user's login: %v, want 401", err)
	}
	if n, err := adm.RevokeTokens(ctx, "carol"); err != nil || n != 2 {
		t.Fatalf("revoke carol: %d %v, want her 2 sessions closed", n, err)
	}
}

// Every admin route refuses a request without the key, or with a wrong
// one, before looking at anything else.
func TestAdminRoutesNeedTheKey(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	paths := map[string]string{"{id}": "alice", "{uid}": "bob", "{session}": "s1", "{other}": "bob", "{room}": "r1", "{seq}": "1"}
	n := 0
	for _, r := range ts.Routes() {
		method, path, _ := strings.Cut(r, " ")
		if !strings.HasPrefix(path, "/v1/admin/") && path != "/metrics" {
			continue
		}
		for k, v := range paths {
			path = strings.ReplaceAll(path, k, v)
		}
		for _, key := range []string{"", "wrong-key-0123456789abcdef"} {
			code, body := adminDo(t, method, ts.httpBase+path, key, []byte(`{}`))
			if code != http.StatusUnauthorized || body["error"].(map[string]any)["code"] != "unauthenticated" {
				t.Errorf("%s %s with key %q: HTTP %d %v, want 401 unauthenticated", method, path, key, code, body)
			}
		}
		n++
	}
	if n < 30 {
		t.Fatalf("only %d admin routes checked", n)
	}
}

func groupSpec(owner string, members ...string) client.GroupSpec {
	return client.GroupSpec{Owner: owner, Name: "g", UserIDs: members}
}
