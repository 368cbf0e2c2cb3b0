package storetest

import (
	"context"
	"testing"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// testGroupPolicy: a group's add policy and history visibility round-trip;
// a Joined change gives its members the event's seq as JoinSeq (an explicit
// one is kept, other changes leave it as passed), and a member removed and
// added again gets the new seq.
func testGroupPolicy(t *testing.T, s store.Store) {
	ctx := context.Background()
	g := store.Group{ConversationID: "g:p", Name: "p", Owner: "alice", CreatedAt: at(0),
		AddPolicy: pb.GroupAddPolicy_GROUP_ADD_POLICY_EVERYONE, HistoryVisibility: pb.HistoryVisibility_HISTORY_VISIBILITY_ALL}
	alice, bob := member("alice", pb.GroupRole_GROUP_ROLE_OWNER, 0), member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 0)
	applyNew(t, s, store.Change{
		Event: event("g:p", "alice", "create", pb.MessageKind_MESSAGE_KIND_GROUP_CREATED, nil),
		Group: &g, Members: []store.Member{alice, bob}, Joined: true,
	}, 1)
	checkGroup(t, s, g)
	alice.JoinSeq, bob.JoinSeq = 1, 1
	checkMember(t, s, "g:p", alice)
	checkMember(t, s, "g:p", bob)

	appendOK(t, s, msg("g:p", "alice", "", "m2"))
	carol, dave := member("carol", pb.GroupRole_GROUP_ROLE_MEMBER, 3), member("dave", pb.GroupRole_GROUP_ROLE_MEMBER, 3)
	dave.JoinSeq = 2 // explicit: kept
	applyNew(t, s, store.Change{
		Event:   event("g:p", "alice", "add", pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil),
		Members: []store.Member{carol, dave}, Joined: true,
	}, 3)
	carol.JoinSeq = 3
	checkMember(t, s, "g:p", carol)
	checkMember(t, s, "g:p", dave)

	// A change that is not a join keeps JoinSeq as passed, 0 included (a
	// member from before JoinSeq existed stays one).
	carol.Role = pb.GroupRole_GROUP_ROLE_ADMIN
	legacy := member("erin", pb.GroupRole_GROUP_ROLE_MEMBER, 0)
	applyNew(t, s, store.Change{
		Event:   event("g:p", "alice", "role", pb.MessageKind_MESSAGE_KIND_ROLE_CHANGED, nil),
		Members: []store.Member{carol, legacy},
	}, 4)
	checkMember(t, s, "g:p", carol)
	checkMember(t, s, "g:p", legacy)

	// Removed, then added again: Left cleared, JoinSeq the new addition's.
	bob.Left = true
	applyNew(t, s, store.Change{
		Event:   event("g:p", "alice", "rm", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, nil),
		Members: []store.Member{bob},
	}, 5)
	bob.LeftSeq = 5
	checkMember(t, s, "g:p", bob)
	appendOK(t, s, msg("g:p", "alice", "", "m6"))
	back := member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 7)
	applyNew(t, s, store.Change{
		Event:   event("g:p", "alice", "readd", pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, nil),
		Members: []store.Member{back}, Joined: true,
	}, 7)
	back.JoinSeq = 7
	checkMember(t, s, "g:p", back)
	list, err := s.Members(ctx, "g:p", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"alice": 1, "bob": 7, "carol": 3, "dave": 2, "erin": 0}
	if len(list) != len(want) {
		t.Fatalf("Members = %+v", list)
	}
	for _, m := range list {
		if m.JoinSeq != want[m.UserID] {
			t.Fatalf("Members: %s JoinSeq %d, want %d", m.UserID, m.JoinSeq, want[m.UserID])
		}
	}

	// Settings change with the group record; a group without them reads zero.
	g.AddPolicy, g.HistoryVisibility = pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS, pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN
	applyNew(t, s, store.Change{Event: event("g:p", "alice", "upd", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil), Group: &g}, 8)
	checkGroup(t, s, g)
	plain := store.Group{ConversationID: "g:q", Name: "q", Owner: "alice", CreatedAt: at(0)}
	applyNew(t, s, store.Change{Event: event("g:q", "alice", "cq", pb.MessageKind_MESSAGE_KIND_GROUP_CREATED, nil), Group: &plain}, 1)
	checkGroup(t, s, plain)
}
