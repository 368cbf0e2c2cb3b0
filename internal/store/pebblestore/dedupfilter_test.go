package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

func filterReady(s *Store) bool {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	return s.dedupFilter.ready
}

func waitFilterReady(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !filterReady(s) {
		if time.Now().After(deadline) {
			t.Fatal("the de-dup filter's scan did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDedupFilterAfterReopen: the keys a store holds when it is opened
// (more than one scan chunk, over several senders) are all in the filter
// once its scan ends: every one is still found as a duplicate, and new ids
// are not looked up on disk.
func TestDedupFilterAfterReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, dir)
	const n = 3*dedupScanChunk + 17
	var msgs []*pb.Message
	for i := range n {
		msgs = append(msgs, message(fmt.Sprint("c", i%7), fmt.Sprint("u", i%5), "b", fmt.Sprint("id", i)))
	}
	for i := 0; i < n; i += 500 {
		if _, err := s.Append(ctx, msgs[i:min(i+500, n)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Tiny caches: a retry is found through the filter and the disk, not
	// the in-memory map.
	s2, err := Open(dir, Options{Logger: quiet, DedupCacheEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	waitFilterReady(t, s2)
	for i := 0; i < n; i += 500 {
		var retry []*pb.Message
		for j := i; j < min(i+500, n); j++ {
			retry = append(retry, message(fmt.Sprint("c", j%7), fmt.Sprint("u", j%5), "b", fmt.Sprint("id", j)))
		}
		res, err := s2.Append(ctx, retry)
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range res {
			if !r.Duplicate {
				t.Fatalf("retry of id%d after reopen stored again as seq %d", i+k, r.Msg.Seq)
			}
		}
	}
	s2.appendMu.Lock()
	absent := s2.dedupFilter.absent(dedupKey(nil, "u1", "never-sent"))
	s2.appendMu.Unlock()
	if !absent {
		t.Fatal("a new id is not known absent: the filter spares no lookup")
	}
}

// TestDedupFilterProperty runs random appends, retries, expiries and
// reopens (some before the filter's scan can have ended) against a model:
// a retry of an id whose message is stored is always a duplicate, and any
// other id is a new message.
func TestDedupFilterProperty(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	open := func() *Store {
		s, err := Open(dir, Options{Logger: quiet, DedupCacheEntries: 1 + rng.IntN(3)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	defer func() { _ = s.Close() }()
	stored := map[string]uint64{} // "conv/id" -> seq, of stored messages
	floor := map[string]uint64{}
	next := 0
	for step := range 400 {
		switch op := rng.IntN(20); {
		case op == 0: // reopen
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			if rng.IntN(2) == 0 {
				waitFilterReady(t, s)
			}
		case op == 1: // expire the older half of a conversation
			conv := fmt.Sprint("c", rng.IntN(3))
			last, _ := s.LastSeq(ctx, conv)
			f := floor[conv] + (last-floor[conv])/2
			if _, _, err := s.ExpireBefore(ctx, conv, f, 1000); err != nil {
				t.Fatal(err)
			}
			floor[conv] = max(floor[conv], f)
			for k, seq := range stored {
				if k[:2] == conv && seq < f {
					delete(stored, k)
				}
			}
		default: // a batch of new ids and retries
			var batch []*pb.Message
			for range 1 + rng.IntN(8) {
				conv := fmt.Sprint("c", rng.IntN(3))
				id := fmt.Sprint("n", next)
				if rng.IntN(3) == 0 && next > 0 {
					id = fmt.Sprint("n", rng.IntN(next)) // a retry, maybe of an expired message
				} else {
					next++
				}
				batch = append(batch, message(conv, "u"+conv, "b", id))
			}
			res, err := s.Append(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for i, r := range res {
				k := batch[i].ConversationId + "/" + batch[i].ClientMsgId
				_, was := stored[k]
				if want := was || seen[k]; r.Duplicate != want {
					t.Fatalf("step %d: %s duplicate = %v, want %v", step, k, r.Duplicate, want)
				}
				seen[k] = true
				if !r.Duplicate {
					stored[k] = r.Msg.Seq
				}
			}
		}
	}
}

// TestDedupFilterBound: the filters never take more than their byte bound;
// past it the filter turns off (every new id is looked up) and keeps no
// memory, and before that a key added is never reported absent.
func TestDedupFilterBound(t *testing.T) {
	const max = 5 << 20 // room for the 1 M and 2 M key filters (4.1 MiB), not the 4 M one
	f := newDedupFilter(max)
	f.ready = true
	key := func(i int) []byte { return []byte(fmt.Sprint("d-key-", i)) }
	for i := range 3 << 20 {
		f.add(key(i))
	}
	if f.full || f.bytes > max {
		t.Fatalf("after 3 M keys: full %v, %d bytes (bound %d)", f.full, f.bytes, max)
	}
	for i := 0; i < 3<<20; i += 997 {
		if f.absent(key(i)) {
			t.Fatalf("key %d was added but is reported absent", i)
		}
	}
	f.add(key(3 << 20)) // needs the next filter, which does not fit
	if !f.full || f.filters != nil || f.absent(key(-1)) {
		t.Fatalf("past the bound: full %v, %d filters kept, a new key absent %v", f.full, len(f.filters), f.absent(key(-1)))
	}
}
