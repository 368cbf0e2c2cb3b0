package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// at returns a time with microsecond precision (what PostgreSQL keeps).
func at(n int) time.Time {
	return time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC).Add(time.Duration(n) * time.Microsecond * 1001)
}

// normTime makes times comparable with ==: UTC, no monotonic reading.
func normTime(t time.Time) time.Time { return t.Round(0).UTC() }

// event builds an event entry as the server would pass it to Apply.
func event(conv, from, clientID string, kind pb.MessageKind, ev *pb.MessageEvent) *pb.Message {
	return &pb.Message{
		ConversationId: conv,
		From:           from,
		ClientMsgId:    clientID,
		ServerTime:     1700000000000,
		MessageId:      nextMessageID(),
		Kind:           kind,
		Event:          ev,
	}
}

func applyOK(t *testing.T, s store.Store, ch store.Change) store.AppendResult {
	t.Helper()
	res, err := s.Apply(context.Background(), ch)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if res.Msg == nil {
		t.Fatal("Apply returned no message")
	}
	return res
}

// applyNew applies ch and checks it was stored (not a duplicate) at seq want.
func applyNew(t *testing.T, s store.Store, ch store.Change, want uint64) store.AppendResult {
	t.Helper()
	sent := proto.Clone(ch.Event).(*pb.Message)
	res := applyOK(t, s, ch)
	if res.Duplicate || res.Msg.Seq != want {
		t.Fatalf("Apply: seq %d duplicate %v, want %d false", res.Msg.Seq, res.Duplicate, want)
	}
	sameMessage(t, "Apply result", res.Msg, sent)
	return res
}

func member(user string, role pb.GroupRole, joined int) store.Member {
	return store.Member{UserID: user, Role: role, JoinedAt: at(joined)}
}

func normGroup(g store.Group) store.Group {
	g.CreatedAt = normTime(g.CreatedAt)
	return g
}

func normMember(m store.Member) store.Member {
	m.MutedUntil, m.JoinedAt = normTime(m.MutedUntil), normTime(m.JoinedAt)
	return m
}

func normContact(c store.Contact) store.Contact {
	c.UpdatedAt = normTime(c.UpdatedAt)
	return c
}

func checkGroup(t *testing.T, s store.Store, want store.Group) {
	t.Helper()
	got, err := s.GetGroup(context.Background(), want.ConversationID)
	if err != nil {
		t.Fatalf("GetGroup(%q): %v", want.ConversationID, err)
	}
	if normGroup(got) != normGroup(want) {
		t.Fatalf("GetGroup(%q) = %+v, want %+v", want.ConversationID, got, want)
	}
}

func checkMember(t *testing.T, s store.Store, conv string, want store.Member) {
	t.Helper()
	got, err := s.GetMember(context.Background(), conv, want.UserID)
	if err != nil {
		t.Fatalf("GetMember(%q, %q): %v", conv, want.UserID, err)
	}
	if normMember(got) != normMember(want) {
		t.Fatalf("GetMember(%q, %q) = %+v, want %+v", conv, want.UserID, got, want)
	}
}

func wantNoMember(t *testing.T, s store.Store, conv, user string) {
	t.Helper()
	if m, err := s.GetMember(context.Background(), conv, user); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMember(%q, %q) = %+v, %v; want ErrNotFound", conv, user, m, err)
	}
}

func wantNoGroup(t *testing.T, s store.Store, conv string) {
	t.Helper()
	if g, err := s.GetGroup(context.Background(), conv); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetGroup(%q) = %+v, %v; want ErrNotFound", conv, g, err)
	}
}

// memberIDs returns the user ids of Members(conv, after, limit).
func memberIDs(t *testing.T, s store.Store, conv, after string, limit int) []string {
	t.Helper()
	ms, err := s.Members(context.Background(), conv, after, limit)
	if err != nil {
		t.Fatalf("Members(%q, %q, %d): %v", conv, after, limit, err)
	}
	out := []string{}
	for _, m := range ms {
		if m.Left {
			t.Fatalf("Members(%q) returned %q, who left", conv, m.UserID)
		}
		out = append(out, m.UserID)
	}
	return out
}

func getMessage(t *testing.T, s store.Store, conv string, seq uint64) *pb.Message {
	t.Helper()
	m, err := s.GetMessage(context.Background(), conv, seq)
	if err != nil {
		t.Fatalf("GetMessage(%q, %d): %v", conv, seq, err)
	}
	return m
}

func wantConversation(t *testing.T, s store.Store, user, conv string) {
	t.Helper()
	if got := conversations(t, s, user); !slices.Contains(got, conv) {
		t.Fatalf("Conversations(%q) = %q, want it to include %q", user, got, conv)
	}
}

func testGroup(conv, name string) store.Group {
	return store.Group{
		ConversationID: conv, Name: name, AvatarURL: "https://example.com/" + name + ".png",
		Announcement: "welcome to " + name, Owner: "alice", OpenJoin: true, CreatedAt: at(1),
	}
}

// createGroup applies a GROUP_CREATED event of conv with alice as owner and
// the other users as members; it must get seq want.
func createGroup(t *testing.T, s store.Store, conv string, want uint64, users ...string) store.Group {
	t.Helper()
	g := testGroup(conv, "group "+conv)
	ms := []store.Member{member("alice", pb.GroupRole_GROUP_ROLE_OWNER, 1)}
	for _, u := range users {
		ms = append(ms, member(u, pb.GroupRole_GROUP_ROLE_MEMBER, 1))
	}
	applyNew(t, s, store.Change{
		Event: event(conv, "alice", "create-"+conv, pb.MessageKind_MESSAGE_KIND_GROUP_CREATED,
			&pb.MessageEvent{UserIds: users, Group: &pb.GroupInfo{ConversationId: conv, Name: g.Name}}),
		Group:   &g,
		Members: ms,
	}, want)
	return g
}

