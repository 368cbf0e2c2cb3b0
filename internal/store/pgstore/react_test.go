package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestPGThreeNodesReactConcurrently: three Stores on one schema (three
// nodes) react to the same messages at once. Every change gets its own
// version, 1..n without a gap, the counts are exact, and ReactionChanges
// lists each message once at the newest version it was given.
func TestPGThreeNodesReactConcurrently(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	var nodes []*Store
	for range 3 {
		s := openSchema(t, url, schema)
		t.Cleanup(func() { _ = s.Close() })
		nodes = append(nodes, s)
	}
	mustAppend(t, nodes[0], message("g:hot", "alice", "", "1"), message("g:hot", "alice", "", "2"), message("g:hot", "alice", "", "3"))

	const workers, batches, size = 6, 10, 40
	var mu sync.Mutex
	var versions []uint64
	newest := map[uint64]uint64{} // seq → the highest version a change of it got
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range batches {
				ops := make([]store.ReactionOp, size)
				for i := range ops {
					// Each user reacts once: every op is a change.
					ops[i] = store.ReactionOp{ConversationID: "g:hot", Seq: uint64(1 + i%3), UserID: fmt.Sprintf("u%d-%d-%d", w, k, i), Emoji: []string{"a", "b"}[i%2]}
				}
				res, err := nodes[w%3].React(context.Background(), ops)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for i, r := range res {
					if r.Err != nil || !r.Changed {
						mu.Unlock()
						errs <- fmt.Errorf("op %d: %+v", i, r)
						return
					}
					versions = append(versions, r.Version)
					newest[ops[i].Seq] = max(newest[ops[i].Seq], r.Version)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := uint64(workers * batches * size)
	slices.Sort(versions)
	for i, v := range versions {
		if v != uint64(i+1) {
			t.Fatalf("versions: %d at position %d; want 1..%d once each", v, i, n)
		}
	}
	ctx := context.Background()
	if v, err := nodes[1].ReactionVersion(ctx, "g:hot"); err != nil || v != n {
		t.Fatalf("ReactionVersion = %d, %v; want %d", v, err, n)
	}
	changes, err := nodes[2].ReactionChanges(ctx, "g:hot", 0, 10)
	if err != nil || len(changes) != 3 {
		t.Fatalf("ReactionChanges = %v, %v", changes, err)
	}
	for _, c := range changes {
		if newest[c.Seq] != c.Version {
			t.Fatalf("ReactionChanges: seq %d at %d, its newest change got %d", c.Seq, c.Version, newest[c.Seq])
		}
	}
	sets, err := nodes[0].Reactions(ctx, "g:hot", []uint64{1, 2, 3}, "")
	if err != nil {
		t.Fatal(err)
	}
	var total uint32
	for _, set := range sets {
		for _, r := range set.Reactions {
			total += r.Count
		}
	}
	if uint64(total) != n {
		t.Fatalf("counts add up to %d, want %d", total, n)
	}
}

// BenchmarkReact measures batches of 1000 reaction ops from many users,
// nine in ten on one hot message, like the server's batching under a
// reaction storm.
//
//	PARLEY_TEST_PG=... go test ./internal/store/pgstore -run '^$' -bench BenchmarkReact
func BenchmarkReact(b *testing.B) {
	url := testURL(b)
	s := openSchema(b, url, freshSchema(b, url))
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	var msgs []*pb.Message
	for i := range 100 {
		msgs = append(msgs, message("g:hot", "alice", "", fmt.Sprint(i)))
	}
	mustAppend(b, s, msgs...)
	emojis := []string{"👍", "❤️", "😂", "🎉", "👀", "🔥", "🙏", "😮"}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]store.ReactionOp, 1000)
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
		if _, err := s.React(ctx, ops); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ops))/time.Since(start).Seconds(), "reactions/s")
}

// TestPGReactRefusesUnstorableText: an op whose strings PostgreSQL text
// cannot hold (invalid UTF-8, NUL) fails alone instead of failing the batch.
func TestPGReactRefusesUnstorableText(t *testing.T) {
	s := openTemp(t)
	mustAppend(t, s, message("c", "alice", "", "1"))
	res, err := s.React(context.Background(), []store.ReactionOp{
		{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "\xff"},
		{ConversationID: "c", Seq: 1, UserID: "b\x00b", Emoji: "a"},
		{ConversationID: "c", Seq: 1, UserID: "bob", Emoji: "a"},
	})
	if err != nil || res[0].Err == nil || res[1].Err == nil || res[2].Err != nil || res[2].Version != 1 {
		t.Fatalf("React = %+v, %v", res, err)
	}
}
