package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	"github.com/parleyim/parley/internal/limit"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// ErrClosed is returned by ServeTCP and Adopt after Shutdown has begun.
var ErrClosed = errors.New("gateway: closed")

// ErrRefused is returned by Adopt for a connection refused by the caps on
// unauthenticated connections or the descriptor reserve.
var ErrRefused = errors.New("gateway: connection refused (unauthenticated cap or descriptor reserve)")

// Handler receives a connection's frames and its end.
type Handler interface {
	// HandleFrame is called for each client frame, in order, never
	// concurrently for one connection; it may block briefly (backpressure),
	// which holds up that connection and one worker.
	HandleFrame(c *Conn, f *pb.ClientFrame)
	// HandleClose is called exactly once per connection, after its last
	// HandleFrame. code is why it closed; DISCONNECT_CODE_UNSPECIFIED means
	// the client went away (closed, reset, or a WebSocket close frame).
	HandleClose(c *Conn, code pb.DisconnectCode)
}

// Gateway serves client connections. It is created running by New and
// stopped by Shutdown.
type Gateway struct {
	cfg         Config
	h           Handler
	log         *slog.Logger
	linger      time.Duration // how long a closing connection may take to flush
	stats       counters
	nextID      atomic.Uint64
	connLimit   *limit.Keyed // new connections per client IP; SetConnRate changes it
	clock       atomic.Int64 // unix ns, refreshed by the sweeper; a cheap "now" for touch
	unauth      unauthCount  // connections not yet authenticated
	fdBase      atomic.Int64 // open descriptors less Len, sampled by the sweeper; -1: unknown
	fdSampledAt atomic.Int64 // unix ns of that sample
	fdSince     atomic.Int64 // connections ReserveListener accepted since that sample

	poll   *poller    // nil without epoll: every connection gets a goroutine
	work   chan *Conn // epoll-ready connections for the workers
	flushQ flushQueue

	mu sync.RWMutex
	// Guarded by mu.
	conns     map[uint64]*Conn
	listeners map[net.Listener]struct{}
	shutting  bool

	stop      chan struct{}  // closed when loops must stop
	stopOnce  sync.Once      // guards close(stop) and the loop teardown
	pollDone  chan struct{}  // closed when the epoll loop has returned
	loops     sync.WaitGroup // workers, flushers, sweeper
	shutdownF atomic.Bool    // mirrors shutting for lock-free checks
}

// New validates cfg, fills in its defaults and starts the Gateway's loops.
func New(cfg Config, h Handler) (*Gateway, error) {
	if h == nil {
		return nil, errors.New("gateway: nil Handler")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg:       cfg,
		h:         h,
		log:       cfg.Logger,
		linger:    min(time.Second, cfg.WriteTimeout),
		conns:     make(map[uint64]*Conn),
		listeners: make(map[net.Listener]struct{}),
		stop:      make(chan struct{}),
		pollDone:  make(chan struct{}),
	}
	g.connLimit = limit.NewVar(cfg.ConnRate)
	g.unauth.perIP = make(map[netip.Addr]int32)
	g.sampleFDs()
	g.clock.Store(time.Now().UnixNano())
	g.flushQ.init()
	g.poll, err = newPoller()
	if err != nil {
		return nil, err
	}
	if g.poll != nil {
		g.work = make(chan *Conn, 1024)
		go g.pollLoop()
		for range cfg.Workers {
			g.loops.Add(1)
			go g.worker()
		}
	} else {
		close(g.pollDone)
	}
	for range max(2, runtime.GOMAXPROCS(0)) {
		g.loops.Add(1)
		go g.flusher()
	}
	g.loops.Add(1)
	go g.sweeper()
	return g, nil
}

// ServeTCP accepts raw TCP connections from ln until ln is closed or
// Shutdown is called (then it returns nil). Shutdown closes ln.
func (g *Gateway) ServeTCP(ln net.Listener) error {
	g.mu.Lock()
	if g.shutting {
		g.mu.Unlock()
		return ErrClosed
	}
	g.listeners[ln] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.listeners, ln)
		g.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if g.shutdownF.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of fds and the like: wait, do not spin (as net/http does).
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			g.log.Warn("gateway: accept", "err", err, "retry", backoff)
			select {
			case <-time.After(backoff):
			case <-g.stop:
				return nil
			}
			continue
		}
		backoff = 0
		if !g.admit(nc.RemoteAddr()) {
			_ = nc.Close()
			continue
		}
		slots, why := g.reserve(addrIP(nc.RemoteAddr()))
		if why != Admitted {
			_ = nc.Close()
			continue
		}
		_ = g.attach(nc, TransportTCP, nil, slots)
	}
}