func testApplyGroupChange(t *testing.T, s store.Store) {
	wantNoGroup(t, s, "g:1")
	wantNoMember(t, s, "g:1", "alice")
	appendOK(t, s, msg("g:1", "alice", "", "m1"), msg("g:1", "alice", "", "m2"))

	g := testGroup("g:1", "one")
	g.MuteAll = true
	carol := member("carol", pb.GroupRole_GROUP_ROLE_ADMIN, 2)
	carol.MutedUntil = at(500)
	members := []store.Member{member("alice", pb.GroupRole_GROUP_ROLE_OWNER, 1), member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 2), carol}
	ev := event("g:1", "alice", "create", pb.MessageKind_MESSAGE_KIND_GROUP_CREATED,
		&pb.MessageEvent{UserIds: []string{"bob", "carol"}, Role: pb.GroupRole_GROUP_ROLE_MEMBER, MutedUntil: 5,
			Group: &pb.GroupInfo{ConversationId: "g:1", Name: "one", MemberCount: 3, CreatedAt: 9}})
	res := applyNew(t, s, store.Change{Event: ev, Group: &g, Members: members}, 3)

	// The event is an entry of the sequence like any message.
	if got := getMessage(t, s, "g:1", 3); !proto.Equal(got, res.Msg) {
		t.Fatalf("GetMessage of the event = %v, want %v", got, res.Msg)
	}
	stored := all(t, s, "g:1")
	wantSeqs(t, "g:1", stored, []uint64{1, 2, 3})
	if !proto.Equal(stored[2], res.Msg) {
		t.Fatalf("Messages: event stored as %v, want %v", stored[2], res.Msg)
	}
	if n := lastSeq(t, s, "g:1"); n != 3 {
		t.Fatalf("LastSeq after Apply = %d, want 3", n)
	}
	checkGroup(t, s, g)
	for _, m := range members {
		checkMember(t, s, "g:1", m)
	}
	wantNoMember(t, s, "g:1", "dave")
	wantNoMember(t, s, "g:10", "alice")
	wantNoGroup(t, s, "g:10")
	if got := memberIDs(t, s, "g:1", "", 100); !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Fatalf("Members = %q", got)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if got := conversations(t, s, u); !slices.Equal(got, []string{"g:1"}) {
			t.Fatalf("Conversations(%q) = %q, want [g:1]", u, got)
		}
	}

	// Append and Apply share the conversation's sequence.
	if r := appendOK(t, s, msg("g:1", "bob", "", "m3")); r[0].Msg.Seq != 4 {
		t.Fatalf("Append after Apply: seq %d, want 4", r[0].Msg.Seq)
	}
	applyNew(t, s, store.Change{Event: event("g:1", "alice", "upd", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil)}, 5)
	if r := appendOK(t, s, msg("g:1", "bob", "", "m4"), msg("g:1", "bob", "", "m5")); r[1].Msg.Seq != 7 {
		t.Fatalf("Append after Apply: seq %d, want 7", r[1].Msg.Seq)
	}
	wantSeqs(t, "g:1", all(t, s, "g:1"), seqRange(1, 7))
	// An Apply without Group or Members leaves them as they were.
	checkGroup(t, s, g)
	checkMember(t, s, "g:1", carol)
	// An event in a new conversation starts at 1, and To gets the
	// conversation listed as with Append.
	ev2 := event("d:ab", "alice", "x", pb.MessageKind_MESSAGE_KIND_NORMAL, nil)
	ev2.To = "bob"
	applyNew(t, s, store.Change{Event: ev2}, 1)
	if got := conversations(t, s, "bob"); !slices.Equal(got, []string{"d:ab", "g:1"}) {
		t.Fatalf("Conversations(bob) = %q, want [d:ab g:1]", got)
	}
}

func testApplyMembersLeave(t *testing.T, s store.Store) {
	createGroup(t, s, "g:1", 1, "bob", "carol", "erin")
	removed := member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 1)
	removed.Left = true
	applyNew(t, s, store.Change{
		Event:   event("g:1", "alice", "rm-bob", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, &pb.MessageEvent{UserIds: []string{"bob"}}),
		Members: []store.Member{removed},
	}, 2)
	removed.LeftSeq = 2 // Left with LeftSeq 0 gets the event's seq
	checkMember(t, s, "g:1", removed)
	if got := memberIDs(t, s, "g:1", "", 100); !slices.Equal(got, []string{"alice", "carol", "erin"}) {
		t.Fatalf("Members after bob left = %q", got)
	}
	// Members who left keep the conversation in their list.
	wantConversation(t, s, "bob", "g:1")

	// An explicit LeftSeq is kept.
	leftC := member("carol", pb.GroupRole_GROUP_ROLE_MEMBER, 1)
	leftC.Left, leftC.LeftSeq = true, 1
	leftE := member("erin", pb.GroupRole_GROUP_ROLE_MEMBER, 1)
	leftE.Left = true
	// dave was never a member: written as Left, he still gets the conversation listed.
	leftD := member("dave", pb.GroupRole_GROUP_ROLE_MEMBER, 3)
	leftD.Left = true
	ms := []store.Member{leftC, leftE, leftD}
	applyNew(t, s, store.Change{
		Event:   event("g:1", "alice", "rm-more", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, nil),
		Members: ms,
	}, 3)
	leftE.LeftSeq, leftD.LeftSeq = 3, 3
	checkMember(t, s, "g:1", leftC)
	checkMember(t, s, "g:1", leftE)
	checkMember(t, s, "g:1", leftD)
	wantConversation(t, s, "dave", "g:1")
	if got := memberIDs(t, s, "g:1", "", 100); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("Members after more left = %q", got)
	}

	// Rejoining replaces the past record.
	back := member("bob", pb.GroupRole_GROUP_ROLE_ADMIN, 9)
	applyNew(t, s, store.Change{
		Event:   event("g:1", "bob", "join", pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil),
		Members: []store.Member{back},
	}, 4)
	checkMember(t, s, "g:1", back)
	if got := memberIDs(t, s, "g:1", "", 100); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("Members after bob rejoined = %q", got)
	}
	// ... and leaving again replaces the current one.
	back.Left = true
	applyNew(t, s, store.Change{
		Event:   event("g:1", "bob", "leave", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, nil),
		Members: []store.Member{back},
	}, 5)
	back.LeftSeq = 5
	checkMember(t, s, "g:1", back)
	if got := memberIDs(t, s, "g:1", "", 100); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("Members after bob left again = %q", got)
	}
	// A role change of a current member replaces its record.
	owner := member("alice", pb.GroupRole_GROUP_ROLE_ADMIN, 1)
	owner.MutedUntil = at(77)
	applyNew(t, s, store.Change{
		Event:   event("g:1", "alice", "role", pb.MessageKind_MESSAGE_KIND_ROLE_CHANGED, nil),
		Members: []store.Member{owner},
	}, 6)
	checkMember(t, s, "g:1", owner)
}

