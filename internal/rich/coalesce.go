package rich

import (
	"sync"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Coalescer gathers reaction updates and hands them on every interval, one
// per message: the newest (highest version) of those that came in since
// the last flush. A popular message in a big group then costs each member
// a few frames a second however many react, and every frame carries the
// whole count, so nothing is lost by dropping the older ones.
type Coalescer struct {
	interval time.Duration
	max      int
	flush    func([]*pb.ReactionUpdate)
	kick     chan struct{}

	mu      sync.Mutex
	pending map[msgKey]*pb.ReactionUpdate // guarded by mu
}

type msgKey struct {
	conv string
	seq  uint64
}

// NewCoalescer makes a coalescer that calls flush (from Run's goroutine)
// every interval with what came in, and sooner once max messages wait.
func NewCoalescer(interval time.Duration, max int, flush func([]*pb.ReactionUpdate)) *Coalescer {
	return &Coalescer{interval: interval, max: max, flush: flush,
		kick: make(chan struct{}, 1), pending: make(map[msgKey]*pb.ReactionUpdate)}
}

// Add queues u (not copied; the caller must not change it). It never blocks.
func (c *Coalescer) Add(u *pb.ReactionUpdate) {
	k := msgKey{u.ConversationId, u.Seq}
	c.mu.Lock()
	if old, ok := c.pending[k]; !ok || old.Version < u.Version {
		c.pending[k] = u
	}
	full := len(c.pending) >= c.max
	c.mu.Unlock()
	if full {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// Run flushes until stop is closed, then flushes what is left.
func (c *Coalescer) Run(stop <-chan struct{}) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.kick:
		case <-stop:
			c.flushNow()
			return
		}
		c.flushNow()
	}
}

func (c *Coalescer) flushNow() {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	out := make([]*pb.ReactionUpdate, 0, len(c.pending))
	for _, u := range c.pending {
		out = append(out, u)
	}
	clear(c.pending)
	c.mu.Unlock()
	c.flush(out)
}
