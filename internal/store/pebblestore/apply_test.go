package pebblestore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func mustApply(t *testing.T, s *Store, ch store.Change) store.AppendResult {
	t.Helper()
	res, err := s.Apply(context.Background(), ch)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// TestFailedApplyWritesNothing: an Apply that fails after its seq was
// assigned (the update cannot be encoded) stores nothing, leaves the seq
// unused and the client id free.
func TestFailedApplyWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustAppend(t, s, message("g:1", "alice", "", "0"))
	bad := message("g:1", "alice", "", "0")
	bad.Seq = 1
	bad.ContentType = "\xff\xfe" // not UTF-8: proto.Marshal refuses it
	ev := message("g:1", "alice", "", "ev")
	g := store.Group{ConversationID: "g:1", Name: "n"}
	_, err := s.Apply(ctx, store.Change{Event: ev, Group: &g, Members: []store.Member{{UserID: "bob"}}, Update: bad})
	if err == nil {
		t.Fatal("Apply with an unencodable update succeeded")
	}
	if ev.Seq != 0 {
		t.Fatalf("failed Apply left seq %d on the event", ev.Seq)
	}
	if n, _ := s.LastSeq(ctx, "g:1"); n != 1 {
		t.Fatalf("LastSeq = %d, want 1", n)
	}
	if _, err := s.GetGroup(ctx, "g:1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed Apply wrote the group: %v", err)
	}
	if _, err := s.GetMember(ctx, "g:1", "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed Apply wrote the member: %v", err)
	}
	res := mustApply(t, s, store.Change{Event: message("g:1", "alice", "", "ev")})
	if res.Duplicate || res.Msg.Seq != 2 {
		t.Fatalf("after a failed Apply: seq %d duplicate %v, want 2 false", res.Msg.Seq, res.Duplicate)
	}
}

func TestApplyRejectsMalformedChanges(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for name, ch := range map[string]store.Change{
		"no event":            {},
		"no conversation":     {Event: message("", "a", "", "1")},
		"group of another":    {Event: message("g:1", "a", "", "1"), Group: &store.Group{ConversationID: "g:2"}},
		"member without id":   {Event: message("g:1", "a", "", "1"), Members: []store.Member{{}}},
		"update without conv": {Event: message("g:1", "a", "", "1"), Update: &pb.Message{Seq: 1}},
	} {
		if _, err := s.Apply(ctx, ch); err == nil {
			t.Errorf("%s: Apply succeeded", name)
		}
	}
	if n, _ := s.LastSeq(ctx, "g:1"); n != 0 {
		t.Fatalf("LastSeq = %d after rejected Applies", n)
	}
	// A group with an empty ConversationID takes the event's.
	mustApply(t, s, store.Change{Event: message("g:1", "a", "", "1"), Group: &store.Group{Name: "x"}})
	if g, err := s.GetGroup(ctx, "g:1"); err != nil || g.ConversationID != "g:1" || g.Name != "x" {
		t.Fatalf("GetGroup = %+v, %v", g, err)
	}
}