func testApplyDuplicate(t *testing.T, s store.Store) {
	g := testGroup("g:1", "one")
	create := store.Change{
		Event:   event("g:1", "alice", "c1", pb.MessageKind_MESSAGE_KIND_GROUP_CREATED, &pb.MessageEvent{UserIds: []string{"alice"}}),
		Group:   &g,
		Members: []store.Member{member("alice", pb.GroupRole_GROUP_ROLE_OWNER, 1)},
	}
	orig := proto.Clone(applyNew(t, s, create, 1).Msg).(*pb.Message)
	m := appendOK(t, s, msg("g:1", "alice", "", "m1"))[0].Msg
	stored := proto.Clone(m).(*pb.Message)

	// A resend of the event with different contents writes nothing.
	g2 := testGroup("g:1", "two")
	recalled := proto.Clone(stored).(*pb.Message)
	recalled.Payload, recalled.ContentType, recalled.Recalled = nil, "", true
	again := store.Change{
		Event:   event("g:1", "alice", "c1", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil),
		Group:   &g2,
		Members: []store.Member{member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 2)},
		Update:  recalled,
	}
	res := applyOK(t, s, again)
	if !res.Duplicate || !proto.Equal(res.Msg, orig) {
		t.Fatalf("resent event: duplicate %v msg %v; want true %v", res.Duplicate, res.Msg, orig)
	}
	checkGroup(t, s, g)
	wantNoMember(t, s, "g:1", "bob")
	if got := conversations(t, s, "bob"); len(got) != 0 {
		t.Fatalf("Conversations(bob) = %q after a duplicate", got)
	}
	if got := getMessage(t, s, "g:1", 2); !proto.Equal(got, stored) {
		t.Fatalf("duplicate Apply updated the message: %v", got)
	}
	if n := lastSeq(t, s, "g:1"); n != 2 {
		t.Fatalf("LastSeq = %d after a duplicate, want 2", n)
	}

	// De-dup is shared with Append, both ways.
	res = applyOK(t, s, store.Change{Event: event("g:1", "alice", "m1", pb.MessageKind_MESSAGE_KIND_RECALL, nil), Update: recalled})
	if !res.Duplicate || !proto.Equal(res.Msg, stored) {
		t.Fatalf("Apply with an appended message's client id: duplicate %v msg %v; want true %v", res.Duplicate, res.Msg, stored)
	}
	if got := getMessage(t, s, "g:1", 2); !proto.Equal(got, stored) {
		t.Fatalf("duplicate Apply updated the message: %v", got)
	}
	r := appendOK(t, s, msg("g:1", "alice", "", "c1"))
	if !r[0].Duplicate || !proto.Equal(r[0].Msg, orig) {
		t.Fatalf("Append with an event's client id: duplicate %v msg %v; want true %v", r[0].Duplicate, r[0].Msg, orig)
	}
	// Per sender, as with Append.
	applyNew(t, s, store.Change{Event: event("g:1", "bob", "c1", pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil)}, 3)
}

func testApplyUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := appendOK(t, s, msg("d:ab", "alice", "bob", "m1"), msg("d:ab", "alice", "bob", "m2"), msg("d:ab", "bob", "alice", "m3"))
	m1 := proto.Clone(r[0].Msg).(*pb.Message)
	m2 := proto.Clone(r[1].Msg).(*pb.Message)
	m3 := proto.Clone(r[2].Msg).(*pb.Message)

	// Recall: the stored message is replaced by one without payload.
	recalled := proto.Clone(m1).(*pb.Message)
	recalled.Payload, recalled.ContentType, recalled.Recalled = nil, "", true
	applyNew(t, s, store.Change{
		Event:  event("d:ab", "alice", "r1", pb.MessageKind_MESSAGE_KIND_RECALL, &pb.MessageEvent{TargetSeq: 1}),
		Update: recalled,
	}, 4)
	if got := getMessage(t, s, "d:ab", 1); !proto.Equal(got, recalled) {
		t.Fatalf("recalled message stored as %v, want %v", got, recalled)
	}
	// Edit.
	edited := proto.Clone(m2).(*pb.Message)
	edited.ContentType, edited.Payload, edited.EditedAt = "markdown", []byte("*new*"), 1700000001234
	editEv := event("d:ab", "alice", "e1", pb.MessageKind_MESSAGE_KIND_EDIT, &pb.MessageEvent{TargetSeq: 2})
	editEv.ContentType, editEv.Payload = "markdown", []byte("*new*")
	applyNew(t, s, store.Change{Event: editEv, Update: edited}, 5)
	if got := getMessage(t, s, "d:ab", 2); !proto.Equal(got, edited) {
		t.Fatalf("edited message stored as %v, want %v", got, edited)
	}
	// An update of a recalled message (an edit prepared from a copy read
	// before the recall) is refused and writes nothing: the recall stands.
	stale := proto.Clone(m1).(*pb.Message)
	stale.Payload, stale.EditedAt = []byte("back"), 1700000001235
	if _, err := s.Apply(ctx, store.Change{Event: event("d:ab", "alice", "e-stale", pb.MessageKind_MESSAGE_KIND_EDIT, &pb.MessageEvent{TargetSeq: 1}), Update: stale}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply updating a recalled message: %v, want ErrConflict", err)
	}
	if got := getMessage(t, s, "d:ab", 1); !proto.Equal(got, recalled) {
		t.Fatalf("a refused update changed the recalled message: %v", got)
	}
	if n := lastSeq(t, s, "d:ab"); n != 5 {
		t.Fatalf("LastSeq = %d after a refused update, want 5", n)
	}
	got := all(t, s, "d:ab")
	wantSeqs(t, "d:ab", got, seqRange(1, 5))
	for i, want := range []*pb.Message{recalled, edited, m3} {
		if !proto.Equal(got[i], want) {
			t.Fatalf("Messages[%d] = %v, want %v", i, got[i], want)
		}
	}
	if h, err := s.History(ctx, "d:ab", 3, 10); err != nil || len(h) != 2 || !proto.Equal(h[0], recalled) {
		t.Fatalf("History after recall = %v, %v", h, err)
	}

	// An update of a missing message fails and writes nothing at all.
	g := testGroup("d:ab", "x")
	for _, missing := range []*pb.Message{
		{ConversationId: "d:ab", Seq: 99, From: "alice"},
		{ConversationId: "d:ab", Seq: 0, From: "alice"},
		{ConversationId: "d:other", Seq: 1, From: "alice"},
	} {
		_, err := s.Apply(ctx, store.Change{
			Event:   event("d:ab", "alice", "r2", pb.MessageKind_MESSAGE_KIND_RECALL, nil),
			Group:   &g,
			Members: []store.Member{member("carol", pb.GroupRole_GROUP_ROLE_MEMBER, 1)},
			Update:  missing,
		})
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Apply updating missing %s/%d: %v, want ErrNotFound", missing.ConversationId, missing.Seq, err)
		}
	}
	if n := lastSeq(t, s, "d:ab"); n != 5 {
		t.Fatalf("LastSeq = %d after failed Applies, want 5", n)
	}
	wantNoGroup(t, s, "d:ab")
	wantNoMember(t, s, "d:ab", "carol")
	if got := conversations(t, s, "carol"); len(got) != 0 {
		t.Fatalf("Conversations(carol) = %q after failed Applies", got)
	}
	if got, err := s.GetMessage(ctx, "d:other", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed Apply stored a message: %v, %v", got, err)
	}
	if got, err := s.GetMessage(ctx, "d:ab", 99); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed Apply stored a message: %v, %v", got, err)
	}
	// The failed attempts did not take the client id: a retry is new and gap-free.
	recalled3 := proto.Clone(m3).(*pb.Message)
	recalled3.Payload, recalled3.ContentType, recalled3.Recalled = nil, "", true
	applyNew(t, s, store.Change{Event: event("d:ab", "alice", "r2", pb.MessageKind_MESSAGE_KIND_RECALL, nil), Update: recalled3}, 6)
	if got := getMessage(t, s, "d:ab", 3); !proto.Equal(got, recalled3) {
		t.Fatalf("recalled message stored as %v, want %v", got, recalled3)
	}
	// An event may update an earlier event.
	updEv := proto.Clone(getMessage(t, s, "d:ab", 5)).(*pb.Message)
	updEv.Recalled = true
	applyNew(t, s, store.Change{Event: event("d:ab", "bob", "r3", pb.MessageKind_MESSAGE_KIND_RECALL, nil), Update: updEv}, 7)
	if got := getMessage(t, s, "d:ab", 5); !proto.Equal(got, updEv) {
		t.Fatalf("updated event stored as %v, want %v", got, updEv)
	}
}

func testGetMessage(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := appendOK(t, s, msg("c1", "alice", "bob", "1"), msg("c1", "alice", "bob", "2"), msg("c10", "alice", "bob", "3"))
	for _, res := range r {
		if got := getMessage(t, s, res.Msg.ConversationId, res.Msg.Seq); !proto.Equal(got, res.Msg) {
			t.Fatalf("GetMessage = %v, want %v", got, res.Msg)
		}
	}
	for _, c := range []struct {
		conv string
		seq  uint64
	}{{"c1", 0}, {"c1", 3}, {"c10", 2}, {"c", 1}, {"nope", 1}} {
		if m, err := s.GetMessage(ctx, c.conv, c.seq); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetMessage(%q, %d) = %v, %v; want ErrNotFound", c.conv, c.seq, m, err)
		}
	}
}