// admit applies the per-IP connection rate to a new connection from addr.
func (g *Gateway) admit(addr net.Addr) bool {
	if g.connLimit.Unlimited() {
		return true
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return true // unix sockets and the like: no address to limit
	}
	ip, _ := netip.AddrFromSlice(ta.IP)
	return g.admitIP(ip)
}

// SetConnRate changes ConnRate from the next connection on.
func (g *Gateway) SetConnRate(r limit.Rate) { g.connLimit.SetRate(r) }

func (g *Gateway) admitIP(ip netip.Addr) bool {
	if g.connLimit.Unlimited() {
		return true
	}
	ip = ip.Unmap()
	for _, p := range g.cfg.ConnRateExempt {
		if p.Contains(ip) {
			return true
		}
	}
	if g.connLimit.Allow(string(ip.AsSlice())) {
		return true
	}
	g.stats.rateLimited.Add(1)
	return false
}

// ServeHTTP upgrades the request to a WebSocket and serves it. Mount it on
// the WebSocket endpoint (/ws).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.shutdownF.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ap, perr := netip.ParseAddrPort(r.RemoteAddr)
	if perr == nil && !g.admitIP(ap.Addr()) {
		http.Error(w, "too many connections from this address", http.StatusTooManyRequests)
		return
	}
	slots, why := g.reserve(ap.Addr().Unmap())
	if why != Admitted {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "server busy", http.StatusServiceUnavailable)
		return
	}
	nc, rw, _, err := ws.UpgradeHTTP(r, w)
	if err != nil {
		// The upgrader has answered with an HTTP error.
		if nc != nil {
			_ = nc.Close()
		}
		g.releaseAddr(slots, ap.Addr().Unmap())
		return
	}
	var initial []byte
	if rw != nil && rw.Reader.Buffered() > 0 {
		// Frames the client sent right behind its handshake were read into
		// the HTTP server's buffer, which is dropped here.
		p, _ := rw.Reader.Peek(rw.Reader.Buffered())
		initial = bytes.Clone(p)
	}
	_ = g.attach(nc, TransportWS, initial, slots)
}

// Adopt serves an already accepted connection: a *tls.Conn, or any net.Conn.
// Connections with a file descriptor epoll can watch (*net.TCPConn,
// *net.UnixConn) use the epoll loop; others get a goroutine. For
// TransportWS the WebSocket handshake must already be done (for WebSocket
// over TLS, serving ServeHTTP from an https server is simpler). On error nc
// is closed.
func (g *Gateway) Adopt(nc net.Conn, t Transport) error {
	if t != TransportWS && t != TransportTCP {
		_ = nc.Close()
		return errors.New("gateway: unknown transport")
	}
	slots, why := g.reserve(addrIP(nc.RemoteAddr()))
	if why != Admitted {
		_ = nc.Close()
		return ErrRefused
	}
	return g.attach(nc, t, nil, slots)
}

// attach registers nc and starts serving it; initial holds bytes already
// read from it, slots the unauthenticated slots reserved for it.
func (g *Gateway) attach(nc net.Conn, t Transport, initial []byte, slots uint32) error {
	c := &Conn{
		g:         g,
		id:        g.nextID.Add(1),
		nc:        nc,
		transport: t,
		born:      time.Now().UnixNano(),
	}
	if g.poll != nil {
		c.raw = pollable(nc)
	}
	c.lastRecv.Store(c.born)
	c.slots.Store(slots)
	// A WebSocket arrives after its HTTP upgrade was read: any TLS handshake is done.
	c.heard.Store(t == TransportWS)
	if t == TransportWS {
		c.codec.Store(uint32(wire.JSON)) // until the first data frame says otherwise
	}
	// The attaching goroutine owns the read side until it hands it over.
	c.readerBusy = true

	g.mu.Lock()
	if g.shutting {
		g.mu.Unlock()
		g.release(c.slots.Swap(0), nc.RemoteAddr())
		_ = nc.Close()
		return ErrClosed
	}
	g.conns[c.id] = c
	g.mu.Unlock()
	g.stats.accepted.Add(1)
	g.stats.open.Add(1)
	if t == TransportWS {
		g.stats.acceptedWS.Add(1)
		g.stats.openWS.Add(1)
	} else {
		g.stats.acceptedTCP.Add(1)
		g.stats.openTCP.Add(1)
	}

	if c.raw == nil {
		go c.serveGoroutine(initial)
		return nil
	}
	if len(initial) > 0 {
		c.consume(initial)
	}
	c.releaseReader(false) // adds it to the epoll set
	return nil
}

