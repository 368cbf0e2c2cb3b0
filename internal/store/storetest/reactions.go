package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// showReactions renders counts as "a2* b1": emoji, count, * for Me.
func showReactions(rs []*pb.Reaction) string {
	var parts []string
	for _, r := range rs {
		me := ""
		if r.Me {
			me = "*"
		}
		parts = append(parts, fmt.Sprintf("%s%d%s", r.Emoji, r.Count, me))
	}
	return strings.Join(parts, " ")
}

func react(conv string, seq uint64, user, emoji string) store.ReactionOp {
	return store.ReactionOp{ConversationID: conv, Seq: seq, UserID: user, Emoji: emoji}
}

func unreact(conv string, seq uint64, user, emoji string) store.ReactionOp {
	return store.ReactionOp{ConversationID: conv, Seq: seq, UserID: user, Emoji: emoji, Remove: true}
}

func reactOK(t *testing.T, s store.Store, ops ...store.ReactionOp) []store.ReactionResult {
	t.Helper()
	res, err := s.React(context.Background(), ops)
	if err != nil {
		t.Fatalf("React: %v", err)
	}
	if len(res) != len(ops) {
		t.Fatalf("React returned %d results for %d ops", len(res), len(ops))
	}
	return res
}

// wantResult checks one op's result: changed, version and counts (as
// showReactions renders them); err nil.
func wantResult(t *testing.T, what string, r store.ReactionResult, changed bool, version uint64, counts string) {
	t.Helper()
	if r.Err != nil || r.Changed != changed || r.Version != version || showReactions(r.Reactions) != counts {
		t.Fatalf("%s: err %v changed %v version %d counts %q; want changed %v version %d counts %q",
			what, r.Err, r.Changed, r.Version, showReactions(r.Reactions), changed, version, counts)
	}
}

// reactionsOf returns Reactions(conv, seqs, user) rendered per seq.
func reactionsOf(t *testing.T, s store.Store, conv string, seqs []uint64, user string) map[uint64]string {
	t.Helper()
	got, err := s.Reactions(context.Background(), conv, seqs, user)
	if err != nil {
		t.Fatalf("Reactions(%q, %v, %q): %v", conv, seqs, user, err)
	}
	out := make(map[uint64]string, len(got))
	for seq, set := range got {
		out[seq] = fmt.Sprintf("v%d %s", set.Version, showReactions(set.Reactions))
	}
	return out
}

func wantReactions(t *testing.T, s store.Store, conv string, seqs []uint64, user string, want map[uint64]string) {
	t.Helper()
	got := reactionsOf(t, s, conv, seqs, user)
	if len(got) != len(want) {
		t.Fatalf("Reactions(%q, %v, %q) = %v, want %v", conv, seqs, user, got, want)
	}
	for seq, w := range want {
		if got[seq] != w {
			t.Fatalf("Reactions(%q, %v, %q) = %v, want %v", conv, seqs, user, got, want)
		}
	}
}

func reactionVersion(t *testing.T, s store.Store, conv string) uint64 {
	t.Helper()
	v, err := s.ReactionVersion(context.Background(), conv)
	if err != nil {
		t.Fatalf("ReactionVersion(%q): %v", conv, err)
	}
	return v
}

func reactionChanges(t *testing.T, s store.Store, conv string, after uint64, limit int) []store.ReactionChange {
	t.Helper()
	got, err := s.ReactionChanges(context.Background(), conv, after, limit)
	if err != nil {
		t.Fatalf("ReactionChanges(%q, %d, %d): %v", conv, after, limit, err)
	}
	return got
}

