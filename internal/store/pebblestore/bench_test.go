package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// benchPrefill is how many messages the database holds before timing, so
// de-dup lookups and seq seeks run against tables on disk, not an empty
// memtable (the BRIEF's measurements used 1M).
const benchPrefill = 1_000_000

// benchLoad generates the BRIEF's traffic: 250-byte payloads, 10% on one hot
// group, the rest over 1:1 conversations, 1% resends of recent messages.
type benchLoad struct {
	rng     *rand.Rand
	next    int
	recent  []*pb.Message // ring of recently sent messages, for resends
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
		old := l.recent[l.rng.IntN(len(l.recent))]
		m := proto.Clone(old).(*pb.Message)
		m.Seq = 0
		return m
	}
	l.next++
	from := l.rng.IntN(20000)
	var conv, to string
	if l.rng.IntN(10) == 0 {
		conv = "g-hot"
	} else {
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
		l.recent[l.next%cap(l.recent)] = m
	}
	return m
}

func (l *benchLoad) batch(n int) []*pb.Message {
	out := make([]*pb.Message, n)
	for i := range out {
		out[i] = l.message()
	}
	return out
}

// BenchmarkAppend measures durable (fsync per batch) appends.
//
//	go test ./store/pebblestore -run '^$' -bench BenchmarkAppend -benchtime 20000x
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{64, 512} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			load := newBenchLoad()
			// Prefill without fsync (speed), then reopen with the default: durable.
			s, err := Open(dir, Options{NoSync: true, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			for n := 0; n < benchPrefill; n += 1024 {
				mustAppend(b, s, load.batch(1024)...)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			s = openAt(b, dir)
			defer s.Close()
			before := s.db.Metrics()
			batches := make([][]*pb.Message, 0, 1024)

			msgs := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if len(batches) == 0 { // generate outside the timed part
					b.StopTimer()
					for range cap(batches) {
						batches = append(batches, load.batch(size))
					}
					b.StartTimer()
				}
				in := batches[len(batches)-1]
				batches = batches[:len(batches)-1]
				if _, err := s.Append(context.Background(), in); err != nil {
					b.Fatal(err)
				}
				msgs += len(in)
			}
			b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
			after := s.db.Metrics()
			written := (after.WAL.BytesWritten - before.WAL.BytesWritten) +
				(after.Total().TableBytesFlushed - before.Total().TableBytesFlushed) +
				(after.Total().TableBytesCompacted - before.Total().TableBytesCompacted)
			b.ReportMetric(float64(written)/float64(msgs), "disk-B/msg")
			if testing.Verbose() {
				b.Logf("after the run:\n%s", after)
			}
		})
	}
}
