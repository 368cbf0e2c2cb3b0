package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

func wantCode(t *testing.T, err error, code pb.ErrorCode) {
	t.Helper()
	if !client.IsCode(err, code) {
		t.Fatalf("got %v, want %v", err, code)
	}
}

// kinds returns the message kinds of msgs, for compact assertions.
func kinds(msgs []*pb.Message) []pb.MessageKind {
	var k []pb.MessageKind
	for _, m := range msgs {
		k = append(k, m.Kind)
	}
	return k
}

func syncAll(t *testing.T, c *client.Client, conv string) []*pb.Message {
	t.Helper()
	var all []*pb.Message
	var after uint64
	for {
		p, err := c.SyncMessages(ctx10(t), conv, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Messages...)
		if !p.HasMore || len(p.Messages) == 0 {
			return all
		}
		after = p.Messages[len(p.Messages)-1].Seq
	}
}

// Three users on three transports: create a group, chat, change membership;
// every device sees one ordered sequence of messages and events.
func TestGroupLifecycle(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)
	alice, recA := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, recB := ts.connect(t, "bob", "b1", "phone", transports[1])
	carol, recC := ts.connect(t, "carol", "c1", "phone", transports[2])

	// Whole-history visibility: erin, added later, converges on the whole sequence below.
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "trip", UserIds: []string{"bob", "carol", "bob"},
		HistoryVisibility: pb.HistoryVisibility_HISTORY_VISIBILITY_ALL})
	if err != nil {
		t.Fatal(err)
	}
	if g.Owner != "alice" || g.MemberCount != 3 || g.Name != "trip" || len(g.ConversationId) < 3 {
		t.Fatalf("group %v", g)
	}
	conv := g.ConversationId
	for i, c := range []*client.Client{alice, bob, carol} {
		if _, err := c.SendToConversation(ctx, conv, "text", []byte(fmt.Sprint("hi from ", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Each member gets the creation event and the others' messages, in seq order.
	for name, r := range map[string]*recorder{"alice": recA, "bob": recB, "carol": recC} {
		eventually(t, name+" gets the group traffic", func() bool { return r.count() >= 3 })
		var last uint64
		for _, m := range r.messages() {
			if m.Seq <= last {
				t.Fatalf("%s: seq %d after %d", name, m.Seq, last)
			}
			last = m.Seq
		}
	}
	if got := kinds(recB.messages())[0]; got != pb.MessageKind_MESSAGE_KIND_GROUP_CREATED {
		t.Fatalf("bob's first group frame is %v", got)
	}

	// Remove carol: she is told, stops receiving, and reads only up to her removal.
	if err := bob.RemoveMember(ctx, conv, "carol"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a member removed another: %v", err)
	}
	if err := alice.RemoveMember(ctx, conv, "carol"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "carol sees her removal", func() bool {
		ms := recC.messages()
		return len(ms) > 0 && ms[len(ms)-1].Kind == pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED
	})
	before := recC.count()
	ack, err := alice.SendToConversation(ctx, conv, "text", []byte("after carol left"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets it", func() bool {
		ms := recB.messages()
		return ms[len(ms)-1].Seq == ack.Seq
	})
	if recC.count() != before {
		t.Fatal("a removed member still receives")
	}
	_, err = carol.SendToConversation(ctx, conv, "text", []byte("still here?"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	seen := syncAll(t, carol, conv)
	if len(seen) == 0 || seen[len(seen)-1].Kind != pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED || seen[len(seen)-1].Seq >= ack.Seq {
		t.Fatalf("carol reads past her removal: last %v", seen[len(seen)-1])
	}
	h, err := carol.History(ctx, conv, 0, 100)
	if err != nil || h.Messages[len(h.Messages)-1].Seq >= ack.Seq || h.LastSeq >= ack.Seq {
		t.Fatalf("carol's history reaches past her removal: %v %v", h, err)
	}

	// Roles and mutes.
	if err := alice.SetRole(ctx, conv, "bob", pb.GroupRole_GROUP_ROLE_ADMIN); err != nil {
		t.Fatal(err)
	}
	if err := bob.AddMembers(ctx, conv, "dave", "erin"); err != nil {
		t.Fatal(err)
	}
	dave, recD := ts.connect(t, "dave", "d1", "phone", transports[0])
	if err := bob.MuteMember(ctx, conv, "dave", 3600); err != nil {
		t.Fatal(err)
	}
	_, err = dave.SendToConversation(ctx, conv, "text", []byte("let me talk"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MUTED)
	if err := bob.MuteMember(ctx, conv, "dave", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := dave.SendToConversation(ctx, conv, "text", []byte("thanks")); err != nil {
		t.Fatal(err)
	}
	if err := bob.MuteMember(ctx, conv, "alice", 60); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("an admin muted the owner: %v", err)
	}
	if _, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: conv, MuteAll: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	_, err = dave.SendToConversation(ctx, conv, "text", []byte("muted all"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_MUTED)
	if _, err := bob.SendToConversation(ctx, conv, "text", []byte("admins still talk")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.UpdateGroup(ctx, &pb.UpdateGroup{ConversationId: conv, MuteAll: ptr(false), Announcement: ptr("hello all")}); err != nil {
		t.Fatal(err)
	}

	// Members are paged by user id.
	p1, err := dave.Members(ctx, conv, "", 2)
	if err != nil || len(p1.Members) != 2 || p1.NextAfterUserId == "" {
		t.Fatalf("page 1: %v %v", p1, err)
	}
	p2, err := dave.Members(ctx, conv, p1.NextAfterUserId, 10)
	if err != nil || p2.NextAfterUserId != "" {
		t.Fatalf("page 2: %v %v", p2, err)
	}
	var ids []string
	for _, m := range append(p1.Members, p2.Members...) {
		ids = append(ids, m.UserId)
	}
	if !slices.Equal(ids, []string{"alice", "bob", "dave", "erin"}) {
		t.Fatalf("members %v", ids)
	}

	// Ownership: the owner cannot leave, can transfer, then leave.
	wantCode(t, alice.LeaveGroup(ctx, conv), pb.ErrorCode_ERROR_CODE_CONFLICT)
	if err := alice.TransferOwnership(ctx, conv, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := alice.LeaveGroup(ctx, conv); err != nil {
		t.Fatal(err)
	}
	info, err := bob.GetGroup(ctx, conv)
	if err != nil || info.Owner != "bob" || info.MemberCount != 3 || info.Announcement != "hello all" {
		t.Fatalf("group after transfer: %v %v", info, err)
	}
	if err := bob.DissolveGroup(ctx, conv); err != nil {
		t.Fatal(err)
	}
	_, err = dave.SendToConversation(ctx, conv, "text", []byte("anyone?"))
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_CONFLICT)
	eventually(t, "dave sees the dissolution", func() bool {
		ms := recD.messages()
		return len(ms) > 0 && ms[len(ms)-1].Kind == pb.MessageKind_MESSAGE_KIND_GROUP_DISSOLVED
	})

	// A device that was offline converges through sync: same sequence, same order.
	erin, _ := ts.connect(t, "erin", "e1", "phone", transports[2])
	convs, err := erin.AllConversations(ctx)
	if err != nil || len(convs) != 1 || convs[0].Type != pb.ConversationType_CONVERSATION_TYPE_GROUP || !convs[0].Group.Dissolved {
		t.Fatalf("erin's conversations: %v %v", convs, err)
	}
	all := syncAll(t, erin, conv)
	for i, m := range all {
		if m.Seq != uint64(i+1) {
			t.Fatalf("erin's sync: seq %d at %d", m.Seq, i)
		}
	}
	if all[len(all)-1].Kind != pb.MessageKind_MESSAGE_KIND_GROUP_DISSOLVED || convs[0].LastSeq != uint64(len(all)) {
		t.Fatalf("erin's sync ends with %v, conversation last seq %d of %d", all[len(all)-1].Kind, convs[0].LastSeq, len(all))
	}
}

func ptr[T any](v T) *T { return &v }

func TestOpenAndClosedGroups(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.MaxGroupMembers = 3 })
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[1])
	closed, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "closed"})
	if err != nil {
		t.Fatal(err)
	}
	open, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "open", OpenJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	// Joining a closed group and a group that does not exist look the same.
	_, err = bob.JoinGroup(ctx, closed.ConversationId)
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	_, err = bob.JoinGroup(ctx, "g:0000000000000000")
	wantCode(t, err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	g, err := bob.JoinGroup(ctx, open.ConversationId)
	if err != nil || g.MemberCount != 2 {
		t.Fatalf("join open group: %v %v", g, err)
	}
	if err := alice.AddMembers(ctx, open.ConversationId, "carol", "dave"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_GROUP_FULL) {
		t.Fatalf("past the maximum size: %v", err)
	}
	if _, err := alice.CreateGroup(ctx, &pb.CreateGroup{UserIds: []string{"b", "c", "d"}}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_GROUP_FULL) {
		t.Fatalf("create past the maximum size: %v", err)
	}
	if _, err := alice.CreateGroup(ctx, &pb.CreateGroup{UserIds: []string{"bad:id"}}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("invalid member id: %v", err)
	}
	long := string(make([]byte, 200))
	if _, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: long}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_LARGE) {
		t.Fatalf("oversized name: %v", err)
	}
}

// A group of 10,000 members works: built in chunks, one stored copy per
// message, delivered to the members who are online.
func TestTenThousandMemberGroup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a 10,000-member group; skipped in -short")
	}
	ts := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*1e9)
	defer cancel()
	owner, _ := ts.connect(t, "owner", "o1", "phone", transports[2])
	g, err := owner.CreateGroup(ctx, &pb.CreateGroup{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	for chunk := 0; chunk < 10; chunk++ {
		var ids []string
		for i := 0; i < 1000; i++ {
			ids = append(ids, fmt.Sprintf("m%05d", chunk*1000+i))
		}
		if chunk == 9 {
			ids = ids[:999] // 1 owner + 9,999 = 10,000
		}
		if err := owner.AddMembers(ctx, g.ConversationId, ids...); err != nil {
			t.Fatal(err)
		}
	}
	info, err := owner.GetGroup(ctx, g.ConversationId)
	if err != nil || info.MemberCount != 10000 {
		t.Fatalf("member count %v %v", info.GetMemberCount(), err)
	}
	var recs []*recorder
	for i := 0; i < 20; i++ {
		_, r := ts.connect(t, fmt.Sprintf("m%05d", i*500), "d", "phone", transports[i%3])
		recs = append(recs, r)
	}
	for i := 0; i < 10; i++ {
		if _, err := owner.SendToConversation(ctx, g.ConversationId, "text", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// A member that connected while the last MEMBERS_ADDED event was still
	// fanning out to 10,000 members may get that event too: only the
	// messages count.
	normal := func(r *recorder) (payloads []string) {
		for _, m := range r.messages() {
			if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
				payloads = append(payloads, string(m.Payload))
			}
		}
		return payloads
	}
	for i, r := range recs {
		eventually(t, fmt.Sprint("member ", i, " receives"), func() bool { return len(normal(r)) >= 10 })
		if got := normal(r); fmt.Sprint(got) != "[0 1 2 3 4 5 6 7 8 9]" {
			t.Fatalf("member %d received %v, want the 10 messages once each, in order", i, got)
		}
	}
	page, err := owner.Members(ctx, g.ConversationId, "m04999", 1000)
	if err != nil || len(page.Members) != 1000 || page.Members[0].UserId != "m05000" {
		t.Fatalf("member page: %d %v", len(page.GetMembers()), err)
	}
}

// The group cache stays within group_cache_size; groups dropped from it are
// loaded again, with their current members, when next used.
func TestGroupCacheBounded(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.GroupCacheSize = 8 })
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[2])
	_, recB := ts.connect(t, "bob", "b1", "phone", transports[0])
	carol, recC := ts.connect(t, "carol", "c1", "phone", transports[1])
	ctx := ctx10(t)
	adm := adminClient(ts)
	const n = 30
	convs := make([]string, n)
	for i := range n {
		g, err := adm.CreateGroup(ctx, groupSpec("alice", "bob", "carol"))
		if err != nil {
			t.Fatal(err)
		}
		convs[i] = g.ConversationId
		if _, err := alice.SendToConversation(ctx, g.ConversationId, "text/plain", []byte("hi")); err != nil {
			t.Fatal(err)
		}
	}
	normal := func(r *recorder) int {
		k := 0
		for _, m := range r.messages() {
			if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
				k++
			}
		}
		return k
	}
	eventually(t, "bob and carol get a message in each of the 30 groups", func() bool {
		return normal(recB) == n && normal(recC) == n
	})
	if got := ts.Stats().Chat.GroupsCached; got > 8 {
		t.Fatalf("%d groups cached, cap 8", got)
	}
	// The first group was long dropped; a change to it and the sends after
	// it see its current members.
	if err := adm.RemoveMember(ctx, convs[0], "carol"); err != nil {
		t.Fatal(err)
	}
	for _, c := range convs[1:] { // push the first group out again
		if _, err := alice.SendToConversation(ctx, c, "text/plain", []byte("again")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.SendToConversation(ctx, convs[0], "text/plain", []byte("without carol")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets every later message", func() bool { return normal(recB) == 2*n })
	// Carol's connection may still be taking the last "again" messages when
	// bob has them all: wait for hers, then check none was the one after her
	// removal.
	eventually(t, "carol gets the messages of the groups she is still in", func() bool { return normal(recC) >= 2*n-1 })
	for _, m := range recC.messages() {
		if string(m.Payload) == "without carol" {
			t.Fatalf("carol got %q, sent to the first group after her removal", m.Payload)
		}
	}
	if got := normal(recC); got != 2*n-1 {
		t.Fatalf("carol got %d messages, want %d (none after her removal from the first group)", got, 2*n-1)
	}
	if _, err := carol.SendToConversation(ctx, convs[0], "text/plain", []byte("still here?")); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("removed carol's send: %v, want PERMISSION_DENIED", err)
	}
	if got := ts.Stats().Chat.GroupsCached; got > 8 {
		t.Fatalf("%d groups cached, cap 8", got)
	}
}