// testReactions: adding, re-adding, removing and removing what is absent;
// counts in first-added order with Me per reader; versions.
func testReactions(t *testing.T, s store.Store) {
	ctx := context.Background()
	appendOK(t, s, msg("g:r", "alice", "", "1"), msg("g:r", "bob", "", "2"), msg("g:r", "bob", "", "3"))
	if v := reactionVersion(t, s, "g:r"); v != 0 {
		t.Fatalf("ReactionVersion before any reaction = %d", v)
	}
	wantReactions(t, s, "g:r", []uint64{1, 2, 3}, "alice", nil)

	r := reactOK(t, s, react("g:r", 1, "alice", "👍"))
	wantResult(t, "first reaction", r[0], true, 1, "👍1*")
	r = reactOK(t, s, react("g:r", 1, "alice", "👍"))
	wantResult(t, "the same reaction again", r[0], false, 1, "👍1*")
	r = reactOK(t, s, react("g:r", 1, "bob", "❤️"), react("g:r", 1, "bob", "👍"))
	wantResult(t, "bob's heart", r[0], true, 2, "👍1 ❤️1*")
	wantResult(t, "bob's thumb", r[1], true, 3, "👍2* ❤️1*")
	r = reactOK(t, s, unreact("g:r", 1, "carol", "👍"), unreact("g:r", 1, "carol", "🎉"))
	wantResult(t, "removing what carol does not have", r[0], false, 3, "👍2 ❤️1")
	wantResult(t, "removing an emoji the message does not have", r[1], false, 3, "👍2 ❤️1")
	r = reactOK(t, s, unreact("g:r", 1, "alice", "👍"))
	wantResult(t, "alice takes hers back", r[0], true, 4, "👍1 ❤️1")
	if v := reactionVersion(t, s, "g:r"); v != 4 {
		t.Fatalf("ReactionVersion = %d, want 4", v)
	}

	// Counts and Me per reader; messages without reactions are absent.
	wantReactions(t, s, "g:r", []uint64{1, 2, 99}, "bob", map[uint64]string{1: "v4 👍1* ❤️1*"})
	wantReactions(t, s, "g:r", []uint64{1}, "alice", map[uint64]string{1: "v4 👍1 ❤️1"})
	wantReactions(t, s, "g:r", []uint64{1}, "", map[uint64]string{1: "v4 👍1 ❤️1"})
	wantReactions(t, s, "g:other", []uint64{1}, "bob", nil)

	// An emoji that falls to zero is gone; back, it goes last.
	r = reactOK(t, s, unreact("g:r", 1, "bob", "👍"), react("g:r", 1, "carol", "🎉"), react("g:r", 1, "alice", "👍"))
	wantResult(t, "the last thumb goes", r[0], true, 5, "❤️1*")
	wantResult(t, "a party", r[1], true, 6, "❤️1 🎉1*")
	wantResult(t, "the thumb is back", r[2], true, 7, "❤️1 🎉1 👍1*")
	wantReactions(t, s, "g:r", []uint64{1}, "alice", map[uint64]string{1: "v7 ❤️1 🎉1 👍1*"})

	// Every reaction removed: no counts left, version kept in the changes.
	reactOK(t, s, react("g:r", 3, "alice", "x"))
	r = reactOK(t, s, unreact("g:r", 3, "alice", "x"))
	wantResult(t, "the only reaction goes", r[0], true, 9, "")
	wantReactions(t, s, "g:r", []uint64{1, 3}, "alice", map[uint64]string{1: "v7 ❤️1 🎉1 👍1*"})
	if got := reactionChanges(t, s, "g:r", 7, 10); !slices.Equal(got, []store.ReactionChange{{Seq: 3, Version: 9}}) {
		t.Fatalf("ReactionChanges after 7 = %v, want seq 3 at 9", got)
	}

	// A batch whose ops fail writes nothing; a batch of no ops is fine.
	if res, err := s.React(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("React(no ops) = %v, %v", res, err)
	}
	if v := reactionVersion(t, s, "g:r"); v != 9 {
		t.Fatalf("ReactionVersion = %d, want 9", v)
	}
}