func testGroupRecordReplaced(t *testing.T, s store.Store) {
	wantNoGroup(t, s, "g:1")
	g1 := createGroup(t, s, "g:1", 1)
	g10 := createGroup(t, s, "g:10", 1)
	checkGroup(t, s, g1)
	checkGroup(t, s, g10)
	wantNoGroup(t, s, "g:")
	wantNoGroup(t, s, "g:100")

	// Replaced as a whole, not merged.
	g2 := store.Group{ConversationID: "g:1", Name: "renamed", Owner: "bob", Dissolved: true, CreatedAt: at(1)}
	applyNew(t, s, store.Change{Event: event("g:1", "alice", "u1", pb.MessageKind_MESSAGE_KIND_GROUP_DISSOLVED, nil), Group: &g2}, 2)
	checkGroup(t, s, g2)
	checkGroup(t, s, g10)
	g3 := store.Group{ConversationID: "g:1", MuteAll: true}
	applyNew(t, s, store.Change{Event: event("g:1", "alice", "u2", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil), Group: &g3}, 3)
	checkGroup(t, s, g3)
	got, err := s.GetGroup(context.Background(), "g:1")
	if err != nil || !got.CreatedAt.IsZero() {
		t.Fatalf("zero CreatedAt read back as %v, %v", got.CreatedAt, err)
	}
}

func testMembersPaging(t *testing.T, s store.Store) {
	// Ids of different lengths: the order is by id, bytewise, not by length.
	var ids []string
	for i := 0; i < 40; i++ {
		ids = append(ids, fmt.Sprintf("u%d", i*7%100))
	}
	ids = append(ids, "b", "aa", "zz", "ü", "u", "u0x")
	var seq uint64
	for start := 0; start < len(ids); start += 10 {
		var ms []store.Member
		for i, id := range ids[start:min(start+10, len(ids))] {
			m := member(id, pb.GroupRole_GROUP_ROLE_MEMBER, start+i)
			if i%3 == 1 {
				m.Role = pb.GroupRole_GROUP_ROLE_ADMIN
				m.MutedUntil = at(1000 + i)
			}
			ms = append(ms, m)
		}
		seq++
		applyNew(t, s, store.Change{Event: event("g:big", "u0", fmt.Sprint("add", start), pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil), Members: ms}, seq)
	}
	// Every third leaves, in one Apply.
	var left []store.Member
	var current []string
	for i, id := range ids {
		if i%3 == 2 {
			m := member(id, pb.GroupRole_GROUP_ROLE_MEMBER, i)
			m.Left = true
			left = append(left, m)
		} else {
			current = append(current, id)
		}
	}
	seq++
	applyNew(t, s, store.Change{Event: event("g:big", "u0", "rm", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, nil), Members: left}, seq)
	slices.Sort(current)
	// Neighbouring conversations must not leak in.
	for _, conv := range []string{"g:bi", "g:big2", "g:bigu"} {
		applyNew(t, s, store.Change{Event: event(conv, "x", "add-"+conv, pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil),
			Members: []store.Member{member("a", pb.GroupRole_GROUP_ROLE_MEMBER, 0), member("u50", pb.GroupRole_GROUP_ROLE_MEMBER, 0)}}, 1)
	}

	if got := memberIDs(t, s, "g:big", "", 1000); !slices.Equal(got, current) {
		t.Fatalf("Members = %q, want %q", got, current)
	}
	for _, limit := range []int{1, 7, len(current) - 1, len(current)} {
		var paged []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(current)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			page := memberIDs(t, s, "g:big", after, limit)
			if len(page) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = page[len(page)-1]
		}
		if !slices.Equal(paged, current) {
			t.Fatalf("limit %d: paged %q, want %q", limit, paged, current)
		}
	}
	// after need not be a member.
	for _, after := range []string{"u1", "u", "a", "zzz", "u35"} {
		var want []string
		for _, id := range current {
			if id > after {
				want = append(want, id)
			}
		}
		if got := memberIDs(t, s, "g:big", after, 1000); !slices.Equal(got, want) {
			t.Fatalf("Members(after %q) = %q, want %q", after, got, want)
		}
	}
	if got := memberIDs(t, s, "g:big", "", 0); len(got) != 0 {
		t.Fatalf("Members(limit 0) = %q", got)
	}
	if got := memberIDs(t, s, "g:none", "", 10); len(got) != 0 {
		t.Fatalf("Members of an unknown group = %q", got)
	}
	// Records come back whole.
	ms, err := s.Members(context.Background(), "g:big", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		checkMember(t, s, "g:big", m)
		if m.JoinedAt.IsZero() {
			t.Fatalf("member %q without JoinedAt", m.UserID)
		}
	}
	for _, m := range left {
		m.LeftSeq = 6
		checkMember(t, s, "g:big", m)
	}
}

