package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func mustReact(t testing.TB, s *Store, ops ...store.ReactionOp) []store.ReactionResult {
	t.Helper()
	res, err := s.React(context.Background(), ops)
	if err != nil {
		t.Fatalf("React: %v", err)
	}
	return res
}

// TestReactHotMessageBatch: a batch of many users' ops on one message
// counts each once, gives each change its own version, and reads back the
// same counts and versions after a reopen (the caches gone).
func TestReactHotMessageBatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, dir)
	mustAppend(t, s, message("g:hot", "alice", "", "1"), message("g:hot", "alice", "", "2"))
	emojis := []string{"👍", "❤️", "😂", "🎉", "👀"}
	var ops []store.ReactionOp
	for u := range 1000 {
		ops = append(ops, store.ReactionOp{ConversationID: "g:hot", Seq: 1, UserID: fmt.Sprint("u", u), Emoji: emojis[u%len(emojis)]})
	}
	// Repeats: no change, no version.
	ops = append(ops, ops[0], ops[1])
	res := mustReact(t, s, ops...)
	for i, r := range res[:1000] {
		if r.Err != nil || !r.Changed || r.Version != uint64(i+1) {
			t.Fatalf("op %d: %+v, want a change at version %d", i, r, i+1)
		}
	}
	for _, r := range res[1000:] {
		if r.Err != nil || r.Changed || r.Version != 1000 {
			t.Fatalf("repeated op: %+v, want no change at version 1000", r)
		}
	}
	last := res[999].Reactions
	if len(last) != len(emojis) {
		t.Fatalf("counts = %v", last)
	}
	for i, r := range last {
		if r.Emoji != emojis[i] || r.Count != 200 || r.Me != (i == 999%len(emojis)) {
			t.Fatalf("count %d = %v, want %s x200 (me for the op's own emoji only)", i, r, emojis[i])
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	got, err := s.Reactions(ctx, "g:hot", []uint64{1, 2}, "u3")
	if err != nil || len(got) != 1 || got[1].Version != 1000 || len(got[1].Reactions) != 5 || !got[1].Reactions[3].Me || got[1].Reactions[0].Me {
		t.Fatalf("Reactions after reopen = %+v, %v", got, err)
	}
	if v, err := s.ReactionVersion(ctx, "g:hot"); err != nil || v != 1000 {
		t.Fatalf("ReactionVersion = %d, %v", v, err)
	}
	ch, err := s.ReactionChanges(ctx, "g:hot", 0, 10)
	if err != nil || len(ch) != 1 || ch[0] != (store.ReactionChange{Seq: 1, Version: 1000}) {
		t.Fatalf("ReactionChanges = %v, %v", ch, err)
	}
	// The version continues from disk.
	res = mustReact(t, s, store.ReactionOp{ConversationID: "g:hot", Seq: 2, UserID: "u1", Emoji: "x"})
	if res[0].Version != 1001 {
		t.Fatalf("version after reopen = %d, want 1001", res[0].Version)
	}
}

// TestReactCorruptCountFailsItsOps: a corrupt count row fails the ops on
// its message only.
func TestReactCorruptCountFailsItsOps(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustAppend(t, s, message("c", "alice", "", "1"), message("c", "alice", "", "2"))
	mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "a"},
		store.ReactionOp{ConversationID: "c", Seq: 2, UserID: "bob", Emoji: "a"})
	rewrite(t, s, reactCountKey(nil, "c", 1, "a"), flipByte(1))
	res := mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "carol", Emoji: "a"},
		store.ReactionOp{ConversationID: "c", Seq: 2, UserID: "carol", Emoji: "a"})
	wantCorrupt(t, "React on a corrupt count", res[0].Err)
	if res[1].Err != nil || !res[1].Changed || res[1].Version != 3 {
		t.Fatalf("op on another message: %+v", res[1])
	}
	_, err := s.Reactions(ctx, "c", []uint64{1}, "bob")
	wantCorrupt(t, "Reactions over a corrupt count", err)
}

