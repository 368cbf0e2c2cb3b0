package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Transport is the kind of connection.
type Transport uint8

const (
	// TransportWS is WebSocket: binary messages carry protobuf frames, text
	// messages JSON frames.
	TransportWS Transport = iota + 1
	// TransportTCP is raw TCP with 4-byte big-endian length-prefixed protobuf frames.
	TransportTCP
)

func (t Transport) String() string {
	switch t {
	case TransportWS:
		return "ws"
	case TransportTCP:
		return "tcp"
	}
	return "unknown"
}

// wsMaxHeader is the largest server frame header, counted with every queued
// frame so that the byte cap bounds what is really buffered.
const wsMaxHeader = 10

// maxCtlBytes caps the pong frames waiting to be written: a client that
// floods pings without reading gets only the first answers (RFC 6455 allows
// answering only the latest ping).
const maxCtlBytes = 1024

// Conn is one client connection. Its methods are safe for concurrent use.
type Conn struct {
	g         *Gateway
	id        uint64
	nc        net.Conn
	raw       syscall.RawConn // non-nil iff served by the epoll driver
	transport Transport
	born      int64 // unix ns at attach

	lastRecv atomic.Int64  // unix ns (Gateway clock) of the last complete frame received
	authed   atomic.Bool   // set by SetAuthenticated; stops the auth timeout
	slots    atomic.Uint32 // unauthenticated slots held (see reserve); swapped to 0 to release
	// heard is set once the client's first bytes were read. On a TLS conn
	// that means its handshake is done; before that a write would wait for
	// the handshake, so a close skips the Disconnect frame (see beginClose).
	heard    atomic.Bool
	closingF atomic.Bool   // mirrors closing for lock-free checks on hot paths
	codec    atomic.Uint32 // wire.Codec for replies; written only by the read side
	value    atomic.Pointer[any]
	ctxEnded atomic.Bool // the close has begun: Context's Err is Canceled

	// Read-side state, touched only by the goroutine that owns the read side
	// (readerBusy set under mu, or after finalization by nobody).
	partial  []byte // bytes of an incomplete frame; nil when none is pending
	frag     []byte // reassembled payload of a fragmented WS message
	fragOp   byte   // opcode of that message; 0 when none is in progress
	codecSet bool   // the first data frame has fixed the reply codec

	mu sync.Mutex
	// Guarded by mu.
	queue       []*wire.Outbound // frames not yet handed to a write, in order
	queuedBytes int              // encoded size of queue (+ header allowance)
	inflight    int              // bytes taken by a flush and not yet written
	ctl         []byte           // framed WS pongs, written before queue
	flushing    bool             // a flush is scheduled or running; only its owner writes
	backlog     bool             // the flush owner is a backlog goroutine blocked in Write
	closing     bool             // Close has begun: no more Sends or HandleFrames
	sockClosed  bool             // the socket has been closed
	readerBusy  bool             // a goroutine owns the read side and may call HandleFrame
	finalized   bool             // HandleClose has been (or is being) called
	wsCloseDue  bool             // a WS close frame is to follow the queue
	wsStatus    uint16           // its status
	closeCode   pb.DisconnectCode
	lingerUntil int64         // unix ns: the close flush gives up at this time
	registered  bool          // added to the epoll set (ADD once, MOD after)
	readAgain   bool          // an epoll event came while the read side was taken or paused
	pause       uint8         // pauseNone, pausePaused or pauseDrained
	resumeCh    chan struct{} // goroutine driver: closed to wake a paused reader

	// Made once under mu when something first waits on Context; cancelled
	// once the close has begun (cancelContext). A pointer, so a connection
	// nothing waits on pays 8 bytes for it.
	cctx atomic.Pointer[cancelState]
}

// Read backpressure: a client that pipelines requests faster than it reads
// the replies stops being read (its socket is not re-armed) while its own
// send queue is over half a cap, instead of being dropped as slow.
const (
	pauseNone    = iota
	pausePaused  // the reader stopped; resume when the queue drains
	pauseDrained // drained while the reader was still busy: it resumes
)

// ID is unique among the Gateway's connections, never reused.
func (c *Conn) ID() uint64 { return c.id }

// Transport reports how the client is connected.
func (c *Conn) Transport() Transport { return c.transport }

