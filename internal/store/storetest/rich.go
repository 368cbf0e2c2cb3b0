package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// reply builds a reply in root's thread.
func reply(conv, from, clientID string, root uint64, serverTime int64) *pb.Message {
	m := msg(conv, from, "", clientID)
	m.ThreadRoot, m.ServerTime = root, serverTime
	return m
}

func threads(t *testing.T, s store.Store, conv string, roots ...uint64) map[uint64]store.ThreadSummary {
	t.Helper()
	got, err := s.Threads(context.Background(), conv, roots)
	if err != nil {
		t.Fatalf("Threads(%q, %v): %v", conv, roots, err)
	}
	return got
}

func inThread(t *testing.T, s store.Store, conv string, root uint64, user string) bool {
	t.Helper()
	in, err := s.InThread(context.Background(), conv, root, user)
	if err != nil {
		t.Fatalf("InThread(%q, %d, %q): %v", conv, root, user, err)
	}
	return in
}

// testThreads: replies are indexed under their root, counted in its summary
// (SenderOnly ones are listed but not counted) and make their senders
// participants; resends count once.
func testThreads(t *testing.T, s store.Store) {
	ctx := context.Background()
	appendOK(t, s, msg("g:t", "alice", "", "root1"), msg("g:t", "alice", "", "root2"))
	if got := threads(t, s, "g:t", 1, 2); len(got) != 0 {
		t.Fatalf("Threads before any reply = %v", got)
	}
	hidden := reply("g:t", "mallory", "h1", 1, 1500)
	hidden.SenderOnly = true
	appendOK(t, s,
		reply("g:t", "bob", "r1", 1, 1000),   // 3
		msg("g:t", "carol", "", "plain"),     // 4
		reply("g:t", "carol", "r2", 2, 1100), // 5
		hidden,                               // 6
		reply("g:t", "carol", "r3", 1, 1200), // 7
		reply("g:t", "bob", "r1", 1, 9999),   // a resend of 3 in the same batch
	)
	res := appendOK(t, s, reply("g:t", "carol", "r3", 1, 9999), reply("g:t", "dave", "r4", 1, 1300)) // resend of 7, then 8
	if !res[0].Duplicate || res[1].Msg.Seq != 8 {
		t.Fatalf("resend then reply: %+v %+v", res[0], res[1])
	}
	want := map[uint64]store.ThreadSummary{
		1: {ReplyCount: 3, LastReplySeq: 8, LastReplyAt: 1300},
		2: {ReplyCount: 1, LastReplySeq: 5, LastReplyAt: 1100},
	}
	if got := threads(t, s, "g:t", 1, 2, 3, 99); len(got) != 2 || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("Threads = %+v, want %+v", got, want)
	}
	if got := threads(t, s, "g:other", 1); len(got) != 0 {
		t.Fatalf("Threads of another conversation = %v", got)
	}
	for _, c := range []struct {
		root uint64
		user string
		want bool
	}{{1, "bob", true}, {1, "carol", true}, {1, "dave", true}, {1, "mallory", false}, {1, "alice", false}, {2, "carol", true}, {2, "bob", false}} {
		if got := inThread(t, s, "g:t", c.root, c.user); got != c.want {
			t.Fatalf("InThread(%d, %s) = %v, want %v", c.root, c.user, got, c.want)
		}
	}

	// The SenderOnly reply is listed (the reader filters it).
	all := []uint64{3, 6, 7, 8}
	for _, page := range []struct {
		after uint64
		limit int
		want  []uint64
	}{{0, 10, all}, {0, 2, all[:2]}, {3, 2, all[1:3]}, {6, 10, all[2:]}, {8, 10, nil}, {0, 0, nil}} {
		got, err := s.ThreadMessages(ctx, "g:t", 1, page.after, page.limit)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "ThreadMessages", got, page.want)
	}
	for _, page := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{{0, 10, all}, {0, 2, all[2:]}, {8, 2, all[1:3]}, {7, 10, all[:2]}, {3, 10, nil}, {1, 10, nil}, {0, 0, nil}} {
		got, err := s.ThreadHistory(ctx, "g:t", 1, page.before, page.limit)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "ThreadHistory", got, page.want)
	}
	got, err := s.ThreadMessages(ctx, "g:t", 2, 0, 10)
	if err != nil || len(got) != 1 || got[0].Seq != 5 || got[0].From != "carol" || got[0].ThreadRoot != 2 {
		t.Fatalf("ThreadMessages(root 2) = %v, %v", got, err)
	}
	sameMessage(t, "a thread reply", got[0], getMessage(t, s, "g:t", 5))
	if got, err := s.ThreadMessages(ctx, "g:t", 4, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("ThreadMessages of a message without replies = %v, %v", got, err)
	}

	// A reply stored by Apply (its event) is indexed the same way.
	ev := reply("g:t", "erin", "ev", 2, 1400)
	applyNew(t, s, store.Change{Event: ev}, 9)
	if got := threads(t, s, "g:t", 2); got[2] != (store.ThreadSummary{ReplyCount: 2, LastReplySeq: 9, LastReplyAt: 1400}) {
		t.Fatalf("Threads after Apply = %+v", got)
	}
	if !inThread(t, s, "g:t", 2, "erin") {
		t.Fatal("the Apply reply's sender is not in the thread")
	}
}

