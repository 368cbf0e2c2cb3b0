package gateway

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// flushQueue holds connections with a flush scheduled. A connection is in it
// at most once (Conn.flushing), so its length is bounded by the number of
// connections.
type flushQueue struct {
	mu   sync.Mutex
	cond sync.Cond
	// Guarded by mu.
	items  []*Conn
	head   int
	closed bool
}

func (q *flushQueue) init() { q.cond.L = &q.mu }

func (q *flushQueue) push(c *Conn) {
	q.mu.Lock()
	q.items = append(q.items, c)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop appends up to max connections to dst, waiting for one. It returns nil
// once the queue is closed and empty.
func (q *flushQueue) pop(dst []*Conn, max int) []*Conn {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.items) && !q.closed {
		q.cond.Wait()
	}
	if q.head == len(q.items) {
		return nil
	}
	end := min(q.head+max, len(q.items))
	dst = append(dst, q.items[q.head:end]...)
	clear(q.items[q.head:end])
	q.head = end
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 1024 && q.head > len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return dst
}

func (q *flushQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// flusher is one of the goroutines that write queued frames. Its writes never
// block: a socket that cannot take everything is handed to a backlog
// goroutine.
func (g *Gateway) flusher() {
	defer g.loops.Done()
	scratch := make([]byte, 0, 64<<10)
	var batch []*Conn
	for {
		batch = g.flushQ.pop(batch[:0], 32)
		if batch == nil {
			return
		}
		for i, c := range batch {
			scratch = c.flush(scratch)
			batch[i] = nil
		}
		if cap(scratch) > 1<<20 { // do not keep a burst's buffer forever
			scratch = make([]byte, 0, 64<<10)
		}
	}
}

// batch is everything taken from a connection's queue for one write.
type batch struct {
	items    []*wire.Outbound
	ctl      []byte
	wsStatus uint16 // non-zero: end with a WS close frame
	codec    wire.Codec
}

// take moves everything queued into a batch. ok is false when there is
// nothing to write; then flushing is cleared or, if the connection is
// closing, done reports that the socket must now be closed. Caller holds mu.
// kick reports that the caller must start c.resume (the queue drained while
// reading was paused).
func (c *Conn) takeLocked() (b batch, ok, done, kick bool) {
	if c.sockClosed {
		c.flushing, c.backlog = false, false
		c.queue, c.ctl = nil, nil
		return b, false, false, false
	}
	b.items, b.ctl = c.queue, c.ctl
	c.queue, c.ctl = nil, nil
	c.inflight = c.queuedBytes + len(b.ctl)
	c.queuedBytes = 0
	if c.wsCloseDue {
		c.wsCloseDue = false
		b.wsStatus = c.wsStatus
	}
	b.codec = c.Codec()
	if len(b.items) == 0 && len(b.ctl) == 0 && b.wsStatus == 0 {
		c.inflight = 0
		if c.closing {
			return b, false, true, false // flushing stays set: nobody flushes again
		}
		c.flushing = false
		return b, false, false, c.resumeLocked()
	}
	return b, true, false, false
}

// recycleLocked keeps a small queue slice for the next Sends, so a
// connection that receives steadily does not allocate per flush, while an
// idle one holds at most a few words. Caller holds mu.
func (c *Conn) recycleLocked(items []*wire.Outbound) {
	if c.queue == nil && cap(items) <= 8 && !c.closing {
		clear(items)
		c.queue = items[:0]
	}
}

// build frames a batch into dst in queue order.
func (c *Conn) build(dst []byte, b batch) []byte {
	dst = append(dst, b.ctl...)
	for _, o := range b.items {
		p := o.Bytes(b.codec)
		if c.transport == TransportTCP {
			dst = wire.AppendTCPFrame(dst, p)
			continue
		}
		op := byte(opBinary)
		if b.codec == wire.JSON {
			op = opText
		}
		dst = appendWSHeader(dst, op, len(p))
		dst = append(dst, p...)
	}
	if b.wsStatus != 0 {
		dst = appendWSClose(dst, b.wsStatus)
	}
	return dst
}

// flush writes everything queued with one non-blocking write per round. It
// is run by a flusher for a connection whose flushing flag it now owns, and
// returns scratch for reuse.
func (c *Conn) flush(scratch []byte) []byte {
	if c.raw == nil {
		// No fd to write without blocking (TLS, other systems): a goroutine
		// writes under WriteTimeout while the queue is not empty.
		c.mu.Lock()
		c.backlog = true
		c.mu.Unlock()
		go c.writeBacklog(nil)
		return scratch
	}
	for round := 0; ; round++ {
		if round == 4 {
			// Fairness: others are waiting; come back later. flushing
			// stays set, so this push is the only one.
			c.g.flushQ.push(c)
			return scratch
		}
		c.mu.Lock()
		b, ok, done, kick := c.takeLocked()
		c.mu.Unlock()
		if done {
			c.shutSocket()
		}
		if kick {
			go c.resume()
		}
		if !ok {
			return scratch
		}
		buf := c.build(scratch[:0], b)
		scratch = buf
		c.g.stats.framesOut.Add(uint64(len(b.items)))
		n, err := writeRaw(c.raw, buf)
		c.g.stats.writes.Add(1)
		c.mu.Lock()
		c.recycleLocked(b.items)
		if err == nil && n == len(buf) {
			c.inflight = 0
			c.mu.Unlock()
			continue
		}
		if err == nil || isWouldBlock(err) {
			// Keep only the unwritten tail; a goroutine waits for the socket.
			rem := append([]byte(nil), buf[n:]...)
			c.inflight = len(rem)
			c.backlog = true
			c.mu.Unlock()
			go c.writeBacklog(rem)
			return scratch
		}
		c.mu.Unlock()
		c.abort(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED)
		return scratch
	}
}

// writeBacklog owns the connection's writes while its socket is backed up
// (or has no fd): it writes rem and then whatever is queued, each write
// bounded by WriteTimeout (or the close linger), and exits when the queue is
// empty. It exists only while there is something to write.
func (c *Conn) writeBacklog(rem []byte) {
	for {
		if len(rem) > 0 {
			c.mu.Lock()
			if c.sockClosed {
				c.flushing, c.backlog = false, false
				c.mu.Unlock()
				return
			}
			dl := time.Now().Add(c.g.cfg.WriteTimeout).UnixNano()
			if c.closing {
				dl = min(dl, c.lingerUntil)
			}
			_ = c.nc.SetWriteDeadline(time.Unix(0, dl))
			c.mu.Unlock()
			_, err := c.nc.Write(rem)
			c.g.stats.writes.Add(1)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					c.abort(pb.DisconnectCode_DISCONNECT_CODE_SLOW)
				} else {
					c.abort(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED)
				}
				return
			}
		}
		c.mu.Lock()
		if !c.sockClosed {
			c.inflight = 0
		}
		b, ok, done, kick := c.takeLocked()
		if !ok {
			c.backlog = false
			if c.raw != nil && !c.sockClosed {
				// Back to non-blocking writes, which fail on a past deadline.
				_ = c.nc.SetWriteDeadline(time.Time{})
			}
		}
		c.mu.Unlock()
		if done {
			c.shutSocket()
		}
		if kick {
			go c.resume()
		}
		if !ok {
			return
		}
		rem = c.build(rem[:0], b)
		c.g.stats.framesOut.Add(uint64(len(b.items)))
	}
}