// TestReactUserRow: a user's reactions to a message are one row; taking
// them all back leaves it empty (not deleted), and it reads as nothing.
func TestReactUserRow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, dir)
	mustAppend(t, s, message("c", "alice", "", "1"))
	mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "a"},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "b"},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "carol", Emoji: "b"})
	row := func(user string) (string, bool) {
		t.Helper()
		key := reactionKey(nil, "c", 1, user)
		var got []string
		found, err := userReactions(s.db, key, func(e []byte) { got = append(got, string(e)) })
		if err != nil {
			t.Fatalf("row of %s: %v", user, err)
		}
		return fmt.Sprint(got), found
	}
	if got, found := row("bob"); got != "[a b]" || !found {
		t.Fatalf("bob's row = %s, %v", got, found)
	}
	if _, found := row("dave"); found {
		t.Fatal("a row for a user who never reacted")
	}
	res := mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "a", Remove: true},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "b", Remove: true},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "b", Remove: true},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "dave", Emoji: "b", Remove: true})
	if r := res[1]; !r.Changed || r.Version != 5 || len(r.Reactions) != 1 || r.Reactions[0].Me || r.Reactions[0].Count != 1 {
		t.Fatalf("bob's last take-back: %+v", r)
	}
	for _, r := range res[2:] {
		if r.Err != nil || r.Changed || r.Version != 5 {
			t.Fatalf("taking back what is not there: %+v", r)
		}
	}
	if got, found := row("bob"); got != "[]" || !found {
		t.Fatalf("bob's row after taking all back = %s, %v; want it empty", got, found)
	}
	if _, found := row("dave"); found {
		t.Fatal("a row written for a take-back that changed nothing")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	got, err := s.Reactions(ctx, "c", []uint64{1}, "bob")
	if err != nil || len(got[1].Reactions) != 1 || got[1].Reactions[0].Me || got[1].Version != 5 {
		t.Fatalf("Reactions for bob = %+v, %v", got, err)
	}
	res = mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "b"},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "a"})
	if r := res[1]; !r.Changed || r.Version != 7 || showCounts(r.Reactions) != "b2* a1*" {
		t.Fatalf("bob back: %+v (%s)", r, showCounts(r.Reactions))
	}
	if got, _ := row("bob"); got != "[b a]" {
		t.Fatalf("bob's row = %s", got)
	}
}

func showCounts(rs []*pb.Reaction) string {
	var out []string
	for _, r := range rs {
		me := ""
		if r.Me {
			me = "*"
		}
		out = append(out, fmt.Sprint(r.Emoji, r.Count, me))
	}
	return strings.Join(out, " ")
}

// TestReactCorruptUserRowFailsItsOps: a corrupt user row (bad checksum,
// or well framed but naming an emoji twice) fails that user's ops on that
// message and its readers' Reactions, nothing else.
func TestReactCorruptUserRowFailsItsOps(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustAppend(t, s, message("c", "alice", "", "1"), message("c", "alice", "", "2"))
	mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "a"},
		store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "dave", Emoji: "a"})
	rewrite(t, s, reactionKey(nil, "c", 1, "bob"), flipByte(1))
	key := reactionKey(nil, "c", 1, "dave")
	rewrite(t, s, key, func([]byte) []byte { return appendUserReactions(nil, key, []string{"a", "a"}) })
	for _, user := range []string{"bob", "dave"} {
		res := mustReact(t, s, store.ReactionOp{ConversationID: "c", Seq: 1, UserID: user, Emoji: "b"},
			store.ReactionOp{ConversationID: "c", Seq: 1, UserID: "carol", Emoji: user},
			store.ReactionOp{ConversationID: "c", Seq: 2, UserID: user, Emoji: "b"},
			store.ReactionOp{ConversationID: "c", Seq: 1, UserID: user, Emoji: "a", Remove: true})
		wantCorrupt(t, "React on "+user+"'s corrupt row", res[0].Err)
		wantCorrupt(t, "React on "+user+"'s corrupt row, again", res[3].Err)
		if res[1].Err != nil || !res[1].Changed || res[2].Err != nil || !res[2].Changed {
			t.Fatalf("ops beside %s's corrupt row: %+v", user, res)
		}
		_, err := s.Reactions(ctx, "c", []uint64{1}, user)
		wantCorrupt(t, "Reactions for "+user, err)
	}
	if got, err := s.Reactions(ctx, "c", []uint64{1}, "carol"); err != nil || showCounts(got[1].Reactions) != "a2 bob1* dave1*" {
		t.Fatalf("Reactions for carol = %+v, %v", got, err)
	}
}