func mentions(t *testing.T, s store.Store, user, conv string, after uint64, limit int) []uint64 {
	t.Helper()
	got, err := s.Mentions(context.Background(), user, conv, after, limit)
	if err != nil {
		t.Fatalf("Mentions(%q, %q, %d, %d): %v", user, conv, after, limit, err)
	}
	return got
}

// testMentions: a NORMAL message that is not SenderOnly is listed for each
// user it names and, with MentionAll, for everyone, never for its sender;
// a recall takes it out.
func testMentions(t *testing.T, s store.Store) {
	named := func(from, id string, users ...string) *pb.Message {
		m := msg("g:m", from, "", id)
		m.Mentions = users
		return m
	}
	everyone := func(from, id string) *pb.Message {
		m := msg("g:m", from, "", id)
		m.MentionAll = true
		return m
	}
	hidden := named("mallory", "h", "bob")
	hidden.SenderOnly = true
	ev := named("alice", "ev", "bob")
	ev.Kind = pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED
	both := everyone("alice", "both")
	both.Mentions = []string{"bob", "bob"}
	appendOK(t, s,
		named("alice", "1", "bob", "carol"), // 1
		named("bob", "2", "bob"),            // 2: himself
		everyone("carol", "3"),              // 3
		hidden,                              // 4: sender only
		ev,                                  // 5: not a normal message
		msg("g:m", "alice", "", "6"),        // 6
		both,                                // 7: bob by name and everyone
		named("carol", "8", "bob"),          // 8
	)
	other := msg("g:n", "alice", "", "o")
	other.Mentions, other.MentionAll = []string{"bob"}, true
	appendOK(t, s, other)

	for user, want := range map[string][]uint64{
		"bob":   {1, 3, 7, 8},
		"carol": {1, 7},
		"alice": {3},
		"dave":  {3, 7},
	} {
		if got := mentions(t, s, user, "g:m", 0, 100); !slices.Equal(got, want) {
			t.Fatalf("Mentions(%s) = %v, want %v", user, got, want)
		}
	}
	for _, page := range []struct {
		after uint64
		limit int
		want  []uint64
	}{{0, 2, []uint64{1, 3}}, {1, 2, []uint64{3, 7}}, {3, 1, []uint64{7}}, {7, 10, []uint64{8}}, {8, 10, nil}, {0, 0, nil}} {
		if got := mentions(t, s, "bob", "g:m", page.after, page.limit); !slices.Equal(got, page.want) {
			t.Fatalf("Mentions(bob, after %d, limit %d) = %v, want %v", page.after, page.limit, got, page.want)
		}
	}
	if got := mentions(t, s, "bob", "g:n", 0, 10); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("Mentions(bob, g:n) = %v", got)
	}
	if got := mentions(t, s, "bob", "g:none", 0, 10); len(got) != 0 {
		t.Fatalf("Mentions of an empty conversation = %v", got)
	}

	// Recalls (Apply with a recalled Update) take messages out; an edit
	// leaves them.
	recall := func(seq uint64, id string) {
		old := getMessage(t, s, "g:m", seq)
		old.Recalled, old.Payload = true, nil
		applyOK(t, s, store.Change{Event: event("g:m", old.From, id, pb.MessageKind_MESSAGE_KIND_RECALL, &pb.MessageEvent{TargetSeq: seq}), Update: old})
	}
	recall(1, "rc1")
	recall(7, "rc7")
	edited := getMessage(t, s, "g:m", 3)
	edited.Payload, edited.EditedAt = []byte("edited"), 1
	applyOK(t, s, store.Change{Event: event("g:m", "carol", "ed3", pb.MessageKind_MESSAGE_KIND_EDIT, &pb.MessageEvent{TargetSeq: 3}), Update: edited})
	for user, want := range map[string][]uint64{"bob": {3, 8}, "carol": nil, "dave": {3}} {
		if got := mentions(t, s, user, "g:m", 0, 100); !slices.Equal(got, want) {
			t.Fatalf("Mentions(%s) after recalls = %v, want %v", user, got, want)
		}
	}
	// A mention in an Apply event that is a normal message is indexed.
	applyOK(t, s, store.Change{Event: named("dave", "ap", "carol")})
	if got := mentions(t, s, "carol", "g:m", 0, 100); len(got) != 1 {
		t.Fatalf("Mentions(carol) after an Apply mention = %v", got)
	}
}