func testCursorsOfConversation(t *testing.T, s store.Store) {
	ctx := context.Background()
	if cs, err := s.Cursors(ctx, "g:1"); err != nil || len(cs) != 0 {
		t.Fatalf("Cursors of a new conversation = %v, %v", cs, err)
	}
	fill(t, s, "g:1", 5)
	fill(t, s, "g:10", 9)
	fill(t, s, "g:", 9)
	fill(t, s, "g", 9)
	setCursors(t, s,
		store.Cursor{ConversationID: "g:1", UserID: "alice", Delivered: 3, Read: 2},
		store.Cursor{ConversationID: "g:1", UserID: "bob", Delivered: 5, Read: 5},
		store.Cursor{ConversationID: "g:10", UserID: "alice", Delivered: 9, Read: 9},
		store.Cursor{ConversationID: "g:", UserID: "1carol", Delivered: 9, Read: 9},
		store.Cursor{ConversationID: "g", UserID: ":1", Delivered: 9, Read: 9},
	)
	setCursors(t, s, store.Cursor{ConversationID: "g:1", UserID: "alice", Delivered: 4, Read: 1})
	cursors := func(conv string) []store.Cursor {
		cs, err := s.Cursors(ctx, conv)
		if err != nil {
			t.Fatalf("Cursors(%q): %v", conv, err)
		}
		slices.SortFunc(cs, func(a, b store.Cursor) int { return strings.Compare(a.UserID, b.UserID) })
		return cs
	}
	want := []store.Cursor{
		{ConversationID: "g:1", UserID: "alice", Delivered: 4, Read: 2},
		{ConversationID: "g:1", UserID: "bob", Delivered: 5, Read: 5},
	}
	if got := cursors("g:1"); !slices.Equal(got, want) {
		t.Fatalf("Cursors(g:1) = %+v, want %+v", got, want)
	}
	if got := cursors("g:10"); !slices.Equal(got, []store.Cursor{{ConversationID: "g:10", UserID: "alice", Delivered: 9, Read: 9}}) {
		t.Fatalf("Cursors(g:10) = %+v", got)
	}
}

func testConversationSettings(t *testing.T, s store.Store) {
	ctx := context.Background()
	get := func(user, conv string) store.ConversationSettings {
		t.Helper()
		cs, err := s.GetConversationSettings(ctx, user, conv)
		if err != nil {
			t.Fatalf("GetConversationSettings(%q, %q): %v", user, conv, err)
		}
		return cs
	}
	set := func(user, conv string, cs store.ConversationSettings) {
		t.Helper()
		if err := s.SetConversationSettings(ctx, user, conv, cs); err != nil {
			t.Fatalf("SetConversationSettings: %v", err)
		}
	}
	if cs := get("alice", "c1"); cs != (store.ConversationSettings{}) {
		t.Fatalf("unset settings = %+v", cs)
	}
	a1 := store.ConversationSettings{Pinned: true, ClearedSeq: 7}
	a2 := store.ConversationSettings{Muted: true}
	set("alice", "c1", a1)
	set("alice", "c10", a2)
	set("c1", "alice", store.ConversationSettings{Pinned: true, Muted: true, ClearedSeq: 1})
	for _, c := range []struct {
		user, conv string
		want       store.ConversationSettings
	}{{"alice", "c1", a1}, {"alice", "c10", a2}, {"bob", "c1", store.ConversationSettings{}}, {"alice", "c", store.ConversationSettings{}}} {
		if got := get(c.user, c.conv); got != c.want {
			t.Fatalf("settings of %s/%s = %+v, want %+v", c.user, c.conv, got, c.want)
		}
	}
	// Replaced, not merged.
	set("alice", "c1", a2)
	if got := get("alice", "c1"); got != a2 {
		t.Fatalf("replaced settings = %+v, want %+v", got, a2)
	}
	set("alice", "c1", store.ConversationSettings{})
	if got := get("alice", "c1"); got != (store.ConversationSettings{}) {
		t.Fatalf("settings reset to zero = %+v", got)
	}
}

func hidden(t *testing.T, s store.Store, user, conv string, from, to uint64) []uint64 {
	t.Helper()
	got, err := s.HiddenMessages(context.Background(), user, conv, from, to)
	if err != nil {
		t.Fatalf("HiddenMessages(%q, %q, %d, %d): %v", user, conv, from, to, err)
	}
	return got
}

func testHiddenMessages(t *testing.T, s store.Store) {
	ctx := context.Background()
	hide := func(user, conv string, seqs ...uint64) {
		t.Helper()
		if err := s.HideMessages(ctx, user, conv, seqs); err != nil {
			t.Fatalf("HideMessages: %v", err)
		}
	}
	if got := hidden(t, s, "alice", "c1", 0, ^uint64(0)); len(got) != 0 {
		t.Fatalf("hidden before any = %v", got)
	}
	hide("alice", "c1", 5, 3, 9)
	hide("alice", "c1", 3, 12, 300)
	hide("alice", "c1")
	hide("alice", "c10", 4)
	hide("bob", "c1", 6)
	hide("c1", "alice", 7)
	max := ^uint64(0)
	cases := []struct {
		user, conv string
		from, to   uint64
		want       []uint64
	}{
		{"alice", "c1", 0, max, []uint64{3, 5, 9, 12, 300}},
		{"alice", "c1", 3, 9, []uint64{3, 5, 9}},
		{"alice", "c1", 4, 8, []uint64{5}},
		{"alice", "c1", 10, 11, nil},
		{"alice", "c1", 12, 12, []uint64{12}},
		{"alice", "c1", 9, 3, nil},
		{"alice", "c1", 13, max, []uint64{300}},
		{"alice", "c1", 0, 255, []uint64{3, 5, 9, 12}},
		{"alice", "c10", 0, max, []uint64{4}},
		{"bob", "c1", 0, max, []uint64{6}},
		{"alice", "c", 0, max, nil},
		{"carol", "c1", 0, max, nil},
	}
	for _, c := range cases {
		if got := hidden(t, s, c.user, c.conv, c.from, c.to); !slices.Equal(got, c.want) {
			t.Fatalf("HiddenMessages(%s, %s, %d, %d) = %v, want %v", c.user, c.conv, c.from, c.to, got, c.want)
		}
	}
}

func contacts(t *testing.T, s store.Store, owner string) []store.Contact {
	t.Helper()
	cs, err := s.Contacts(context.Background(), owner)
	if err != nil {
		t.Fatalf("Contacts(%q): %v", owner, err)
	}
	for i := range cs {
		cs[i] = normContact(cs[i])
	}
	return cs
}

