package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// benchPrefill is how many messages the schema holds before timing, so
// index lookups and inserts run against tables larger than an empty one.
const benchPrefill = 200_000

// benchLoad is the BRIEF's traffic: 250-byte payloads, 10% on one hot
// group, the rest over 1:1 conversations among 20,000 users, 1% resends
// of recent messages.
type benchLoad struct {
	mu      sync.Mutex // batch is called by several goroutines in the parallel benchmark
	rng     *rand.Rand
	next    int
	recent  []*pb.Message
	payload []byte
}

func newBenchLoad() *benchLoad {
	p := make([]byte, 250)
	for i := range p {
		p[i] = byte(i*7 + 3)
	}
	return &benchLoad{rng: rand.New(rand.NewPCG(1, 2)), recent: make([]*pb.Message, 0, 4096), payload: p}
}

func (l *benchLoad) message() *pb.Message {
	if len(l.recent) == cap(l.recent) && l.rng.IntN(100) == 0 {
		m := proto.Clone(l.recent[l.rng.IntN(len(l.recent))]).(*pb.Message)
		m.Seq = 0
		return m
	}
	l.next++
	from := l.rng.IntN(20000)
	conv, to := "g-hot", ""
	if l.rng.IntN(10) != 0 {
		peer := (from + 1 + l.rng.IntN(50)) % 20000
		conv, to = fmt.Sprintf("d-%d-%d", min(from, peer), max(from, peer)), fmt.Sprintf("u%d", peer)
	}
	m := &pb.Message{
		ConversationId: conv, From: fmt.Sprintf("u%d", from), To: to,
		ClientMsgId: fmt.Sprintf("cm-%d", l.next), ContentType: "text",
		Payload: l.payload, ServerTime: 1700000000000, MessageId: uint64(l.next), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL,
	}
	if len(l.recent) < cap(l.recent) {
		l.recent = append(l.recent, m)
	} else {
		l.recent[l.next%cap(l.recent)] = proto.Clone(m).(*pb.Message)
	}
	return m
}

func (l *benchLoad) batch(n int) []*pb.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*pb.Message, n)
	for i := range out {
		out[i] = l.message()
	}
	return out
}

// BenchmarkAppend measures durable appends (each batch one transaction,
// committed with synchronous_commit on) by one writer, as one node's group
// commit does, and by three Stores at once (three nodes, one database).
//
//	PARLEY_TEST_PG=... go test ./store/pgstore -run '^$' -bench BenchmarkAppend -benchtime 20000x
func BenchmarkAppend(b *testing.B) {
	url := testURL(b)
	for _, nodes := range []int{1, 3} {
		for _, size := range []int{64, 512} {
			b.Run(fmt.Sprintf("nodes=%d/batch=%d", nodes, size), func(b *testing.B) {
				schema := freshSchema(b, url)
				var stores []*Store
				for range nodes {
					s := openSchema(b, url, schema)
					b.Cleanup(func() { _ = s.Close() })
					stores = append(stores, s)
				}
				load := newBenchLoad()
				ctx := context.Background()
				for n := 0; n < benchPrefill; n += 512 {
					if _, err := stores[0].Append(ctx, load.batch(512)); err != nil {
						b.Fatal(err)
					}
				}
				// b.N counts messages; each node appends its share in batches.
				batches := (b.N + size - 1) / size
				b.ResetTimer()
				var wg sync.WaitGroup
				for i, s := range stores {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k := i; k < batches; k += nodes {
							if _, err := s.Append(ctx, load.batch(size)); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(batches*size)/b.Elapsed().Seconds(), "appends/s")
			})
		}
	}
}