// rawKeys returns the keys stored under prefix.
func rawKeys(t *testing.T, s *Store, prefix []byte) [][]byte {
	t.Helper()
	var out [][]byte
	err := s.iterate(context.Background(), prefix, prefixEnd(prefix), func(key, _ []byte) (bool, error) {
		out = append(out, slices.Clone(key))
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMemberAndContactIDsWithAnyBytes: raw trailing ids order bytewise,
// NUL and 0xff included, and do not leak between similar conversations or owners.
func TestMemberAndContactIDsWithAnyBytes(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := []string{"a", "a\x00", "a\x00b", "\x01", "\xff", "b", "a\xff"}
	want := slices.Clone(ids)
	slices.Sort(want)
	for _, conv := range []string{"g", "g\x00", "g\x01"} {
		var ms []store.Member
		for _, id := range ids {
			ms = append(ms, store.Member{UserID: id + conv})
		}
		if conv == "g" {
			ms = ms[:0]
			for _, id := range ids {
				ms = append(ms, store.Member{UserID: id})
			}
		}
		mustApply(t, s, store.Change{Event: message(conv, "x", "", "1"), Members: ms})
	}
	got, err := s.Members(ctx, "g", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, m := range got {
		gotIDs = append(gotIDs, m.UserID)
	}
	if !slices.Equal(gotIDs, want) {
		t.Fatalf("Members(g) = %q, want %q", gotIDs, want)
	}
	page, err := s.Members(ctx, "g", "a", 2)
	if err != nil || len(page) != 2 || page[0].UserID != "a\x00" || page[1].UserID != "a\x00b" {
		t.Fatalf("Members(after a) = %+v, %v", page, err)
	}

	// Leaving moves the record out of the current members' range.
	mustApply(t, s, store.Change{Event: message("g", "x", "", "2"), Members: []store.Member{{UserID: "a\x00", Left: true}}})
	for _, k := range rawKeys(t, s, memberPrefix(nil, nsMember, "g")) {
		if string(k) == string(memberKey(nil, nsMember, "g", "a\x00")) {
			t.Fatal("a member who left is still in the current members' range")
		}
	}
	if m, err := s.GetMember(ctx, "g", "a\x00"); err != nil || !m.Left || m.LeftSeq != 2 {
		t.Fatalf("GetMember of a past member = %+v, %v", m, err)
	}
	if _, err := s.GetMember(ctx, "g", "a\x00\x00"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMember of a non-member: %v", err)
	}

	for _, owner := range []string{"o", "o\x00", "o\x00a"} {
		for _, id := range ids {
			if err := s.PutContact(ctx, owner, store.Contact{UserID: id, Note: owner}); err != nil {
				t.Fatal(err)
			}
			if err := s.SetBlocked(ctx, owner, id, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, owner := range []string{"o", "o\x00", "o\x00a"} {
		cs, err := s.Contacts(ctx, owner)
		if err != nil || len(cs) != len(want) {
			t.Fatalf("Contacts(%q) = %d, %v", owner, len(cs), err)
		}
		for i, c := range cs {
			if c.UserID != want[i] || c.Note != owner {
				t.Fatalf("Contacts(%q)[%d] = %+v", owner, i, c)
			}
		}
		if bl, err := s.Blocked(ctx, owner); err != nil || !slices.Equal(bl, want) {
			t.Fatalf("Blocked(%q) = %q, %v", owner, bl, err)
		}
	}
	if err := s.PutContact(ctx, "o", store.Contact{}); err == nil {
		t.Fatal("PutContact accepted an empty user id")
	}
}

func TestCorruptNewRecordsAreNeverServed(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	g := store.Group{ConversationID: "g:1", Name: "n", CreatedAt: time.Now()}
	mustApply(t, s, store.Change{Event: message("g:1", "alice", "", "1"), Group: &g,
		Members: []store.Member{{UserID: "alice"}, {UserID: "bob"}, {UserID: "carol", Left: true}}})
	if err := s.SetCursors(ctx, []store.Cursor{{ConversationID: "g:1", UserID: "bob", Read: 1}}); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetConversationSettings(ctx, "alice", "g:1", store.ConversationSettings{Pinned: true}))
	must(s.HideMessages(ctx, "alice", "g:1", []uint64{1}))
	must(s.PutContact(ctx, "alice", store.Contact{UserID: "bob"}))
	must(s.SetBlocked(ctx, "alice", "bob", true))
	must(s.SetLastSeen(ctx, "alice", time.Now()))

	rewrite(t, s, groupKey(nil, "g:1"), flipByte(2))
	_, err := s.GetGroup(ctx, "g:1")
	wantCorrupt(t, "GetGroup", err)

	rewrite(t, s, memberKey(nil, nsMember, "g:1", "bob"), flipByte(1))
	_, err = s.GetMember(ctx, "g:1", "bob")
	wantCorrupt(t, "GetMember", err)
	_, err = s.Members(ctx, "g:1", "", 10)
	wantCorrupt(t, "Members", err)
	if ms, err := s.Members(ctx, "g:1", "", 1); err != nil || len(ms) != 1 || ms[0].UserID != "alice" {
		t.Fatalf("Members page before the corrupt record = %+v, %v", ms, err)
	}
	rewrite(t, s, memberKey(nil, nsPastMember, "g:1", "carol"), flipByte(1))
	_, err = s.GetMember(ctx, "g:1", "carol")
	wantCorrupt(t, "GetMember of a past member", err)

	rewrite(t, s, cursorKey(nil, "g:1", "bob"), flipByte(1))
	_, err = s.Cursors(ctx, "g:1")
	wantCorrupt(t, "Cursors", err)

	rewrite(t, s, settingsKey(nil, "alice", "g:1"), flipByte(1))
	_, err = s.GetConversationSettings(ctx, "alice", "g:1")
	wantCorrupt(t, "GetConversationSettings", err)

	rewrite(t, s, hiddenKey(nil, "alice", "g:1", 1), flipByte(1))
	_, err = s.HiddenMessages(ctx, "alice", "g:1", 0, 10)
	wantCorrupt(t, "HiddenMessages", err)

	rewrite(t, s, ownedKey(nil, nsContact, "alice", "bob"), flipByte(1))
	_, err = s.GetContact(ctx, "alice", "bob")
	wantCorrupt(t, "GetContact", err)
	_, err = s.Contacts(ctx, "alice")
	wantCorrupt(t, "Contacts", err)

	rewrite(t, s, ownedKey(nil, nsBlock, "alice", "bob"), flipByte(1))
	_, err = s.IsBlocked(ctx, "alice", "bob")
	wantCorrupt(t, "IsBlocked", err)
	_, err = s.Blocked(ctx, "alice")
	wantCorrupt(t, "Blocked", err)

	rewrite(t, s, lastSeenKey(nil, "alice"), flipByte(1))
	_, err = s.LastSeen(ctx, "alice")
	wantCorrupt(t, "LastSeen", err)

	// A corrupt target of an update fails the Apply and writes nothing.
	rewrite(t, s, messageKey(nil, "g:1", 1), flipByte(-8))
	upd := message("g:1", "alice", "", "1")
	upd.Seq = 1
	_, err = s.Apply(ctx, store.Change{Event: message("g:1", "alice", "", "2"), Update: upd})
	wantCorrupt(t, "Apply updating a corrupt message", err)
	_, err = s.GetMessage(ctx, "g:1", 1)
	wantCorrupt(t, "GetMessage", err)
	if n, _ := s.LastSeq(ctx, "g:1"); n != 1 {
		t.Fatalf("LastSeq = %d, want 1", n)
	}
}