// Codec is the codec of frames sent to the client: on WebSocket it is fixed
// by the first data message (text: JSON, binary: protobuf) and is JSON before
// that (a close before any frame, such as the auth timeout, must be readable
// by a browser, which speaks JSON); on TCP it is wire.Proto.
func (c *Conn) Codec() wire.Codec { return wire.Codec(c.codec.Load()) }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// SetAuthenticated stops the auth timeout and frees the connection's place
// under the caps on unauthenticated connections.
func (c *Conn) SetAuthenticated() {
	c.authed.Store(true)
	c.g.release(c.slots.Swap(0), c.nc.RemoteAddr())
}

// Context returns a context that is cancelled once the connection begins to
// close (Close, a failed write, the idle or auth timeout, Shutdown): work
// done for its frames stops when nobody is left to answer it. While a frame
// is being handled the connection is not read, so a client that vanishes
// meanwhile is noticed by a failed write or the idle timeout.
//
// It costs nothing until something waits on it: Err is a flag, and only
// Done (a store call with a deadline, a wait in a full queue) makes the
// channel behind it, once per connection. Idle connections, most of a
// server's, never do.
func (c *Conn) Context() context.Context { return connContext{c} }

// connContext is Conn's context; one pointer, so it boxes into the
// interface without an allocation.
type connContext struct{ c *Conn }

func (connContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (x connContext) Done() <-chan struct{} { return x.c.cancelCtx().Done() }

func (x connContext) Err() error {
	if p := x.c.cctx.Load(); p != nil {
		return p.ctx.Err()
	}
	if x.c.ctxEnded.Load() {
		return context.Canceled
	}
	return nil
}

// Value answers for the context behind Done once made, so a context derived
// from this one (context.WithTimeout, which calls Done first) joins it as a
// child instead of watching it from a goroutine of its own.
func (x connContext) Value(key any) any {
	if p := x.c.cctx.Load(); p != nil {
		return p.ctx.Value(key)
	}
	return nil
}

type cancelState struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// cancelCtx makes, once, the cancellable context behind Context's Done.
func (c *Conn) cancelCtx() context.Context {
	p := c.cctx.Load()
	if p == nil {
		c.mu.Lock()
		if p = c.cctx.Load(); p == nil {
			ctx, cancel := context.WithCancel(context.Background())
			p = &cancelState{ctx: ctx, cancel: cancel}
			c.cctx.Store(p)
		}
		c.mu.Unlock()
	}
	if c.ctxEnded.Load() { // the close began; cancelContext may have missed p
		p.cancel()
	}
	return p.ctx
}

// cancelContext ends Context, once the close has begun (called after
// Conn.mu is released, so no other lock is taken under it). Of this and a
// concurrent cancelCtx, at least one sees the other's store and cancels.
func (c *Conn) cancelContext() {
	c.ctxEnded.Store(true)
	if p := c.cctx.Load(); p != nil {
		p.cancel()
	}
}

// Value returns what SetValue stored, or nil.
func (c *Conn) Value() any {
	if p := c.value.Load(); p != nil {
		return *p
	}
	return nil
}

// SetValue stores the handler's per-connection state.
func (c *Conn) SetValue(v any) { c.value.Store(&v) }

// SendFrame is Send(wire.NewOutbound(f)).
func (c *Conn) SendFrame(f *pb.ServerFrame) bool { return c.Send(wire.NewOutbound(f)) }

// Send queues o for the client and schedules a flush; it never blocks on the
// socket. It returns false if the connection is closed or closing, or if o
// would take the queue past SendQueueFrames or SendQueueBytes, in which case
// the connection is closed with DISCONNECT_CODE_SLOW. A best-effort frame
// (o.BestEffort) is instead refused, with the connection left open, when
// the queue is at half of either cap (see Offer).
func (c *Conn) Send(o *wire.Outbound) bool { return c.SendHeld(o, nil) }

// SendHeld is Send, but when h is not nil the flush it would schedule is
// deferred to h.Release (see wire.Hold).
func (c *Conn) SendHeld(o *wire.Outbound, h *wire.Hold) bool {
	return c.send(o, h) == wire.Taken
}

// Offer is Send for a caller that must tell a refused best-effort frame
// from a closed connection: it reports whether o was taken, refused (a
// best-effort frame while the queue holds half of either cap or more) or
// the connection is gone.
func (c *Conn) Offer(o *wire.Outbound) wire.Offered { return c.send(o, nil) }

// send queues o. Best-effort frames (pushes) may use only the first half of
// the queue: a burst of them is refused and counted, so it never costs the
// connection its life, and the other half stays free for stored messages,
// which keep the close-as-slow guarantee (the client then catches up by sync).
func (c *Conn) send(o *wire.Outbound, h *wire.Hold) wire.Offered {
	if o == nil || c.closingF.Load() {
		return wire.Gone
	}
	// Encoding happens here, once per codec per Outbound, outside the lock.
	size := len(o.Bytes(c.Codec())) + wsMaxHeader
	cfg := &c.g.cfg
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return wire.Gone
	}
	if o.BestEffort() {
		if 2*(len(c.queue)+1) > cfg.SendQueueFrames || 2*(c.queuedBytes+c.inflight+size) > cfg.SendQueueBytes {
			c.mu.Unlock()
			c.g.stats.pushRefused.Add(1)
			return wire.Refused
		}
		c.g.stats.pushTaken.Add(1)
	} else if len(c.queue) >= cfg.SendQueueFrames || c.queuedBytes+c.inflight+size > cfg.SendQueueBytes {
		c.mu.Unlock()
		c.beginClose(pb.DisconnectCode_DISCONNECT_CODE_SLOW, "send queue full", nil)
		return wire.Gone
	}
	c.queue = append(c.queue, o)
	c.queuedBytes += size
	sched := !c.flushing
	c.flushing = true
	c.mu.Unlock()
	switch {
	case !sched:
	case h != nil:
		h.Defer(c) // flushing stays set, so nobody else schedules it meanwhile
	default:
		c.g.flushQ.push(c)
	}
	return wire.Taken
}

