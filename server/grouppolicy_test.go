package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func say(t *testing.T, c *client.Client, conv, text string) *pb.SendAck {
	t.Helper()
	ack, err := c.Send(ctx10(t), &pb.Send{ClientMsgId: c.NewClientMsgID(), ConversationId: conv, ContentType: "text", Payload: []byte(text)})
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	return ack
}

// texts returns the payloads of a page's normal messages.
func texts(p *pb.MessagePage) []string {
	var out []string
	for _, m := range p.GetMessages() {
		if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
			out = append(out, string(m.Payload))
		}
	}
	return out
}

// httpMessages reads a page over HTTP as the token's user.
func httpMessages(t *testing.T, ts *testServer, token, conv, query string) *pb.MessagePage {
	t.Helper()
	code, raw := httpDo(t, http.MethodGet, ts.httpBase+"/v1/conversations/"+url.PathEscape(conv)+"/messages?"+query, bearer(token), nil)
	if err := json.Unmarshal(raw, new(json.RawMessage)); err != nil || code != 200 {
		t.Fatalf("GET messages: %d %v", code, err)
	}
	var p pb.MessagePage
	if err := protojson.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// Under the default policy only the owner and admins add members; a group
// created (or updated by an admin) with add_policy EVERYONE lets members add.
func TestGroupAddPolicy(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")

	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "default", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if g.AddPolicy != pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS || g.HistoryVisibility != pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN {
		t.Fatalf("default settings in GroupInfo: %v %v", g.AddPolicy, g.HistoryVisibility)
	}
	if err := bob.AddMembers(ctx, g.ConversationId, "carol"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a plain member adding under the default: %v, want PERMISSION_DENIED", err)
	}
	// A plain member cannot change the policy; the owner can.
	everyone := pb.GroupAddPolicy_GROUP_ADD_POLICY_EVERYONE
	if _, err := bob.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: g.ConversationId, AddPolicy: &everyone}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a plain member changing the add policy: %v", err)
	}
	unset := pb.GroupAddPolicy_GROUP_ADD_POLICY_UNSPECIFIED
	if _, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: g.ConversationId, AddPolicy: &unset}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("setting the add policy to UNSPECIFIED: %v, want BAD_REQUEST", err)
	}
	if _, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "bad", AddPolicy: pb.GroupAddPolicy(7)}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("creating with an unknown add policy: %v, want BAD_REQUEST", err)
	}
	up, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: g.ConversationId, AddPolicy: &everyone})
	if err != nil || up.AddPolicy != everyone {
		t.Fatalf("owner sets EVERYONE: %v %v", up, err)
	}
	if err := bob.AddMembers(ctx, g.ConversationId, "carol"); err != nil {
		t.Fatalf("a plain member adding under EVERYONE: %v", err)
	}

	open, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "open", UserIds: []string{"bob"}, AddPolicy: everyone})
	if err != nil || open.AddPolicy != everyone {
		t.Fatalf("create with EVERYONE: %v %v", open, err)
	}
	if err := bob.AddMembers(ctx, open.ConversationId, "dave"); err != nil {
		t.Fatalf("a plain member adding in a group created with EVERYONE: %v", err)
	}
	// A removed member cannot be brought back by a plain member by default.
	closed, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "closed", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.RemoveMember(ctx, closed.ConversationId, "carol"); err != nil {
		t.Fatal(err)
	}
	if err := bob.AddMembers(ctx, closed.ConversationId, "carol"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a plain member re-adding a removed member: %v, want PERMISSION_DENIED", err)
	}
	// The admin API sets the policy too (PATCH with UpdateGroup's fields).
	var info pb.GroupInfo
	body := `{"addPolicy":"GROUP_ADD_POLICY_EVERYONE","historyVisibility":"HISTORY_VISIBILITY_ALL"}`
	code, raw := httpDo(t, http.MethodPatch, ts.httpBase+"/v1/admin/groups/"+url.PathEscape(closed.ConversationId), map[string]string{"X-Api-Key": testAPIKey}, []byte(body))
	if err := protojson.Unmarshal(raw, &info); err != nil || code != 200 || info.AddPolicy != everyone || info.HistoryVisibility != pb.HistoryVisibility_HISTORY_VISIBILITY_ALL {
		t.Fatalf("admin PATCH: %d %s %v", code, raw, err)
	}
}