func testContacts(t *testing.T, s store.Store) {
	ctx := context.Background()
	if c, err := s.GetContact(ctx, "alice", "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetContact of none = %+v, %v; want ErrNotFound", c, err)
	}
	if cs := contacts(t, s, "alice"); len(cs) != 0 {
		t.Fatalf("Contacts of a new user = %+v", cs)
	}
	put := func(owner string, c store.Contact) {
		t.Helper()
		if err := s.PutContact(ctx, owner, c); err != nil {
			t.Fatalf("PutContact: %v", err)
		}
	}
	bob := store.Contact{UserID: "bob", State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: at(1)}
	carol := store.Contact{UserID: "carol", State: pb.ContactState_CONTACT_STATE_REQUEST_SENT, Note: "hi, it's alice ✓", UpdatedAt: at(2)}
	zz := store.Contact{UserID: "zz", State: pb.ContactState_CONTACT_STATE_REQUEST_RECEIVED, Note: "from zz", UpdatedAt: at(3)}
	put("alice", zz)
	put("alice", bob)
	put("alice", carol)
	put("al", store.Contact{UserID: "ice", State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: at(4)})
	put("bob", store.Contact{UserID: "alice", State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: at(5)})

	if got := contacts(t, s, "alice"); !slices.Equal(got, []store.Contact{bob, carol, zz}) {
		t.Fatalf("Contacts(alice) = %+v", got)
	}
	if got := contacts(t, s, "al"); len(got) != 1 || got[0].UserID != "ice" {
		t.Fatalf("Contacts(al) = %+v", got)
	}
	got, err := s.GetContact(ctx, "alice", "carol")
	if err != nil || normContact(got) != carol {
		t.Fatalf("GetContact(alice, carol) = %+v, %v; want %+v", got, err, carol)
	}
	if _, err := s.GetContact(ctx, "carol", "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetContact(carol, alice): %v, want ErrNotFound (records are one-sided)", err)
	}
	// Replace.
	carol.State, carol.Note, carol.UpdatedAt = pb.ContactState_CONTACT_STATE_FRIEND, "", at(9)
	put("alice", carol)
	if got, err := s.GetContact(ctx, "alice", "carol"); err != nil || normContact(got) != carol {
		t.Fatalf("replaced contact = %+v, %v; want %+v", got, err, carol)
	}
	// Delete, also of an absent record.
	for _, u := range []string{"bob", "bob", "nobody"} {
		if err := s.DeleteContact(ctx, "alice", u); err != nil {
			t.Fatalf("DeleteContact(alice, %q): %v", u, err)
		}
	}
	if _, err := s.GetContact(ctx, "alice", "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetContact after delete: %v, want ErrNotFound", err)
	}
	if got := contacts(t, s, "alice"); !slices.Equal(got, []store.Contact{carol, zz}) {
		t.Fatalf("Contacts(alice) after delete = %+v", got)
	}
	if got := contacts(t, s, "bob"); len(got) != 1 || got[0].UserID != "alice" {
		t.Fatalf("Contacts(bob) = %+v; alice's delete touched bob's side", got)
	}
}

func blocked(t *testing.T, s store.Store, owner string) []string {
	t.Helper()
	got, err := s.Blocked(context.Background(), owner)
	if err != nil {
		t.Fatalf("Blocked(%q): %v", owner, err)
	}
	return got
}

func isBlocked(t *testing.T, s store.Store, owner, user string) bool {
	t.Helper()
	ok, err := s.IsBlocked(context.Background(), owner, user)
	if err != nil {
		t.Fatalf("IsBlocked(%q, %q): %v", owner, user, err)
	}
	return ok
}

func testBlocks(t *testing.T, s store.Store) {
	ctx := context.Background()
	if isBlocked(t, s, "alice", "bob") || len(blocked(t, s, "alice")) != 0 {
		t.Fatal("new store has blocks")
	}
	set := func(owner, user string, b bool) {
		t.Helper()
		if err := s.SetBlocked(ctx, owner, user, b); err != nil {
			t.Fatalf("SetBlocked(%q, %q, %v): %v", owner, user, b, err)
		}
	}
	set("alice", "zz", true)
	set("alice", "bob", true)
	set("alice", "carol", true)
	set("alice", "bob", true) // twice: listed once
	set("al", "ice", true)
	set("alice", "nobody", false) // unblocking someone not blocked is fine
	if got := blocked(t, s, "alice"); !slices.Equal(got, []string{"bob", "carol", "zz"}) {
		t.Fatalf("Blocked(alice) = %q", got)
	}
	if got := blocked(t, s, "al"); !slices.Equal(got, []string{"ice"}) {
		t.Fatalf("Blocked(al) = %q", got)
	}
	if !isBlocked(t, s, "alice", "bob") || isBlocked(t, s, "bob", "alice") || isBlocked(t, s, "alice", "bo") || isBlocked(t, s, "al", "bob") {
		t.Fatal("IsBlocked wrong")
	}
	set("alice", "carol", false)
	if isBlocked(t, s, "alice", "carol") {
		t.Fatal("IsBlocked after unblock")
	}
	if got := blocked(t, s, "alice"); !slices.Equal(got, []string{"bob", "zz"}) {
		t.Fatalf("Blocked(alice) after unblock = %q", got)
	}
}