// serveGoroutine is the goroutine-per-connection driver: same parsing and
// delivery as the epoll path, with a blocking read.
func (c *Conn) serveGoroutine(initial []byte) {
	if len(initial) > 0 && c.consume(initial) {
		c.waitResume()
	}
	buf := make([]byte, 4<<10)
	heard := false
	for !c.closingF.Load() {
		n, err := c.nc.Read(buf)
		if n > 0 && !heard {
			heard = true
			c.heard.Store(true)
		}
		if n > 0 && c.consume(buf[:n]) {
			c.waitResume()
		}
		if err != nil {
			c.abort(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED)
			break
		}
	}
	c.releaseReader(false)
}

// worker reads epoll-ready connections and runs their handlers.
func (g *Gateway) worker() {
	defer g.loops.Done()
	buf := make([]byte, 64<<10)
	for c := range g.work {
		g.serveReady(c, buf)
	}
}

// maxReadsPerTurn bounds how much one connection is read before the worker
// moves on; re-arming makes epoll report the rest.
const maxReadsPerTurn = 4

func (g *Gateway) serveReady(c *Conn, buf []byte) {
	c.mu.Lock()
	if c.closing || c.finalized {
		c.mu.Unlock()
		return
	}
	if c.readerBusy || c.pause != pauseNone {
		// Edge-triggered: this event is not repeated, so whoever holds the
		// read side (or resumes it) re-arms.
		c.readAgain = true
		c.mu.Unlock()
		return
	}
	c.readerBusy = true
	c.mu.Unlock()
	unread := true
	for reads := 0; reads < maxReadsPerTurn; {
		reads++
		n, err := readRaw(c.raw, buf)
		if n > 0 && (c.consume(buf[:n]) || c.closingF.Load()) {
			break // paused for backpressure (resume re-arms), or closing
		}
		if err != nil && isWouldBlock(err) {
			unread = false
		} else if err != nil || n == 0 { // n == 0: the peer closed
			c.abort(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED)
			break
		} else if n < len(buf) {
			// A short read emptied the socket: anything later is a new edge.
			unread = false
		}
		if !unread {
			// Bytes that came during this turn: read them now, cheaper
			// than re-arming for them.
			c.mu.Lock()
			again := c.readAgain && reads < maxReadsPerTurn
			if again {
				c.readAgain = false
				unread = true
			}
			c.mu.Unlock()
			if !again {
				break
			}
		}
	}
	c.releaseReader(unread)
}

// pollLoop runs the epoll wait loop, handing ready connections to workers.
func (g *Gateway) pollLoop() {
	defer close(g.pollDone)
	g.poll.wait(func(id uint64) {
		g.mu.RLock()
		c := g.conns[id]
		g.mu.RUnlock()
		if c != nil {
			g.work <- c
		}
	})
}

// finalize forgets c and calls HandleClose. It runs once per connection,
// when its socket is closed and no reader owns it.
func (g *Gateway) finalize(c *Conn) {
	g.mu.Lock()
	delete(g.conns, c.id)
	g.mu.Unlock()
	g.release(c.slots.Swap(0), c.nc.RemoteAddr())
	c.mu.Lock()
	code := c.closeCode
	c.queue, c.ctl = nil, nil
	c.mu.Unlock()
	c.partial, c.frag = nil, nil
	g.stats.open.Add(-1)
	if c.transport == TransportWS {
		g.stats.openWS.Add(-1)
	} else {
		g.stats.openTCP.Add(-1)
	}
	g.stats.closed[codeSlot(code)].Add(1)
	defer func() {
		if r := recover(); r != nil {
			g.stats.panics.Add(1)
			g.log.Error("gateway: HandleClose panic", "conn", c.id, "panic", r)
		}
	}()
	g.h.HandleClose(c, code)
}

// sweepEvery is the sweep period: a quarter of the shortest timeout,
// between 10 ms and 1 s.
func (g *Gateway) sweepEvery() time.Duration {
	d := min(g.cfg.AuthTimeout, g.cfg.IdleTimeout) / 4
	return min(max(d, 10*time.Millisecond), time.Second)
}