func pins(t *testing.T, s store.Store, conv string) []store.Pin {
	t.Helper()
	got, err := s.Pins(context.Background(), conv)
	if err != nil {
		t.Fatalf("Pins(%q): %v", conv, err)
	}
	for i := range got {
		got[i].At = normTime(got[i].At)
	}
	return got
}

func pinChange(t *testing.T, s store.Store, conv, by, id string, p store.PinChange, want uint64) {
	t.Helper()
	kind := pb.MessageKind_MESSAGE_KIND_PINNED
	if p.Unpin {
		kind = pb.MessageKind_MESSAGE_KIND_UNPINNED
	}
	applyNew(t, s, store.Change{
		Event: event(conv, by, id, kind, &pb.MessageEvent{TargetSeq: p.Seq}),
		Pin:   &p,
	}, want)
}

// testPins: Apply pins and unpins with its event; Pins lists the oldest pin
// first; unpinning what is not pinned is harmless.
func testPins(t *testing.T, s store.Store) {
	if got := pins(t, s, "g:p"); len(got) != 0 {
		t.Fatalf("Pins of a new conversation = %v", got)
	}
	appendOK(t, s, msg("g:p", "alice", "", "1"), msg("g:p", "alice", "", "2"), msg("g:p", "alice", "", "3"))
	pinChange(t, s, "g:p", "alice", "p3", store.PinChange{Seq: 3, By: "alice", At: at(2)}, 4)
	pinChange(t, s, "g:p", "bob", "p1", store.PinChange{Seq: 1, By: "bob", At: at(1)}, 5) // an earlier clock: still after
	want := []store.Pin{{Seq: 3, By: "alice", At: at(2)}, {Seq: 1, By: "bob", At: at(1)}}
	if got := pins(t, s, "g:p"); !slices.Equal(got, want) {
		t.Fatalf("Pins = %+v, want %+v", got, want)
	}
	// A resend of a pin event writes nothing.
	res := applyOK(t, s, store.Change{
		Event: event("g:p", "alice", "p3", pb.MessageKind_MESSAGE_KIND_PINNED, &pb.MessageEvent{TargetSeq: 2}),
		Pin:   &store.PinChange{Seq: 2, By: "alice", At: at(3)},
	})
	if !res.Duplicate {
		t.Fatalf("a resent pin was stored again: %+v", res)
	}
	if got := pins(t, s, "g:p"); !slices.Equal(got, want) {
		t.Fatalf("Pins after a resent pin = %+v, want %+v", got, want)
	}
	pinChange(t, s, "g:p", "alice", "u3", store.PinChange{Seq: 3, Unpin: true}, 6)
	if got := pins(t, s, "g:p"); !slices.Equal(got, want[1:]) {
		t.Fatalf("Pins after an unpin = %+v, want %+v", got, want[1:])
	}
	pinChange(t, s, "g:p", "alice", "u2", store.PinChange{Seq: 2, Unpin: true}, 7) // not pinned
	pinChange(t, s, "g:p", "alice", "p3b", store.PinChange{Seq: 3, By: "carol", At: at(4)}, 8)
	want = []store.Pin{{Seq: 1, By: "bob", At: at(1)}, {Seq: 3, By: "carol", At: at(4)}}
	if got := pins(t, s, "g:p"); !slices.Equal(got, want) {
		t.Fatalf("Pins = %+v, want %+v", got, want)
	}
	if got := pins(t, s, "g:q"); len(got) != 0 {
		t.Fatalf("Pins of another conversation = %v", got)
	}
}

