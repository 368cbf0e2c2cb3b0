package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// BenchmarkPebbleReact is the store's side of `parley bench reactions`:
// pebblestore.React in batches of 1,000 ops (1,000 users, each adding or
// taking back one of 4 emojis on one message, as the scenario's members
// do), timed after each user has already made `churn` requests. Run with a
// fixed count, since every batch adds churn:
//
//	go test ./internal/bench -run '^$' -bench PebbleReact -benchtime 20x
func BenchmarkPebbleReact(b *testing.B) {
	for _, churn := range []int{20, 60, 200} {
		for _, noSync := range []bool{true, false} {
			name := "churn=" + strconv.Itoa(churn)
			if noSync {
				name += "/no_sync"
			}
			b.Run(name, func(b *testing.B) { benchReact(b, churn, noSync) })
		}
	}
}

func benchReact(b *testing.B, churn int, noSync bool) {
	s, err := pebblestore.Open(b.TempDir(), pebblestore.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	res, err := s.Append(ctx, []*pb.Message{{ConversationId: "g:bench", From: "u0", Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, Payload: []byte("react to this")}})
	if err != nil {
		b.Fatal(err)
	}
	seq := res[0].Msg.Seq
	const users = 1000
	emojis := benchEmojis[:4]
	ops := make([]store.ReactionOp, users)
	batch := 0 // batches made: request k of user i is batch k
	react := func() {
		for i := range ops {
			st := reactStream{emojis: []string{emojis[i%4], emojis[(i+1)%4], emojis[(i+2)%4], emojis[(i+3)%4]}}
			emoji, remove := st.op(uint64(batch))
			ops[i] = store.ReactionOp{ConversationID: "g:bench", Seq: seq, UserID: "u" + strconv.Itoa(i), Emoji: emoji, Remove: remove, MaxDistinct: 20}
		}
		rs, err := s.React(ctx, ops)
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
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		react()
	}
	b.ReportMetric(float64(b.N*users)/time.Since(t0).Seconds(), "reactions/s")
}