func testLastSeen(t *testing.T, s store.Store) {
	ctx := context.Background()
	get := func(user string) time.Time {
		t.Helper()
		ts, err := s.LastSeen(ctx, user)
		if err != nil {
			t.Fatalf("LastSeen(%q): %v", user, err)
		}
		return ts
	}
	if ts := get("alice"); !ts.IsZero() {
		t.Fatalf("LastSeen of an unknown user = %v", ts)
	}
	for _, ts := range []time.Time{at(5), at(9), at(7)} { // the last write wins
		if err := s.SetLastSeen(ctx, "alice", ts); err != nil {
			t.Fatalf("SetLastSeen: %v", err)
		}
		if got := get("alice"); !got.Equal(ts) {
			t.Fatalf("LastSeen = %v, want %v", got, ts)
		}
	}
	if ts := get("alic"); !ts.IsZero() {
		t.Fatalf("LastSeen(alic) = %v", ts)
	}
}

// testConcurrentApplyAndAppend: Apply and Append on one conversation share
// its sequence: seqs stay gap-free and each entry is stored once.
func testConcurrentApplyAndAppend(t *testing.T, s store.Store) {
	const workers, n = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	var mu sync.Mutex
	got := map[uint64]string{} // seq → from/client id
	record := func(m *pb.Message) error {
		mu.Lock()
		defer mu.Unlock()
		id := m.From + "/" + m.ClientMsgId
		if prev, ok := got[m.Seq]; ok {
			return fmt.Errorf("seq %d given to %s and %s", m.Seq, prev, id)
		}
		got[m.Seq] = id
		return nil
	}
	for w := 0; w < workers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				res, err := s.Append(context.Background(), []*pb.Message{msg("g:c", fmt.Sprint("sender", w), "", fmt.Sprint(i))})
				if err == nil {
					err = record(res[0].Msg)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				user := fmt.Sprintf("member%d-%d", w, i)
				res, err := s.Apply(context.Background(), store.Change{
					Event:   event("g:c", fmt.Sprint("admin", w), fmt.Sprint(i), pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil),
					Members: []store.Member{member(user, pb.GroupRole_GROUP_ROLE_MEMBER, i)},
				})
				if err == nil && res.Duplicate {
					err = fmt.Errorf("fresh event %s reported Duplicate", user)
				}
				if err == nil {
					err = record(res.Msg)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stored := all(t, s, "g:c")
	wantSeqs(t, "g:c", stored, seqRange(1, 2*workers*n))
	for _, m := range stored {
		if id := m.From + "/" + m.ClientMsgId; got[m.Seq] != id {
			t.Fatalf("seq %d stored %s, reported %s", m.Seq, id, got[m.Seq])
		}
	}
	if ms := memberIDs(t, s, "g:c", "", 1000); len(ms) != workers*n {
		t.Fatalf("%d members, want %d", len(ms), workers*n)
	}
}

// testMessageHeads: MessageHeads is Messages' page with only seq, sender,
// kind and recalled, for plain messages, events that name many users and
// recalled messages alike.
func testMessageHeads(t *testing.T, s store.Store) {
	ctx := context.Background()
	appendOK(t, s, msg("g:h", "alice", "", "m1"), msg("g:h", "bob", "", "m2"))
	users := make([]string, 300)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
	}
	applyNew(t, s, store.Change{Event: event("g:h", "alice", "add1", pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, &pb.MessageEvent{UserIds: users})}, 3)
	appendOK(t, s, msg("g:h", "carol", "", "m4"))
	m1 := getMessage(t, s, "g:h", 1)
	recalled := proto.Clone(m1).(*pb.Message)
	recalled.Payload, recalled.ContentType, recalled.Recalled = nil, "", true
	applyNew(t, s, store.Change{Event: event("g:h", "alice", "r1", pb.MessageKind_MESSAGE_KIND_RECALL, &pb.MessageEvent{TargetSeq: 1}), Update: recalled}, 5)

	msgs := all(t, s, "g:h")
	for _, page := range []struct {
		after uint64
		limit int
	}{{0, 100}, {0, 2}, {2, 2}, {4, 10}, {5, 10}, {99, 10}} {
		heads, err := s.MessageHeads(ctx, "g:h", page.after, page.limit)
		if err != nil {
			t.Fatalf("MessageHeads(after %d, limit %d): %v", page.after, page.limit, err)
		}
		var want []store.MessageHead
		for _, m := range msgs {
			if m.Seq > page.after && len(want) < page.limit {
				want = append(want, store.MessageHead{Seq: m.Seq, From: m.From, Kind: m.Kind, Recalled: m.Recalled})
			}
		}
		if !slices.EqualFunc(heads, want, sameHead) {
			t.Fatalf("MessageHeads(after %d, limit %d) = %+v, want %+v", page.after, page.limit, heads, want)
		}
	}
	if h, err := s.MessageHeads(ctx, "g:h", 0, 0); err != nil || len(h) != 0 {
		t.Fatalf("MessageHeads with limit 0 = %v, %v; want none", h, err)
	}
	if h, err := s.MessageHeads(ctx, "g:none", 0, 10); err != nil || len(h) != 0 {
		t.Fatalf("MessageHeads of an empty conversation = %v, %v; want none", h, err)
	}
	if heads, _ := s.MessageHeads(ctx, "g:h", 0, 10); len(heads) != 5 || !heads[0].Recalled || heads[2].Kind != pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED || heads[3].From != "carol" {
		t.Fatalf("MessageHeads = %+v: the recall, the event or a sender is missing", heads)
	}
}

// sameHead compares heads field by field (MessageHead holds a slice).
func sameHead(a, b store.MessageHead) bool {
	return a.Seq == b.Seq && a.From == b.From && a.Kind == b.Kind && a.Recalled == b.Recalled &&
		a.SenderOnly == b.SenderOnly && a.ThreadRoot == b.ThreadRoot && a.MentionAll == b.MentionAll &&
		slices.Equal(a.Mentions, b.Mentions)
}