// sweeper enforces the auth and idle timeouts with one periodic scan instead
// of a timer per connection.
func (g *Gateway) sweeper() {
	defer g.loops.Done()
	t := time.NewTicker(g.sweepEvery())
	defer t.Stop()
	var auth, idle []*Conn
	for {
		select {
		case <-g.stop:
			return
		case now := <-t.C:
			ns := now.UnixNano()
			g.clock.Store(ns)
			g.sampleFDs()
			authBefore := ns - int64(g.cfg.AuthTimeout)
			idleBefore := ns - int64(g.cfg.IdleTimeout)
			auth, idle = auth[:0], idle[:0]
			g.mu.RLock()
			for _, c := range g.conns {
				switch {
				case c.closingF.Load():
				case !c.authed.Load() && c.born < authBefore:
					auth = append(auth, c)
				case c.lastRecv.Load() < idleBefore:
					idle = append(idle, c)
				}
			}
			g.mu.RUnlock()
			for _, c := range auth {
				c.Close(pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT, "auth timeout")
			}
			for _, c := range idle {
				c.Close(pb.DisconnectCode_DISCONNECT_CODE_HEARTBEAT_TIMEOUT, "heartbeat timeout")
			}
			clear(auth)
			clear(idle)
		}
	}
}

// Len is the number of open connections.
func (g *Gateway) Len() int { return int(g.stats.open.Load()) }

// Stats returns a snapshot of the counters.
func (g *Gateway) Stats() Stats {
	st := g.stats.snapshot()
	st.Unauthenticated = g.Unauthenticated()
	return st
}

// closeSpread closes conns with SERVER_SHUTDOWN, evenly over DrainWindow
// (or what is left of ctx, if sooner), in slices of one tick each.
func (g *Gateway) closeSpread(ctx context.Context, conns []*Conn) {
	window := g.cfg.DrainWindow
	if dl, ok := ctx.Deadline(); ok {
		window = min(window, time.Until(dl)/2) // leave time to flush and close
	}
	const tick = 50 * time.Millisecond
	steps := int(window / tick)
	if steps < 1 || len(conns) == 0 {
		for _, c := range conns {
			c.Close(pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN, "server shutting down")
		}
		return
	}
	steps = min(steps, len(conns))
	t := time.NewTicker(window / time.Duration(steps))
	defer t.Stop()
	for i := range steps {
		for _, c := range conns[i*len(conns)/steps : (i+1)*len(conns)/steps] {
			c.Close(pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN, "server shutting down")
		}
		if i == steps-1 {
			break
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			for _, c := range conns[(i+1)*len(conns)/steps:] {
				c.Close(pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN, "server shutting down")
			}
			return
		}
	}
}

// Shutdown stops accepting, closes every connection (spread over
// DrainWindow) with DISCONNECT_CODE_SERVER_SHUTDOWN (each flushes what it has queued), waits
// for them to finish and stops the Gateway's loops. If ctx ends first, the
// remaining sockets are closed at once and ctx.Err() is returned.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.shutting = true
	g.shutdownF.Store(true)
	lns := make([]net.Listener, 0, len(g.listeners))
	for ln := range g.listeners {
		lns = append(lns, ln)
	}
	g.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	g.closeSpread(ctx, g.snapshot())

	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	var err error
wait:
	for g.Len() > 0 {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			for _, c := range g.snapshot() {
				c.abort(pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN)
			}
			break wait
		case <-t.C:
		}
	}
	g.stopLoops()
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { g.loops.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *Gateway) snapshot() []*Conn {
	g.mu.RLock()
	defer g.mu.RUnlock()
	cs := make([]*Conn, 0, len(g.conns))
	for _, c := range g.conns {
		cs = append(cs, c)
	}
	return cs
}

// stopLoops stops the epoll loop, then the workers (the loop is their only
// producer), the flushers and the sweeper. The epoll fd is closed once the
// workers, which re-arm through it, are gone.
func (g *Gateway) stopLoops() {
	g.stopOnce.Do(func() {
		close(g.stop)
		if g.poll != nil {
			g.poll.wake()
			<-g.pollDone
			close(g.work)
			go func() { g.loops.Wait(); g.poll.close() }()
		}
		g.flushQ.close()
	})
}
