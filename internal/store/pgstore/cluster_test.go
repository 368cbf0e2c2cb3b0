package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestPGThreeNodesAppendConcurrently: three Stores on one schema (three
// nodes) append to the same conversations at once, and every batch is sent
// twice, by two different nodes, concurrently (a client retrying through
// another node). Each conversation ends with seqs 1..n, every message is
// stored once, and both sends of a message report the same seq, exactly one
// of them as new.
func TestPGThreeNodesAppendConcurrently(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	var nodes []*Store
	for range 3 {
		s := openSchema(t, url, schema)
		t.Cleanup(func() { _ = s.Close() })
		nodes = append(nodes, s)
	}

	// The messages, in chunks (batches) of 1 to 7.
	convs := []string{"hot", "d:ab", "g:2"}
	const total = 600
	var chunks [][]*pb.Message
	for i := 0; i < total; {
		var chunk []*pb.Message
		for j := 0; j < 1+len(chunks)%7 && i < total; j++ {
			from := fmt.Sprintf("user%d", i%5)
			chunk = append(chunk, message(convs[(i*7/3)%len(convs)], from, "peer", fmt.Sprintf("m%d", i)))
			i++
		}
		chunks = append(chunks, chunk)
	}

	// Six workers, two per node; chunk k is sent by workers k%6 and
	// (k+1)%6, which are on different nodes.
	const workers = 6
	type sent struct {
		id  string
		seq uint64
		dup bool
	}
	results := make([][]sent, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := nodes[w%3]
			for k, chunk := range chunks {
				if k%workers != w && (k+1)%workers != w {
					continue
				}
				in := make([]*pb.Message, len(chunk))
				for i, m := range chunk {
					in[i] = message(m.ConversationId, m.From, m.To, m.ClientMsgId) // each send has its own copies
				}
				res, err := node.Append(context.Background(), in)
				if err != nil {
					errs <- fmt.Errorf("worker %d chunk %d: %w", w, k, err)
					return
				}
				for _, r := range res {
					results[w] = append(results[w], sent{r.Msg.ConversationId + "/" + r.Msg.From + "/" + r.Msg.ClientMsgId, r.Msg.Seq, r.Duplicate})
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// What is stored, read through a node that may not have written it.
	storedSeq := map[string]uint64{}
	for _, c := range convs {
		got, err := nodes[0].Messages(context.Background(), c, 0, total+1)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range got {
			if m.Seq != uint64(i+1) {
				t.Fatalf("%s: seqs %v, want 1..%d without gaps", c, seqsOf(got), len(got))
			}
			id := c + "/" + m.From + "/" + m.ClientMsgId
			if _, dup := storedSeq[id]; dup {
				t.Fatalf("%s stored twice", id)
			}
			storedSeq[id] = m.Seq
		}
		if n, err := nodes[2].LastSeq(context.Background(), c); err != nil || n != uint64(len(got)) {
			t.Fatalf("LastSeq(%s) = %d, %v; want %d", c, n, err, len(got))
		}
	}
	if len(storedSeq) != total {
		t.Fatalf("%d messages stored, want %d", len(storedSeq), total)
	}
	fresh := map[string]int{}
	sends := 0
	for _, rs := range results {
		for _, r := range rs {
			sends++
			if want, ok := storedSeq[r.id]; !ok || r.seq != want {
				t.Fatalf("%s: Append reported seq %d, stored as %d (found %v)", r.id, r.seq, want, ok)
			}
			if !r.dup {
				fresh[r.id]++
			}
		}
	}
	if sends != 2*total {
		t.Fatalf("%d results, want %d (every message sent twice)", sends, 2*total)
	}
	for id := range storedSeq {
		if fresh[id] != 1 {
			t.Fatalf("%s reported new %d times, want once", id, fresh[id])
		}
	}
}

func seqsOf(ms []*pb.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

// TestPGDedupRaceAcrossNodes makes the race the unique index settles
// deterministic: node B has stored (alice, x) in a transaction not yet
// committed when node A appends the same id. A's lookup cannot see it, so
// A's insert waits; when B commits, A's transaction fails on the index,
// rolls back (its counter increment too) and the retry answers Duplicate.
// Once in the same conversation (A waits on the counter row) and once in
// another one (A waits on the index entry).
func TestPGDedupRaceAcrossNodes(t *testing.T) {
	url := testURL(t)
	for _, conv := range []string{"c1", "c2"} {
		t.Run(conv, func(t *testing.T) {
			schema := freshSchema(t, url)
			a, b := openSchema(t, url, schema), openSchema(t, url, schema)
			t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
			ctx := context.Background()
			mustAppend(t, b, message("c1", "bob", "alice", "earlier"))
			if conv == "c2" {
				mustAppend(t, b, message("c2", "bob", "alice", "earlier in c2"))
			}

			// B's Append, inside a transaction this test commits later.
			conn, err := b.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			resB := make([]store.AppendResult, 1)
			if err := b.appendOnce(ctx, conn.Conn(), []*pb.Message{message("c1", "alice", "bob", "x")}, resB); err != nil {
				t.Fatal(err)
			}

			type result struct {
				res []store.AppendResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := a.Append(ctx, []*pb.Message{message(conv, "alice", "bob", "x"), message(conv, "alice", "bob", "y")})
				done <- result{res, err}
			}()
			waitForLockWait(t, url, schema)
			if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Append still waiting after the other node committed")
			}
			if r.err != nil {
				t.Fatalf("Append: %v", r.err)
			}
			if !r.res[0].Duplicate || r.res[0].Msg.ConversationId != "c1" || r.res[0].Msg.Seq != 2 {
				t.Fatalf("racing resend: %v duplicate %v; want B's c1/2 as a duplicate", r.res[0].Msg, r.res[0].Duplicate)
			}
			if r.res[1].Duplicate || r.res[1].Msg.Seq != 2+boolInt(conv == "c1") {
				t.Fatalf("new message beside it: seq %d duplicate %v", r.res[1].Msg.Seq, r.res[1].Duplicate)
			}
			got, err := a.Messages(ctx, conv, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []uint64{1, 2}
			if conv == "c1" {
				want = []uint64{1, 2, 3}
			}
			if !slices.Equal(seqsOf(got), want) {
				t.Fatalf("%s seqs %v, want %v", conv, seqsOf(got), want)
			}
		})
	}
}

func boolInt(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// waitForLockWait polls until a session is waiting for a lock in a
// statement on schema: the racing Append has reached the point of the race.
func waitForLockWait(t *testing.T, url, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, schema).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the racing Append never waited for the uncommitted one")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