// ScheduleFlush implements wire.Flusher: it queues a flush that SendHeld deferred.
func (c *Conn) ScheduleFlush() { c.g.flushQ.push(c) }

// Close queues a Disconnect frame with code and reason (past the caps),
// flushes what is queued (giving up after a short linger), closes the
// socket, and then calls Handler.HandleClose. It does not block; calling it
// again, or on a closed connection, does nothing.
func (c *Conn) Close(code pb.DisconnectCode, reason string) {
	c.beginClose(code, reason, nil)
}

func disconnectFrame(code pb.DisconnectCode, reason string) *wire.Outbound {
	return wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Disconnect{
		Disconnect: &pb.Disconnect{Code: code, Reason: reason},
	}})
}

// beginClose starts a graceful close: pre (if any), a Disconnect frame and,
// on WebSocket, a close frame are queued after everything already queued.
// It reports whether this call started the close.
func (c *Conn) beginClose(code pb.DisconnectCode, reason string, pre *wire.Outbound) bool {
	if _, isTLS := c.nc.(*tls.Conn); isTLS && !c.heard.Load() {
		// A TLS client that has sent nothing may not have finished its
		// handshake (a slow or silent one); writing the frame would block
		// the flusher on that handshake until the write timeout.
		return c.abort(code)
	}
	frames := make([]*wire.Outbound, 0, 2)
	if pre != nil {
		frames = append(frames, pre)
	}
	frames = append(frames, disconnectFrame(code, reason))
	return c.closeQueued(code, frames, wsCloseStatus(code))
}

// closeQueued marks the connection closing, queues frames and (WS, if
// wsStatus != 0) a close frame, and schedules the flush that ends with
// closing the socket.
func (c *Conn) closeQueued(code pb.DisconnectCode, frames []*wire.Outbound, wsStatus uint16) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	c.markClosingLocked(code)
	c.queue = append(c.queue, frames...)
	if c.transport == TransportWS && wsStatus != 0 {
		c.wsCloseDue = true
		c.wsStatus = wsStatus
	}
	c.lingerUntil = time.Now().Add(c.g.linger).UnixNano()
	if c.backlog {
		// Cut short a write blocked on a full socket; the backlog goroutine
		// sets its deadlines under mu too, so this one is not overwritten.
		_ = c.nc.SetWriteDeadline(time.Unix(0, c.lingerUntil))
	}
	sched := !c.flushing
	c.flushing = true
	c.mu.Unlock()
	c.cancelContext()
	if sched {
		c.g.flushQ.push(c)
	}
	return true
}

// abort closes the socket now, dropping whatever is queued: the peer has
// gone, or the socket failed. code is used unless a close had already begun.
// It reports whether this call decided the code.
func (c *Conn) abort(code pb.DisconnectCode) bool {
	c.mu.Lock()
	set := !c.closing
	if set {
		c.markClosingLocked(code)
	}
	c.queue, c.ctl, c.queuedBytes = nil, nil, 0
	c.wsCloseDue = false
	c.mu.Unlock()
	c.cancelContext()
	c.shutSocket()
	return set
}