// testRichRecords: User.Bot and Group.MembersMentionAll round-trip,
// independently of the other flags.
func testRichRecords(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	bot := store.User{ID: "Helper", NameKey: "helper", Bot: true, CreatedAt: created}
	if err := s.CreateUser(ctx, bot); err != nil {
		t.Fatal(err)
	}
	checkUser(t, s, bot)
	if got, err := s.UserByName(ctx, "helper"); err != nil || !got.Bot {
		t.Fatalf("UserByName = %+v, %v; want a bot", got, err)
	}
	for _, f := range []struct{ bot, disabled, muted bool }{{true, true, true}, {false, true, false}, {false, false, true}, {true, false, false}} {
		bot.Bot, bot.Disabled, bot.ShadowMuted = f.bot, f.disabled, f.muted
		if err := s.UpdateUser(ctx, bot); err != nil {
			t.Fatal(err)
		}
		checkUser(t, s, bot)
	}
	plain := store.User{ID: "bob", CreatedAt: created}
	if err := s.CreateUser(ctx, plain); err != nil {
		t.Fatal(err)
	}
	checkUser(t, s, plain)

	g := testGroup("g:mm", "mm")
	g.MembersMentionAll = true
	applyNew(t, s, store.Change{Event: event("g:mm", "alice", "c", pb.MessageKind_MESSAGE_KIND_GROUP_CREATED, nil), Group: &g}, 1)
	checkGroup(t, s, g)
	g.MembersMentionAll, g.MuteAll = false, true
	applyNew(t, s, store.Change{Event: event("g:mm", "alice", "u", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil), Group: &g}, 2)
	checkGroup(t, s, g)
	g.MembersMentionAll, g.OpenJoin, g.MuteAll, g.Dissolved = true, false, false, true
	applyNew(t, s, store.Change{Event: event("g:mm", "alice", "d", pb.MessageKind_MESSAGE_KIND_GROUP_DISSOLVED, nil), Group: &g}, 3)
	checkGroup(t, s, g)
}

// testRestartRich: reactions (and the version they continue from), pins,
// threads and mentions survive a restart.
func testRestartRich(t *testing.T, open func() store.Store) {
	s := openStore(t, open)
	root := msg("g:x", "alice", "", "root")
	ment := reply("g:x", "bob", "r", 1, 1000)
	ment.Mentions = []string{"alice"}
	appendOK(t, s, root, ment)
	reactOK(t, s, react("g:x", 1, "bob", "a"), react("g:x", 1, "carol", "b"), react("g:x", 2, "alice", "a"))
	pinChange(t, s, "g:x", "alice", "p", store.PinChange{Seq: 2, By: "alice", At: at(1)}, 3)
	s = reopen(t, s, open)

	wantReactions(t, s, "g:x", []uint64{1, 2}, "carol", map[uint64]string{1: "v2 a1 b1*", 2: "v3 a1"})
	if v := reactionVersion(t, s, "g:x"); v != 3 {
		t.Fatalf("ReactionVersion after restart = %d, want 3", v)
	}
	r := reactOK(t, s, react("g:x", 1, "dave", "c"), react("g:x", 1, "carol", "b"))
	wantResult(t, "a reaction after restart", r[0], true, 4, "a1 b1 c1*")
	wantResult(t, "a repeat after restart", r[1], false, 4, "a1 b1* c1")
	if got := reactionChanges(t, s, "g:x", 0, 10); !slices.Equal(got, []store.ReactionChange{{Seq: 2, Version: 3}, {Seq: 1, Version: 4}}) {
		t.Fatalf("ReactionChanges after restart = %v", got)
	}
	if got := pins(t, s, "g:x"); !slices.Equal(got, []store.Pin{{Seq: 2, By: "alice", At: at(1)}}) {
		t.Fatalf("Pins after restart = %v", got)
	}
	if got := threads(t, s, "g:x", 1); got[1] != (store.ThreadSummary{ReplyCount: 1, LastReplySeq: 2, LastReplyAt: 1000}) {
		t.Fatalf("Threads after restart = %v", got)
	}
	appendOK(t, s, reply("g:x", "carol", "r2", 1, 2000))
	if got := threads(t, s, "g:x", 1); got[1] != (store.ThreadSummary{ReplyCount: 2, LastReplySeq: 4, LastReplyAt: 2000}) {
		t.Fatalf("Threads after a reply after restart = %v", got)
	}
	if !inThread(t, s, "g:x", 1, "bob") {
		t.Fatal("InThread(bob) after restart = false")
	}
	if got := mentions(t, s, "alice", "g:x", 0, 10); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("Mentions after restart = %v", got)
	}
}