// A member removed and added back reads nothing said while they were out:
// not by sync, history (socket and HTTP), the conversation list's last
// message and unread count, nor read counts. The admin API reads everything.
func TestReAddedMemberCannotReadWhileOut(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	carol := ts.dialOnly(t, "carol", "c1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "team", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	before := say(t, alice, conv, "before")
	if err := carol.MarkRead(ctx, conv, before.Seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "carol's read cursor to be stored", func() bool {
		list, err := carol.Conversations(ctx, 10, "")
		return err == nil && len(list.Conversations) == 1 && list.Conversations[0].ReadSeq == before.Seq
	})
	if err := alice.RemoveMember(ctx, conv, "carol"); err != nil {
		t.Fatal(err)
	}
	out1 := say(t, alice, conv, "secret while out 1")
	out2 := say(t, bob, conv, "secret while out 2")
	if err := alice.AddMembers(ctx, conv, "carol"); err != nil {
		t.Fatal(err)
	}

	// Right after the re-add: nothing unread (the secrets are not hers to read).
	adm := adminClient(ts)
	carolConv := func() *pb.Conversation {
		t.Helper()
		list, err := carol.Conversations(ctx, 10, "")
		if err != nil || len(list.Conversations) != 1 {
			t.Fatalf("carol's conversations: %v %v", list, err)
		}
		return list.Conversations[0]
	}
	c := carolConv()
	if c.UnreadCount != 0 {
		t.Errorf("carol's unread right after the re-add = %d, want 0", c.UnreadCount)
	}
	if lm := c.LastMessage; lm != nil && (lm.Seq == out1.Seq || lm.Seq == out2.Seq) {
		t.Errorf("carol's last message is one sent while she was out: %v", lm)
	}

	after := say(t, alice, conv, "after")
	c = carolConv()
	if c.UnreadCount != 1 {
		t.Errorf("carol's unread after one new message = %d, want 1", c.UnreadCount)
	}
	if c.LastMessage.GetSeq() != after.Seq {
		t.Errorf("carol's last message = %v, want seq %d", c.LastMessage, after.Seq)
	}
	secret := func(what string, p *pb.MessagePage) {
		t.Helper()
		for _, m := range p.GetMessages() {
			if m.Seq == out1.Seq || m.Seq == out2.Seq {
				t.Errorf("%s: carol reads %q, sent while she was out", what, m.Payload)
			}
		}
	}
	p, err := carol.SyncMessages(ctx, conv, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	secret("sync from 0", p)
	if got := texts(p); !slices.Equal(got, []string{"after"}) {
		t.Errorf("carol's sync = %q, want [after] (from her re-add on)", got)
	}
	p, err = carol.SyncMessages(ctx, conv, before.Seq, 100)
	if err != nil {
		t.Fatal(err)
	}
	secret("sync from her old cursor", p)
	p, err = carol.History(ctx, conv, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	secret("history", p)
	p, err = carol.History(ctx, conv, after.Seq, 100)
	if err != nil {
		t.Fatal(err)
	}
	secret("history before the new message", p)
	if p.HasMore {
		t.Errorf("history before her re-add says has_more")
	}
	tok := ts.mint(t, "carol")
	secret("HTTP after=0", httpMessages(t, ts, tok, conv, "after=0&limit=100"))
	secret("HTTP before", httpMessages(t, ts, tok, conv, "before="+strconv.FormatUint(after.Seq, 10)+"&limit=100"))
	if _, err := carol.ReadCounts(ctx, conv, out1.Seq); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("carol's read counts of a message sent while out: %v, want PERMISSION_DENIED", err)
	}
	if _, err := carol.ReadCounts(ctx, conv, after.Seq); err != nil {
		t.Errorf("carol's read counts of a message she can read: %v", err)
	}
	// Made an admin, she still cannot act on what she cannot read: bob's
	// message from while she was out is not hers to recall.
	if err := alice.SetRole(ctx, conv, "carol", pb.GroupRole_GROUP_ROLE_ADMIN); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Recall(ctx, conv, out2.Seq); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("carol, now an admin, recalls a message sent while she was out: %v, want PERMISSION_DENIED", err)
	}
	// The admin API reads everything.
	all, err := adm.Messages(ctx, conv, 0, true, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(all); !slices.Equal(got, []string{"before", "secret while out 1", "secret while out 2", "after"}) {
		t.Errorf("admin reads %q", got)
	}
	// Bob, a member all along, reads everything too.
	if p, err := bob.SyncMessages(ctx, conv, 0, 100); err != nil || len(texts(p)) != 4 {
		t.Errorf("bob's sync: %q %v", texts(p), err)
	}
}

// With history visibility ALL a new member reads the whole history, and a
// re-added one what was said while they were out; under the default a new
// member reads from their join.
func TestGroupHistoryVisibility(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	dave := ts.dialOnly(t, "dave", "d1", "phone")
	for _, tc := range []struct {
		vis  pb.HistoryVisibility
		want []string
	}{
		{pb.HistoryVisibility_HISTORY_VISIBILITY_UNSPECIFIED, []string{"after"}},
		{pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN, []string{"after"}},
		{pb.HistoryVisibility_HISTORY_VISIBILITY_ALL, []string{"one", "two", "after"}},
	} {
		t.Run(tc.vis.String(), func(t *testing.T) {
			g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "h", UserIds: []string{"bob"}, HistoryVisibility: tc.vis})
			if err != nil {
				t.Fatal(err)
			}
			say(t, alice, g.ConversationId, "one")
			say(t, alice, g.ConversationId, "two")
			if err := alice.AddMembers(ctx, g.ConversationId, "dave"); err != nil {
				t.Fatal(err)
			}
			say(t, alice, g.ConversationId, "after")
			p, err := dave.SyncMessages(ctx, g.ConversationId, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(p); !slices.Equal(got, tc.want) {
				t.Errorf("new member's sync = %q, want %q", got, tc.want)
			}
			h, err := dave.History(ctx, g.ConversationId, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := texts(h); !slices.Equal(got, tc.want) {
				t.Errorf("new member's history = %q, want %q", got, tc.want)
			}
		})
	}
	// ALL: a re-added member reads what was said while they were out.
	all := pb.HistoryVisibility_HISTORY_VISIBILITY_ALL
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "all", UserIds: []string{"dave"}, HistoryVisibility: all})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.RemoveMember(ctx, g.ConversationId, "dave"); err != nil {
		t.Fatal(err)
	}
	say(t, alice, g.ConversationId, "while out")
	if err := alice.AddMembers(ctx, g.ConversationId, "dave"); err != nil {
		t.Fatal(err)
	}
	p, err := dave.SyncMessages(ctx, g.ConversationId, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(p); !slices.Equal(got, []string{"while out"}) {
		t.Errorf("re-added member under ALL reads %q, want [while out]", got)
	}
	// Switching a group to SINCE_JOIN applies at once to members added since.
	since := pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN
	if _, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: g.ConversationId, HistoryVisibility: &since}); err != nil {
		t.Fatal(err)
	}
	p, err = dave.SyncMessages(ctx, g.ConversationId, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(p); len(got) != 0 {
		t.Errorf("re-added member after switching to SINCE_JOIN reads %q, want nothing", got)
	}
}