// testReactionLimits: MaxDistinct refuses a new emoji past the limit
// (ErrTooMany, nothing written) but not one the message has; an op on a
// message that does not exist fails alone (ErrNotFound).
func testReactionLimits(t *testing.T, s store.Store) {
	appendOK(t, s, msg("g:l", "alice", "", "1"), msg("g:l", "alice", "", "2"))
	lim := func(op store.ReactionOp, n int) store.ReactionOp { op.MaxDistinct = n; return op }
	r := reactOK(t, s,
		lim(react("g:l", 1, "bob", "a"), 2),
		lim(react("g:l", 1, "bob", "b"), 2),
		lim(react("g:l", 1, "bob", "c"), 2),   // a third emoji: refused
		lim(react("g:l", 1, "carol", "a"), 2), // one it has: fine
		lim(react("g:l", 1, "carol", "c"), 3), // a higher limit: fine
		lim(react("g:l", 1, "dave", "d"), 3),  // refused again
		react("g:l", 2, "dave", "d"),          // no limit
	)
	wantResult(t, "a", r[0], true, 1, "a1*")
	wantResult(t, "b", r[1], true, 2, "a1* b1*")
	if !errors.Is(r[2].Err, store.ErrTooMany) || r[2].Changed {
		t.Fatalf("a third emoji with MaxDistinct 2: %+v, want ErrTooMany", r[2])
	}
	wantResult(t, "a again", r[3], true, 3, "a2* b1")
	wantResult(t, "c, limit 3", r[4], true, 4, "a2* b1 c1*")
	if !errors.Is(r[5].Err, store.ErrTooMany) {
		t.Fatalf("a fourth emoji with MaxDistinct 3: %+v, want ErrTooMany", r[5])
	}
	wantResult(t, "another message", r[6], true, 5, "d1*")
	wantReactions(t, s, "g:l", []uint64{1, 2}, "dave", map[uint64]string{1: "v4 a2 b1 c1", 2: "v5 d1*"})

	r = reactOK(t, s,
		react("g:l", 9, "bob", "a"),    // no such message
		react("g:l", 0, "bob", "a"),    // nor seq 0
		react("g:none", 1, "bob", "a"), // nor conversation
		react("g:l", 2, "bob", "a"),
		unreact("g:l", 9, "bob", "a"),
	)
	for _, i := range []int{0, 1, 2, 4} {
		if !errors.Is(r[i].Err, store.ErrNotFound) || r[i].Changed {
			t.Fatalf("op %d on a missing message: %+v, want ErrNotFound", i, r[i])
		}
	}
	wantResult(t, "the batch's good op", r[3], true, 6, "d1 a1*")
	if v := reactionVersion(t, s, "g:l"); v != 6 {
		t.Fatalf("ReactionVersion = %d, want 6", v)
	}
	if v := reactionVersion(t, s, "g:none"); v != 0 {
		t.Fatalf("ReactionVersion of a conversation without messages = %d", v)
	}
	wantReactions(t, s, "g:l", []uint64{9}, "bob", nil)

	// An op without a conversation, user or emoji fails alone.
	r = reactOK(t, s, react("", 2, "bob", "e"), react("g:l", 2, "", "e"), react("g:l", 2, "bob", ""), react("g:l", 2, "bob", "e"))
	for i := range 3 {
		if r[i].Err == nil || r[i].Changed {
			t.Fatalf("malformed op %d: %+v, want an error", i, r[i])
		}
	}
	wantResult(t, "the op after malformed ones", r[3], true, 7, "d1 a1* e1*")
}