// markClosingLocked records the close decision. SlowClosed is counted here,
// before the socket closes, so HandleClose never sees a slow close that
// Stats does not yet count.
func (c *Conn) markClosingLocked(code pb.DisconnectCode) {
	c.closing = true
	c.closingF.Store(true)
	c.closeCode = code
	if code == pb.DisconnectCode_DISCONNECT_CODE_SLOW {
		c.g.stats.slowClosed.Add(1)
	}
}

// shutSocket closes the socket once. Whoever finds the socket closed and the
// read side free first calls finalize, so HandleClose runs exactly once and
// after the last HandleFrame.
func (c *Conn) shutSocket() {
	c.mu.Lock()
	if c.sockClosed {
		c.mu.Unlock()
		return
	}
	c.sockClosed = true
	if c.resumeCh != nil {
		close(c.resumeCh)
		c.resumeCh = nil
	}
	idle := !c.readerBusy
	fin := idle && !c.finalized
	if fin {
		c.finalized = true
	}
	c.mu.Unlock()
	if c.raw != nil {
		// No EPOLL_CTL_DEL: closing the (never duplicated) fd removes it
		// from epoll, and events already taken are keyed by connection id,
		// which serveReady finds closed.
		if idle {
			// Unread input would make close() send RST and discard the
			// frames just written; read it away first (non-blocking).
			drain(c.raw)
		}
	}
	_ = c.nc.Close()
	if fin {
		c.g.finalize(c)
	}
}

// releaseReader gives up the read side. If the socket is already closed the
// caller finalizes. An epoll-driven connection is added to the epoll set
// the first time, and re-armed if the socket may hold bytes no event will
// report: unread is true when the caller stopped before draining it (or
// paused), and an event that came meanwhile (readAgain) counts too.
func (c *Conn) releaseReader(unread bool) {
	c.mu.Lock()
	c.readerBusy = false
	fin := c.sockClosed && !c.finalized
	if fin {
		c.finalized = true
	}
	kick := !fin && !c.closing && c.pause == pauseDrained
	if kick {
		c.pause = pauseNone
	}
	first := !c.registered
	rearm := !fin && !kick && !c.closing && c.raw != nil && c.pause == pauseNone &&
		(first || unread || c.readAgain)
	if rearm {
		// Written under mu: the next reader's Lock orders it (the race
		// detector cannot see the ordering epoll gives).
		c.registered = true
		c.readAgain = false
	}
	c.mu.Unlock()
	switch {
	case fin:
		c.g.finalize(c)
	case kick:
		go c.resume()
	case rearm:
		if err := c.g.poll.arm(c, first); err != nil {
			c.abort(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED)
		}
	}
	// Otherwise the close flush finalizes once it has closed the socket.
}

// pauseIfBacklogged pauses reading while the connection's own replies are
// piling up (over half of either cap). It is called by the reader.
func (c *Conn) pauseIfBacklogged() bool {
	cfg := &c.g.cfg
	c.mu.Lock()
	defer c.mu.Unlock()
	// A non-empty queue or inflight bytes mean a flush is pending, and that
	// flush ends in takeLocked finding the queue empty, which resumes.
	high := !c.closing && (2*len(c.queue) >= cfg.SendQueueFrames || 2*(c.queuedBytes+c.inflight) >= cfg.SendQueueBytes)
	if high {
		c.pause = pausePaused
		if c.raw == nil && c.resumeCh == nil {
			c.resumeCh = make(chan struct{})
		}
	}
	return high
}

// resumeLocked is called by a flush that found the queue empty. It reports
// whether the caller must start resume.
func (c *Conn) resumeLocked() (kick bool) {
	switch {
	case c.pause != pausePaused:
	case c.resumeCh != nil:
		close(c.resumeCh)
		c.resumeCh = nil
		c.pause = pauseNone
	case c.readerBusy:
		c.pause = pauseDrained
	default:
		c.pause = pauseNone
		kick = true
	}
	return kick
}

// resume takes the read side of a paused epoll connection, parses the
// frames it had left and re-arms it.
func (c *Conn) resume() {
	c.mu.Lock()
	if c.closing || c.readerBusy || c.finalized {
		c.mu.Unlock()
		return
	}
	c.readerBusy = true
	c.mu.Unlock()
	c.consume(nil)
	// While paused the socket was not read, and the events of what arrived
	// meanwhile are spent: re-arm so epoll reports what is there.
	c.releaseReader(true)
}

// waitResume blocks the goroutine driver's reader while it is paused.
func (c *Conn) waitResume() {
	for {
		c.mu.Lock()
		ch := c.resumeCh
		c.mu.Unlock()
		if ch == nil {
			return
		}
		<-ch
		if !c.consume(nil) {
			return
		}
	}
}
