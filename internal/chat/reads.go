package chat

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Pages are bounded by bytes as well as by count: a page stops once its
// messages would pass Config.PageBytes (always holding at least one, so
// paging makes progress), and it is built from small reads of the store
// rather than by loading `limit` messages and trimming. All page reads of
// the node share Config.ReadMemoryBytes: a read reserves what it may hold
// before it starts, and one that cannot get it in time is refused with
// TOO_MANY_REQUESTS instead of growing the heap.
const (
	// readChunk is how many messages a page reads from the store at a time.
	readChunk = 16
	// msgOverhead is what a stored message may take beyond its payload
	// (ids, times, client message id, content type, mentions) and what is
	// added when it is read (a reply's preview, reactions).
	msgOverhead = 4 << 10
	// msgSlack is counted per message on top of its encoded size: the
	// field names a JSON encoding adds.
	msgSlack = 64
	// socketReadWait is how long a read on a socket waits for its memory:
	// it holds one of the gateway's few workers meanwhile.
	socketReadWait = 100 * time.Millisecond
	// httpReadWait is how long a read over HTTP waits (its own goroutine).
	httpReadWait = 2 * time.Second
)

type readWaitKey struct{}

// WithReadWait lets reads made with ctx wait up to d for their share of
// the read memory (default: a short wait fit for a socket worker).
func WithReadWait(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, readWaitKey{}, d)
}

// HTTPReadWait is the wait the HTTP API gives its reads.
const HTTPReadWait = httpReadWait

// maxMsgBytes bounds one stored message.
func (s *Service) maxMsgBytes() int64 { return int64(s.cfg.MaxFrameBytes) + msgOverhead }

// readWeight is the memory a page read of at most n messages may hold at
// once: the page (PageBytes, or n of the largest messages if fewer) and one
// chunk being read from the store.
func (s *Service) readWeight(n int) int64 {
	m := s.maxMsgBytes()
	return min(int64(s.cfg.PageBytes), int64(n)*m) + int64(min(readChunk, n+1))*m
}

// ReserveRead takes n bytes of the node's read memory, waiting as ctx
// allows (WithReadWait; by default briefly); it answers TOO_MANY_REQUESTS
// when they do not come free in time. A request for more than the whole
// budget takes the whole budget, so it can always run alone.
func (s *Service) ReserveRead(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, 1), s.cfg.ReadMemoryBytes)
	if !s.reads.TryAcquire(n) {
		wait, ok := ctx.Value(readWaitKey{}).(time.Duration)
		if !ok {
			wait = socketReadWait
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := s.reads.Acquire(wctx, n)
		cancel()
		if err != nil {
			s.stats.readsRefused.Add(1)
			return nil, errTooMany
		}
	}
	return func() { s.reads.Release(n) }, nil
}

// msgCost is what a message counts against a page's byte budget.
func msgCost(m *pb.Message) int { return proto.Size(m) + msgSlack }

// pageSpec says which messages of one conversation a page reads.
type pageSpec struct {
	conv    string
	forward bool
	after   uint64 // forward: messages after this seq
	upTo    uint64 // forward: none after this seq (0: no bound)
	before  uint64 // backward: messages before this seq (0: from the newest)
	floor   uint64 // backward: none at or below this seq
	n       int    // at most this many messages
	// visible drops what the reader may not see from a chunk (ascending).
	visible func([]*pb.Message) ([]*pb.Message, error)
	// fetch, when set, reads a chunk instead of the conversation's
	// Messages (forward) or History (backward): a thread's replies.
	fetch func(after, before uint64, k int) ([]*pb.Message, error)
}

// readPage builds one page within PageBytes, reading the store readChunk
// messages at a time. It returns the messages ascending and whether more
// follow (forward) or precede (backward). Entries the reader may not see
// are skipped, at most maxHiddenSkips pages' worth per request.
func (s *Service) readPage(ctx context.Context, p pageSpec) ([]*pb.Message, bool, error) {
	var (
		msgs    []*pb.Message // in reading order: newest first when backward
		size    int
		scanned int
		after   = p.after
		before  = p.before
		budget  = s.cfg.PageBytes
		scanMax = p.n * maxHiddenSkips
	)
	ordered := func() []*pb.Message {
		if !p.forward {
			slices.Reverse(msgs)
		}
		return msgs
	}
	for {
		// One past what the page can hold, to learn whether more follow.
		k := min(readChunk, p.n-len(msgs)+1)
		var raw []*pb.Message
		var err error
		if p.fetch != nil {
			raw, err = p.fetch(after, before, k)
		} else if p.forward {
			raw, err = s.store.Messages(ctx, p.conv, after, k)
		} else {
			raw, err = s.store.History(ctx, p.conv, before, k)
		}
		if err != nil {
			return nil, false, storeErr(err)
		}
		end := len(raw) < k
		if p.forward {
			for i, m := range raw {
				if p.upTo > 0 && m.Seq > p.upTo {
					raw, end = raw[:i], true
					break
				}
			}
		} else {
			i := 0
			for i < len(raw) && raw[i].Seq <= p.floor {
				i++
			}
			if i > 0 {
				raw, end = raw[i:], true
			}
		}
		if len(raw) == 0 {
			return ordered(), false, nil
		}
		if p.forward {
			after = raw[len(raw)-1].Seq
		} else {
			before = raw[0].Seq
		}
		scanned += len(raw)
		vis, err := p.visible(raw)
		if err != nil {
			return nil, false, err
		}
		for j := range vis {
			m := vis[j]
			if !p.forward {
				m = vis[len(vis)-1-j]
			}
			c := msgCost(m)
			if len(msgs) == p.n || (len(msgs) > 0 && size+c > budget) {
				return ordered(), true, nil
			}
			msgs, size = append(msgs, m), size+c
		}
		if end {
			return ordered(), false, nil
		}
		if scanned >= scanMax {
			return ordered(), true, nil
		}
	}
}