// testReactionVersions: versions grow by one per change, per conversation;
// ReactionChanges lists each message once, at its newest version, by
// version; several ops of one user on one message in a batch apply in order.
func testReactionVersions(t *testing.T, s store.Store) {
	for _, conv := range []string{"g:v", "g:w"} {
		appendOK(t, s, msg(conv, "alice", "", conv+"1"), msg(conv, "alice", "", conv+"2"), msg(conv, "alice", "", conv+"3"))
	}
	r := reactOK(t, s,
		react("g:v", 1, "bob", "a"),   // 1
		react("g:w", 1, "bob", "a"),   // w: 1
		react("g:v", 2, "bob", "a"),   // 2
		react("g:v", 3, "bob", "a"),   // 3
		react("g:v", 1, "carol", "a"), // 4
		react("g:w", 2, "bob", "a"),   // w: 2
	)
	var vs []uint64
	for _, x := range r {
		vs = append(vs, x.Version)
	}
	if !slices.Equal(vs, []uint64{1, 1, 2, 3, 4, 2}) {
		t.Fatalf("versions = %v", vs)
	}
	reactOK(t, s, react("g:v", 2, "carol", "b")) // 5
	want := []store.ReactionChange{{Seq: 3, Version: 3}, {Seq: 1, Version: 4}, {Seq: 2, Version: 5}}
	if got := reactionChanges(t, s, "g:v", 0, 10); !slices.Equal(got, want) {
		t.Fatalf("ReactionChanges = %v, want %v", got, want)
	}
	for _, page := range []struct {
		after uint64
		limit int
		want  []store.ReactionChange
	}{
		{0, 2, want[:2]}, {3, 10, want[1:]}, {4, 1, want[2:]}, {5, 10, nil}, {0, 0, nil},
	} {
		if got := reactionChanges(t, s, "g:v", page.after, page.limit); !slices.Equal(got, page.want) {
			t.Fatalf("ReactionChanges(after %d, limit %d) = %v, want %v", page.after, page.limit, got, page.want)
		}
	}
	if got := reactionChanges(t, s, "g:w", 0, 10); !slices.Equal(got, []store.ReactionChange{{Seq: 1, Version: 1}, {Seq: 2, Version: 2}}) {
		t.Fatalf("ReactionChanges(g:w) = %v", got)
	}

	// One user, one message, several ops in one batch: each applies to the
	// state the previous one left, each change its own version.
	r = reactOK(t, s,
		react("g:v", 3, "dave", "x"),   // 6
		react("g:v", 3, "dave", "y"),   // 7
		react("g:v", 3, "dave", "x"),   // unchanged
		unreact("g:v", 3, "dave", "x"), // 8
		react("g:v", 3, "dave", "x"),   // 9: x back, last
		unreact("g:v", 3, "dave", "z"), // unchanged
	)
	wantResult(t, "x", r[0], true, 6, "a1 x1*")
	wantResult(t, "y", r[1], true, 7, "a1 x1* y1*")
	wantResult(t, "x again", r[2], false, 7, "a1 x1* y1*")
	wantResult(t, "x removed", r[3], true, 8, "a1 y1*")
	wantResult(t, "x back", r[4], true, 9, "a1 y1* x1*")
	wantResult(t, "z absent", r[5], false, 9, "a1 y1* x1*")
	wantReactions(t, s, "g:v", []uint64{3}, "dave", map[uint64]string{3: "v9 a1 y1* x1*"})
	want = []store.ReactionChange{{Seq: 1, Version: 4}, {Seq: 2, Version: 5}, {Seq: 3, Version: 9}}
	if got := reactionChanges(t, s, "g:v", 0, 10); !slices.Equal(got, want) {
		t.Fatalf("ReactionChanges after the batch = %v, want %v", got, want)
	}
	// Add and remove in one batch: both are changes, the counts end as before.
	r = reactOK(t, s, react("g:v", 2, "erin", "q"), unreact("g:v", 2, "erin", "q"))
	wantResult(t, "q", r[0], true, 10, "a1 b1 q1*")
	wantResult(t, "q gone", r[1], true, 11, "a1 b1")
	wantReactions(t, s, "g:v", []uint64{2}, "erin", map[uint64]string{2: "v11 a1 b1"})
	if v := reactionVersion(t, s, "g:v"); v != 11 {
		t.Fatalf("ReactionVersion = %d, want 11", v)
	}
}

// testConcurrentReactions: batches from many goroutines on one message
// give gap-free versions and exact counts.
func testConcurrentReactions(t *testing.T, s store.Store) {
	appendOK(t, s, msg("g:c", "alice", "", "1"))
	const workers, per = 8, 25
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var ops []store.ReactionOp
			for i := range per {
				ops = append(ops, react("g:c", 1, fmt.Sprintf("u%d-%d", w, i), []string{"a", "b"}[i%2]))
			}
			res, err := s.React(context.Background(), ops)
			for _, r := range res {
				if err == nil && (r.Err != nil || !r.Changed) {
					err = fmt.Errorf("op result %+v", r)
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	n := uint64(workers * per)
	if v := reactionVersion(t, s, "g:c"); v != n {
		t.Fatalf("ReactionVersion = %d, want %d", v, n)
	}
	got := reactionsOf(t, s, "g:c", []uint64{1}, "")
	if a, b := workers*((per+1)/2), workers*(per/2); got[1] != fmt.Sprintf("v%d a%d b%d", n, a, b) && got[1] != fmt.Sprintf("v%d b%d a%d", n, b, a) {
		t.Fatalf("Reactions = %v", got)
	}
}
