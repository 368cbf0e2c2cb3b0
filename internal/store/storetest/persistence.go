package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// RunPersistence runs the restart tests, for stores whose data outlives
// Close. newStore is called once per subtest; it prepares one fresh, empty
// location (a directory, a database) and returns open, which opens a store
// on that same location each time it is called (reporting failures through
// the t it was given). The suite closes each store before opening the
// location again.
func RunPersistence(t *testing.T, newStore func(t *testing.T) (open func() store.Store)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() store.Store)
	}{
		{"MessagesAndSeqsSurvive", testRestartMessages},
		{"DedupSurvives", testRestartDedup},
		{"RecordsSurvive", testRestartRecords},
		{"RepeatedRestarts", testRepeatedRestarts},
		{"ChangesSurvive", testRestartChanges},
		{"SocialRecordsSurvive", testRestartSocial},
		{"RaisedSeqSurvives", testRestartRaisedSeq},
		{"ModerationSurvives", testRestartModeration},
		{"RichMessagesSurvive", testRestartRich},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// reopen closes s and opens the same location again.
func reopen(t *testing.T, s store.Store, open func() store.Store) store.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openStore(t *testing.T, open func() store.Store) store.Store {
	s := open()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testRestartMessages(t *testing.T, open func() store.Store) {
	s := openStore(t, open)
	var want []*pb.Message
	for b := 0; b < 3; b++ {
		for _, r := range appendOK(t, s,
			msg("c1", "alice", "bob", fmt.Sprintf("%d-a", b)), msg("c2", "bob", "carol", fmt.Sprintf("%d-b", b)),
			msg("c1", "bob", "alice", fmt.Sprintf("%d-c", b))) {
			want = append(want, proto.Clone(r.Msg).(*pb.Message))
		}
	}
	s = reopen(t, s, open)

	got := append(all(t, s, "c1"), all(t, s, "c2")...)
	wantSeqs(t, "c1 after restart", got[:6], seqRange(1, 6))
	wantSeqs(t, "c2 after restart", got[6:], seqRange(1, 3))
	byID := map[string]*pb.Message{}
	for _, m := range got {
		byID[m.From+"/"+m.ClientMsgId] = m
	}
	for _, w := range want {
		g := byID[w.From+"/"+w.ClientMsgId]
		if g == nil || !proto.Equal(g, w) {
			t.Fatalf("after restart: %v, want %v", g, w)
		}
	}
	if n := lastSeq(t, s, "c1"); n != 6 {
		t.Fatalf("LastSeq(c1) after restart = %d, want 6", n)
	}
	h, err := s.History(context.Background(), "c1", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "History after restart", h, []uint64{5, 6})

	res := appendOK(t, s, msg("c2", "carol", "bob", "new"), msg("c1", "alice", "bob", "new"), msg("c3", "alice", "", "new3"))
	for i, want := range []uint64{4, 7, 1} {
		if res[i].Msg.Seq != want || res[i].Duplicate {
			t.Fatalf("append after restart, msg %d: seq %d duplicate %v, want %d false", i, res[i].Msg.Seq, res[i].Duplicate, want)
		}
	}
}

func testRestartDedup(t *testing.T, open func() store.Store) {
	s := openStore(t, open)
	orig := appendOK(t, s, msg("c1", "alice", "bob", "x"), msg("c1", "alice", "bob", "y"))
	want := proto.Clone(orig[0].Msg).(*pb.Message)
	s = reopen(t, s, open)

	retry := msg("c1", "alice", "bob", "x")
	retry.Payload = []byte("changed")
	res := appendOK(t, s, retry, msg("c1", "alice", "bob", "z"))
	if !res[0].Duplicate || !proto.Equal(res[0].Msg, want) {
		t.Fatalf("resend after restart: duplicate %v msg %v; want true %v", res[0].Duplicate, res[0].Msg, want)
	}
	if res[1].Duplicate || res[1].Msg.Seq != 3 {
		t.Fatalf("new message after restart: seq %d duplicate %v, want 3 false", res[1].Msg.Seq, res[1].Duplicate)
	}
	wantSeqs(t, "stored", all(t, s, "c1"), []uint64{1, 2, 3})
}

func testRestartRecords(t *testing.T, open func() store.Store) {
	ctx := context.Background()
	s := openStore(t, open)
	appendOK(t, s, msg("d1", "alice", "bob", "1"), msg("g1", "carol", "", "2"))
	setCursors(t, s, store.Cursor{ConversationID: "d1", UserID: "bob", Delivered: 1, Read: 1})
	u := store.User{ID: "alice", PasswordHash: "h", TokenEpoch: 2, CreatedAt: time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, "tok", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, open)

	if d, r := getCursor(t, s, "d1", "bob"); d != 1 || r != 1 {
		t.Fatalf("cursor after restart = %d/%d, want 1/1", d, r)
	}
	setCursors(t, s, store.Cursor{ConversationID: "d1", UserID: "bob", Delivered: 0, Read: 0})
	if d, r := getCursor(t, s, "d1", "bob"); d != 1 || r != 1 {
		t.Fatalf("cursor lowered after restart: %d/%d", d, r)
	}
	checkUser(t, s, u)
	if !tokenRevoked(t, s, "tok") {
		t.Fatal("revocation lost in restart")
	}
	for user, want := range map[string][]string{"alice": {"d1"}, "bob": {"d1"}, "carol": {"g1"}} {
		if got := conversations(t, s, user); !slices.Equal(got, want) {
			t.Fatalf("Conversations(%q) after restart = %q, want %q", user, got, want)
		}
	}
	// New messages in known conversations do not duplicate list entries.
	appendOK(t, s, msg("d1", "bob", "alice", "3"), msg("g1", "alice", "", "4"))
	if got := conversations(t, s, "alice"); !slices.Equal(got, []string{"d1", "g1"}) {
		t.Fatalf("Conversations(alice) = %q, want [d1 g1]", got)
	}
	if got := conversations(t, s, "bob"); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("Conversations(bob) = %q, want [d1]", got)
	}
}

func testRepeatedRestarts(t *testing.T, open func() store.Store) {
	s := openStore(t, open)
	var n uint64
	for round := 0; round < 4; round++ {
		for i := 0; i < round+1; i++ {
			res := appendOK(t, s, msg("c1", "alice", "bob", fmt.Sprintf("%d-%d", round, i)))
			n++
			if res[0].Msg.Seq != n {
				t.Fatalf("round %d: seq %d, want %d", round, res[0].Msg.Seq, n)
			}
		}
		s = reopen(t, s, open)
		wantSeqs(t, fmt.Sprintf("round %d", round), all(t, s, "c1"), seqRange(1, n))
	}
}

// testRestartChanges: events, groups, members (current and past) and
// updated messages survive a restart, as do the event's de-dup and seq.
func testRestartChanges(t *testing.T, open func() store.Store) {
	ctx := context.Background()
	s := openStore(t, open)
	g := createGroup(t, s, "g:1", 1, "bob", "carol")
	bob := member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 1)
	bob.Left = true
	rm := applyNew(t, s, store.Change{
		Event:   event("g:1", "alice", "rm", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, &pb.MessageEvent{UserIds: []string{"bob"}}),
		Members: []store.Member{bob},
	}, 2)
	removal := proto.Clone(rm.Msg).(*pb.Message)
	bob.LeftSeq = 2
	m := appendOK(t, s, msg("g:1", "carol", "", "hello"))[0].Msg
	recalled := proto.Clone(m).(*pb.Message)
	recalled.Payload, recalled.ContentType, recalled.Recalled = nil, "", true
	applyNew(t, s, store.Change{Event: event("g:1", "carol", "recall", pb.MessageKind_MESSAGE_KIND_RECALL, nil), Update: recalled}, 4)
	setCursors(t, s, store.Cursor{ConversationID: "g:1", UserID: "carol", Delivered: 4, Read: 3})
	s = reopen(t, s, open)

	checkGroup(t, s, g)
	checkMember(t, s, "g:1", bob)
	checkMember(t, s, "g:1", member("carol", pb.GroupRole_GROUP_ROLE_MEMBER, 1))
	if got := memberIDs(t, s, "g:1", "", 10); !slices.Equal(got, []string{"alice", "carol"}) {
		t.Fatalf("Members after restart = %q", got)
	}
	if got := getMessage(t, s, "g:1", 3); !proto.Equal(got, recalled) {
		t.Fatalf("recalled message after restart = %v, want %v", got, recalled)
	}
	if got := getMessage(t, s, "g:1", 2); !proto.Equal(got, removal) {
		t.Fatalf("event after restart = %v, want %v", got, removal)
	}
	wantConversation(t, s, "bob", "g:1")
	if cs, err := s.Cursors(ctx, "g:1"); err != nil || len(cs) != 1 || cs[0].Read != 3 {
		t.Fatalf("Cursors after restart = %+v, %v", cs, err)
	}
	// The removal's resend is still a duplicate; new events continue the sequence.
	res := applyOK(t, s, store.Change{
		Event:   event("g:1", "alice", "rm", pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED, nil),
		Members: []store.Member{member("bob", pb.GroupRole_GROUP_ROLE_MEMBER, 9)},
	})
	if !res.Duplicate || !proto.Equal(res.Msg, removal) {
		t.Fatalf("resent event after restart: duplicate %v msg %v", res.Duplicate, res.Msg)
	}
	checkMember(t, s, "g:1", bob)
	applyNew(t, s, store.Change{Event: event("g:1", "alice", "next", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil)}, 5)
	if r := appendOK(t, s, msg("g:1", "alice", "", "after")); r[0].Msg.Seq != 6 {
		t.Fatalf("Append after restart: seq %d, want 6", r[0].Msg.Seq)
	}
}