// TestOldRecordsDecode: user and group records written before Bot and
// MembersMentionAll existed read with them false; a flag bit beyond the
// known ones is corrupt.
func TestOldRecordsDecode(t *testing.T) {
	at := time.Unix(1700000000, 5).UTC()
	old := appendLP(nil, "hash")
	old = append(old, 7, 3) // epoch 7, disabled and shadow muted
	old = appendTime(old, at)
	u, err := decodeUser([]byte("k"), "alice", old)
	if err != nil || u.Bot || !u.Disabled || !u.ShadowMuted || u.TokenEpoch != 7 || !u.CreatedAt.Equal(at) {
		t.Fatalf("old user record = %+v, %v", u, err)
	}
	old[len(appendLP(nil, "hash"))+1] = 8
	if _, err := decodeUser([]byte("k"), "alice", old); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("user record with an unknown flag: %v", err)
	}
	nu := store.User{ID: "bot", Bot: true, CreatedAt: at}
	if u, err := decodeUser([]byte("k"), "bot", encodeUser(nu)); err != nil || u != nu {
		t.Fatalf("bot round trip = %+v, %v", u, err)
	}

	g := store.Group{Name: "n", Owner: "alice", OpenJoin: true, MuteAll: true, Dissolved: true, CreatedAt: at}
	body := encodeGroup(&g)
	// The oldest layout: no policy fields after the time.
	cut := body[:len(body)-2]
	got, err := decodeGroup([]byte("k"), "g:1", cut)
	g.ConversationID = "g:1"
	if err != nil || got != g {
		t.Fatalf("old group record = %+v, %v; want %+v", got, err, g)
	}
	g.MembersMentionAll = true
	if got, err := decodeGroup([]byte("k"), "g:1", encodeGroup(&g)); err != nil || got != g {
		t.Fatalf("group round trip = %+v, %v", got, err)
	}
}

// BenchmarkReact: batches of 1000 ops from many users, nine in ten on one
// hot message, like the server's batching under a reaction storm. Reports
// reactions per second.
func BenchmarkReact(b *testing.B) {
	s := openAt(b, b.TempDir())
	defer s.Close()
	var msgs []*pb.Message
	for i := range 100 {
		msgs = append(msgs, message("g:hot", "alice", "", fmt.Sprint(i)))
	}
	mustAppend(b, s, msgs...)
	emojis := []string{"👍", "❤️", "😂", "🎉", "👀", "🔥", "🙏", "😮"}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]store.ReactionOp, 1000)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		for i := range ops {
			seq := uint64(1)
			if rng.IntN(10) == 0 {
				seq = uint64(2 + rng.IntN(99))
			}
			ops[i] = store.ReactionOp{ConversationID: "g:hot", Seq: seq, UserID: fmt.Sprint("u", rng.IntN(100000)),
				Emoji: emojis[rng.IntN(len(emojis))], Remove: rng.IntN(5) == 0, MaxDistinct: 20}
		}
		if _, err := s.React(context.Background(), ops); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ops))/time.Since(start).Seconds(), "reactions/s")
}

// BenchmarkReactChurn is the store's side of `parley bench reactions`:
// batches of 1,000 ops by 1,000 users on one message, each user adding or
// taking back one of 4 emojis in turn (request k of user i adds or, k odd,
// takes back emoji (i+k/2) mod 4), timed after each user has already made
// `churn` requests: every add and take-back leaves a dead version behind,
// so this is what a cost that grows with churn shows up in. Run with a
// fixed count, since every batch adds churn:
//
//	go test ./internal/store/pebblestore -run '^$' -bench ReactChurn -benchtime 20x
func BenchmarkReactChurn(b *testing.B) {
	for _, churn := range []int{20, 200, 600} {
		for _, noSync := range []bool{true, false} {
			name := fmt.Sprint("churn=", churn)
			if noSync {
				name += "/no_sync"
			}
			b.Run(name, func(b *testing.B) { benchReactChurn(b, churn, noSync) })
		}
	}
}

func benchReactChurn(b *testing.B, churn int, noSync bool) {
	s, err := Open(b.TempDir(), Options{NoSync: noSync, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	mustAppend(b, s, message("g:bench", "u0", "", "1"))
	const users = 1000
	emojis := []string{"👍", "❤️", "😂", "🎉"}
	names := make([]string, users)
	for i := range names {
		names[i] = fmt.Sprint("u", i)
	}
	ops := make([]store.ReactionOp, users)
	batch := 0 // request k of every user is batch k
	react := func() {
		for i := range ops {
			ops[i] = store.ReactionOp{ConversationID: "g:bench", Seq: 1, UserID: names[i],
				Emoji: emojis[(i+batch/2)%len(emojis)], Remove: batch%2 == 1, MaxDistinct: 20}
		}
		rs, err := s.React(context.Background(), ops)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil || !r.Changed {
				b.Fatalf("op of batch %d: %+v", batch, r)
			}
		}
		batch++
	}
	for range churn {
		react()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		react()
	}
	b.ReportMetric(float64(b.N*users)/b.Elapsed().Seconds(), "reactions/s")
}