func testRestartSocial(t *testing.T, open func() store.Store) {
	ctx := context.Background()
	s := openStore(t, open)
	cs := store.ConversationSettings{Pinned: true, Muted: true, ClearedSeq: 42}
	if err := s.SetConversationSettings(ctx, "alice", "c1", cs); err != nil {
		t.Fatal(err)
	}
	if err := s.HideMessages(ctx, "alice", "c1", []uint64{7, 3}); err != nil {
		t.Fatal(err)
	}
	c := store.Contact{UserID: "bob", State: pb.ContactState_CONTACT_STATE_REQUEST_SENT, Note: "hello", UpdatedAt: at(3)}
	if err := s.PutContact(ctx, "alice", c); err != nil {
		t.Fatal(err)
	}
	if err := s.PutContact(ctx, "alice", store.Contact{UserID: "carol", State: pb.ContactState_CONTACT_STATE_FRIEND}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteContact(ctx, "alice", "carol"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"mallory", "eve"} {
		if err := s.SetBlocked(ctx, "alice", u, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetBlocked(ctx, "alice", "eve", false); err != nil {
		t.Fatal(err)
	}
	seen := at(11)
	if err := s.SetLastSeen(ctx, "alice", seen); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, open)

	if got, err := s.GetConversationSettings(ctx, "alice", "c1"); err != nil || got != cs {
		t.Fatalf("settings after restart = %+v, %v; want %+v", got, err, cs)
	}
	if got := hidden(t, s, "alice", "c1", 0, 100); !slices.Equal(got, []uint64{3, 7}) {
		t.Fatalf("hidden after restart = %v", got)
	}
	if got := contacts(t, s, "alice"); !slices.Equal(got, []store.Contact{c}) {
		t.Fatalf("contacts after restart = %+v, want [%+v]", got, c)
	}
	if got := blocked(t, s, "alice"); !slices.Equal(got, []string{"mallory"}) {
		t.Fatalf("blocked after restart = %q", got)
	}
	if got, err := s.LastSeen(ctx, "alice"); err != nil || !got.Equal(seen) {
		t.Fatalf("LastSeen after restart = %v, %v; want %v", got, err, seen)
	}
}
