package client

import (
	"context"
	cryptorand "crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gobwas/ws"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Defaults for zero Options fields.
const (
	DefaultDialTimeout     = 10 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	DefaultHeartbeat       = 30 * time.Second // when the server announces none
	DefaultMaxFrameBytes   = 16 << 20
	DefaultMaxSendAttempts = 8
	// maxQueuedBytes bounds encoded frames waiting for the writer; callers
	// block (or hit their context) beyond it instead of growing memory.
	maxQueuedBytes = 4 << 20
)

// Options configure one connection. Addr and Token are required.
type Options struct {
	// Addr is "ws://host:port" (path defaults to /ws), "wss://...",
	// "tcp://host:port" or "tls://host:port".
	Addr       string
	Token      string
	DeviceID   string
	DeviceType string
	// Codec of WebSocket frames: wire.Proto (binary, the default) or
	// wire.JSON (text). TCP is always protobuf.
	Codec wire.Codec
	// TLSConfig for wss:// and tls:// (nil: the system defaults).
	TLSConfig *tls.Config
	// LocalAddr is the local address to connect from (nil: the kernel's
	// choice); a load generator spreads connections over several source
	// IPs with it when one address runs out of ephemeral ports.
	LocalAddr net.Addr

	// DialTimeout bounds connect + handshake + auth (default 10 s).
	DialTimeout time.Duration
	// RequestTimeout bounds the wait for each reply (default 10 s; negative:
	// only the caller's context bounds it).
	RequestTimeout time.Duration
	// Heartbeat overrides the ping interval; 0 uses AuthOk.heartbeat_seconds,
	// negative disables pings (and the dead-link check they enable).
	Heartbeat time.Duration
	// MaxFrameBytes limits received frames (default 16 MiB).
	MaxFrameBytes int
	// MaxSendAttempts bounds Send's retries (default 8); the caller's context
	// bounds them as well.
	MaxSendAttempts int

	// OnMessage, OnReceipt and OnClose are called on the connection's reader
	// goroutine, one at a time, in arrival order. They must not block for
	// long and must not wait for a reply on the same Client (the reader
	// delivers replies, so that would deadlock): hand work to another
	// goroutine instead.
	OnMessage func(*pb.Message)
	OnReceipt func(*pb.Receipt)
	// OnClose is called once, after the last OnMessage, with why the
	// connection ended: ErrClosed after Close, a [*DisconnectError] when the
	// server said why, otherwise an error wrapping the network error.
	OnClose func(err error)

	// AutoDeliveredAck sends a cumulative DeliveredAck (without reply) for
	// every conversation OnMessage was called for, once the received burst is
	// handled: one ack per conversation per burst, not one per message.
	AutoDeliveredAck bool

	// OnTyping, OnPresence and OnContact receive pushed typing indicators,
	// presence changes (of users subscribed to with SubscribePresence) and
	// contact changes. Like OnMessage, they run on the reader goroutine.
	OnTyping   func(*pb.TypingEvent)
	OnPresence func(*pb.PresenceEvent)
	OnContact  func(*pb.ContactEvent)

	// OnHidden and OnConversation receive what this user changed on another
	// device: messages deleted for them (DeleteForMe) and conversation
	// settings (pinned, muted). They run on the reader goroutine.
	OnHidden       func(*pb.HiddenEvent)
	OnConversation func(*pb.ConversationEvent)

	// OnPush receives pushes (the admin push API, or RoomSend of another
	// room member; Push.room is set for a room). Pushes are not stored: a
	// client offline when one is sent never gets it. Runs on the reader goroutine.
	OnPush func(*pb.Push)

	// OnReaction receives reaction counts as they change (see
	// [ReactionState] for keeping them) and OnStreamChunk the text of
	// streamed messages as it is written (not stored: the finished
	// message comes through OnMessage with StreamId set). They run on the
	// reader goroutine.
	OnReaction    func(*pb.ReactionUpdate)
	OnStreamChunk func(*pb.StreamChunk)
}

func (o Options) withDefaults() Options {
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.MaxSendAttempts <= 0 {
		o.MaxSendAttempts = DefaultMaxSendAttempts
	}
	return o
}

// Client is one authenticated connection. Its methods are safe for
// concurrent use; many requests (sends included) may be in flight at once.
type Client struct {
	opts   Options
	conn   net.Conn
	tr     transport
	authOk *pb.AuthOk
	// frameLimit is AuthOk.max_frame_bytes (0 before it came): larger
	// frames are refused before they are sent.
	frameLimit atomic.Int64
	hb         time.Duration
	ids        msgIDs

	nextID    atomic.Uint64
	lastWrite atomic.Int64 // unix nanos
	lastRead  atomic.Int64

	// Writer state: frames are encoded straight into wbuf by the caller and
	// the writer goroutine writes all of wbuf with one syscall.
	wmu      sync.Mutex
	wbuf     []byte
	wflushed chan struct{} // closed after a write; made only when someone waits
	wake     chan struct{}

	pmu     sync.Mutex
	pending map[uint64]*call
	closed  bool
	calls   sync.Pool

	closeReq  chan struct{}
	closeOnce sync.Once
	done      chan struct{}
	failOnce  sync.Once
	err       error // why the connection ended; set before done is closed

	// Reader goroutine only.
	acks map[string]uint64
	disc *DisconnectError
}

type call struct {
	ch    chan struct{}
	f     *pb.ServerFrame
	err   error
	timer *time.Timer
}

// Dial connects, authenticates and returns once the server accepted the
// token. A rejected token is an [*Error] (usually ERROR_CODE_UNAUTHENTICATED)
// or a [*DisconnectError].
func Dial(ctx context.Context, opts Options) (*Client, error) {
	o := opts.withDefaults()
	if o.Addr == "" {
		return nil, errors.New("parley: Options.Addr is required")
	}
	u, err := url.Parse(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("parley: bad address %q: %w", o.Addr, err)
	}
	dctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()

	c := &Client{
		opts:     o,
		wake:     make(chan struct{}, 1),
		pending:  make(map[uint64]*call),
		closeReq: make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.ids.init()
	c.nextID.Store(1) // id 1 is the Auth frame
	c.calls.New = func() any { return &call{ch: make(chan struct{}, 1)} }
	if o.AutoDeliveredAck {
		c.acks = make(map[string]uint64)
	}

	switch u.Scheme {
	case "ws", "wss":
		if u.Path == "" || u.Path == "/" {
			u.Path = "/ws"
		}
		d := ws.Dialer{TLSConfig: o.TLSConfig}
		if o.LocalAddr != nil {
			nd := net.Dialer{LocalAddr: o.LocalAddr}
			d.NetDial = nd.DialContext
		}
		conn, br, _, err := d.Dial(dctx, u.String())
		if err != nil {
			return nil, fmt.Errorf("parley: dial %s: %w", o.Addr, err)
		}
		c.conn = conn
		c.tr = newWSTransport(conn, br, o.Codec, o.MaxFrameBytes, ctlWriter{c})
	case "tcp", "tls":
		if o.Codec == wire.JSON {
			return nil, errors.New("parley: the JSON codec is WebSocket only")
		}
		nd := net.Dialer{LocalAddr: o.LocalAddr}
		conn, err := nd.DialContext(dctx, "tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("parley: dial %s: %w", o.Addr, err)
		}
		if u.Scheme == "tls" {
			cfg := o.TLSConfig.Clone()
			if cfg == nil {
				cfg = &tls.Config{}
			}
			if cfg.ServerName == "" {
				cfg.ServerName = u.Hostname()
			}
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(dctx); err != nil {
				conn.Close()
				return nil, fmt.Errorf("parley: tls %s: %w", o.Addr, err)
			}
			conn = tc
		}
		c.conn = conn
		c.tr = newTCPTransport(conn, o.MaxFrameBytes)
	default:
		return nil, fmt.Errorf("parley: unsupported address scheme %q (want ws, wss, tcp or tls)", u.Scheme)
	}

	if err := c.authenticate(dctx); err != nil {
		c.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	c.hb = o.Heartbeat
	if c.hb == 0 {
		c.hb = time.Duration(c.authOk.GetHeartbeatSeconds()) * time.Second
		if c.hb == 0 {
			c.hb = DefaultHeartbeat
		}
	}
	now := time.Now().UnixNano()
	c.lastWrite.Store(now)
	c.lastRead.Store(now)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// authenticate runs the Auth exchange synchronously, before the reader and
// writer goroutines exist.
func (c *Client) authenticate(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		c.conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b, err := c.tr.appendFrame(nil, &pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{
		Token: c.opts.Token, DeviceId: c.opts.DeviceID, DeviceType: c.opts.DeviceType,
	}}}, 0)
	if err != nil {
		return err
	}
	if _, err := c.conn.Write(b); err != nil {
		return fmt.Errorf("parley: auth: %w", err)
	}
	var authErr error
	for {
		p, codec, err := c.tr.readFrame()
		if err != nil {
			if authErr != nil {
				return authErr // the server closed after its Error (and Disconnect)
			}
			return &closedError{cause: err}
		}
		f := new(pb.ServerFrame)
		if err := wire.DecodeServer(codec, p, f); err != nil {
			return err
		}
		switch b := f.Body.(type) {
		case *pb.ServerFrame_AuthOk:
			c.authOk = b.AuthOk
			c.frameLimit.Store(int64(b.AuthOk.GetMaxFrameBytes()))
			if !stop() {
				return ctx.Err()
			}
			c.conn.SetDeadline(time.Time{})
			return nil
		case *pb.ServerFrame_Error:
			if authErr == nil {
				authErr = errFromFrame(b.Error)
			}
			// Keep reading: a Disconnect may follow; its absence is fine.
			c.conn.SetReadDeadline(time.Now().Add(time.Second))
		case *pb.ServerFrame_Disconnect:
			if authErr != nil {
				return authErr
			}
			return disconnectErr(b.Disconnect)
		}
	}
}

// AuthOk is the server's answer to this connection's Auth frame.
func (c *Client) AuthOk() *pb.AuthOk { return c.authOk }

// ProtocolVersion is the protocol version the server said it speaks in
// AuthOk, "MAJOR.MINOR"; "1.0" from a server too old to say. Compare it with
// wire.ProtocolVersion, what this SDK speaks, to know which features the
// server has (docs/protocol.md, "Versions").
func (c *Client) ProtocolVersion() string {
	if v := c.authOk.GetProtocolVersion(); v != "" {
		return v
	}
	return "1.0"
}

// UserID is the authenticated user.
func (c *Client) UserID() string { return c.authOk.GetUserId() }

// Heartbeat is the ping interval in use (0 or less: none).
func (c *Client) Heartbeat() time.Duration { return c.hb }

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, nil while it is open.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close flushes queued frames, says goodbye (WebSocket close frame) and
// closes the connection. Requests in flight fail with ErrClosed. It does not
// wait for the reader goroutine, so it may be called from a handler.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		close(c.closeReq)
	})
	<-c.done
	return nil
}

// NewClientMsgID returns a client message id unique to this Client: a random
// per-client prefix and a counter (cheaper than random bytes per message).
func (c *Client) NewClientMsgID() string { return c.ids.next() }

// Send sends a message and returns its SendAck, which the server sends only
// once the message is stored. An empty s.ClientMsgId is filled in (on s).
// ERROR_CODE_UNAVAILABLE and request timeouts are retried with the same
// client_msg_id (so the message is stored at most once) until
// MaxSendAttempts or ctx ends; other server errors are returned as [*Error].
// s must not be modified until Send returns.
func (c *Client) Send(ctx context.Context, s *pb.Send) (*pb.SendAck, error) {
	if s.ClientMsgId == "" {
		s.ClientMsgId = c.ids.next()
	}
	f := &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: s}}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		r, err := c.roundTrip(ctx, f)
		if err == nil {
			if ack := r.GetSendAck(); ack != nil {
				return ack, nil
			}
			return nil, ErrProtocol
		}
		retry := errors.Is(err, ErrTimeout)
		if IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
			retry = true
			if werr := c.sleep(ctx, jitter(backoff)); werr != nil {
				return nil, werr
			}
			backoff = min(2*backoff, 2*time.Second)
		}
		if !retry || attempt >= c.opts.MaxSendAttempts {
			return nil, err
		}
	}
}

// SendText sends a 1:1 text message (content type "text") to a user.
func (c *Client) SendText(ctx context.Context, to, text string) (*pb.SendAck, error) {
	return c.Send(ctx, &pb.Send{To: to, ContentType: "text", Payload: []byte(text)})
}

// MarkDelivered moves this device's delivered cursor of a conversation to
// seq (cumulative) and waits for the server's Ok.
func (c *Client) MarkDelivered(ctx context.Context, conversationID string, seq uint64) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Delivered{
		Delivered: &pb.DeliveredAck{ConversationId: conversationID, Seq: seq}}}))
}

// MarkRead moves the user's read cursor of a conversation to seq and waits
// for the server's Ok.
func (c *Client) MarkRead(ctx context.Context, conversationID string, seq uint64) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Read{
		Read: &pb.ReadAck{ConversationId: conversationID, Seq: seq}}}))
}

// Notify queues a frame that wants no reply (its id is set to 0), such as a
// DeliveredAck or ReadAck, without waiting for it to be written.
func (c *Client) Notify(f *pb.ClientFrame) error {
	f.Id = 0
	return c.enqueue(context.Background(), f, true)
}

// Conversations returns one page of the user's conversations, most recent
// first (limit 0: the server's default).
func (c *Client) Conversations(ctx context.Context, limit uint32, pageToken string) (*pb.ConversationList, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SyncConversations{
		SyncConversations: &pb.SyncConversations{Limit: limit, PageToken: pageToken}}})
	if err != nil {
		return nil, err
	}
	if l := r.GetConversations(); l != nil {
		return l, nil
	}
	return nil, ErrProtocol
}

// AllConversations pages through every conversation of the user.
func (c *Client) AllConversations(ctx context.Context) ([]*pb.Conversation, error) {
	var all []*pb.Conversation
	token := ""
	for {
		l, err := c.Conversations(ctx, 1000, token)
		if err != nil {
			return nil, err
		}
		all = append(all, l.Conversations...)
		if l.NextPageToken == "" || l.NextPageToken == token {
			return all, nil
		}
		token = l.NextPageToken
	}
}

// SyncMessages returns messages of a conversation with seq > after, ascending.
func (c *Client) SyncMessages(ctx context.Context, conversationID string, after uint64, limit uint32) (*pb.MessagePage, error) {
	return c.page(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SyncMessages{
		SyncMessages: &pb.SyncMessages{ConversationId: conversationID, AfterSeq: after, Limit: limit}}}))
}

// History returns the newest messages with seq < before (0: from the
// newest), in ascending order.
func (c *Client) History(ctx context.Context, conversationID string, before uint64, limit uint32) (*pb.MessagePage, error) {
	return c.page(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_History{
		History: &pb.History{ConversationId: conversationID, BeforeSeq: before, Limit: limit}}}))
}

// Ping asks for a Pong (the round trip also proves the link is alive).
func (c *Client) Ping(ctx context.Context) (*pb.Pong, error) {
	r, err := c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}})
	if err != nil {
		return nil, err
	}
	if p := r.GetPong(); p != nil {
		return p, nil
	}
	return nil, ErrProtocol
}

// Do sends any request frame (its id is assigned) and returns the reply, for
// frames this package has no method for. An Error reply is returned as
// [*Error]. No retries.
func (c *Client) Do(ctx context.Context, f *pb.ClientFrame) (*pb.ServerFrame, error) {
	return c.roundTrip(ctx, f)
}

func (c *Client) expectOk(r *pb.ServerFrame, err error) error {
	if err != nil {
		return err
	}
	if r.GetOk() == nil {
		return ErrProtocol
	}
	return nil
}

func (c *Client) page(r *pb.ServerFrame, err error) (*pb.MessagePage, error) {
	if err != nil {
		return nil, err
	}
	if p := r.GetMessages(); p != nil {
		return p, nil
	}
	return nil, ErrProtocol
}

// roundTrip sends f under a fresh id and waits for the frame with that id.
func (c *Client) roundTrip(ctx context.Context, f *pb.ClientFrame) (*pb.ServerFrame, error) {
	id := c.nextID.Add(1)
	f.Id = id
	cl := c.calls.Get().(*call)
	c.pmu.Lock()
	if c.closed {
		c.pmu.Unlock()
		c.calls.Put(cl)
		return nil, c.err
	}
	c.pending[id] = cl
	c.pmu.Unlock()

	if err := c.enqueue(ctx, f, false); err != nil {
		if c.abandon(id, cl) {
			c.calls.Put(cl)
		}
		return nil, err
	}
	var timeout <-chan time.Time
	if c.opts.RequestTimeout > 0 {
		// The timer travels with the pooled call: one allocation saved per
		// request. (Since Go 1.23, Reset and Stop leave no stale tick.)
		if cl.timer == nil {
			cl.timer = time.NewTimer(c.opts.RequestTimeout)
		} else {
			cl.timer.Reset(c.opts.RequestTimeout)
		}
		timeout = cl.timer.C
	}
	var err error
	select {
	case <-cl.ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout:
		err = ErrTimeout
	}
	if cl.timer != nil {
		cl.timer.Stop() // before cl can go back to the pool
	}
	if err != nil && c.abandon(id, cl) {
		c.calls.Put(cl)
		return nil, err
	}
	// The reply arrived (possibly racing with the timeout: then use it).
	r, rerr := cl.f, cl.err
	cl.f, cl.err = nil, nil
	c.calls.Put(cl)
	if rerr != nil {
		return nil, rerr
	}
	if e := r.GetError(); e != nil {
		return nil, errFromFrame(e)
	}
	return r, nil
}

// abandon unregisters a call. It returns false when the reply is already on
// its way, in which case it waits for it so that cl can be reused.
func (c *Client) abandon(id uint64, cl *call) bool {
	c.pmu.Lock()
	_, ok := c.pending[id]
	delete(c.pending, id)
	c.pmu.Unlock()
	if !ok {
		<-cl.ch
	}
	return ok
}

// enqueue encodes f into the write buffer and wakes the writer. Unless
// noWait, it waits while too much is queued (backpressure).
func (c *Client) enqueue(ctx context.Context, f *pb.ClientFrame, noWait bool) error {
	c.wmu.Lock()
	for !noWait && len(c.wbuf) >= maxQueuedBytes {
		if c.wflushed == nil {
			c.wflushed = make(chan struct{})
		}
		ch := c.wflushed
		c.wmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.err
		}
		c.wmu.Lock()
	}
	select {
	case <-c.done:
		c.wmu.Unlock()
		return c.err
	default:
	}
	wasEmpty := len(c.wbuf) == 0
	var err error
	c.wbuf, err = c.tr.appendFrame(c.wbuf, f, int(c.frameLimit.Load()))
	c.wmu.Unlock()
	if err == errFrameTooLarge {
		// The server would close the connection for it (and a resend
		// would close the next one): refuse it here, the connection kept.
		return &Error{Code: pb.ErrorCode_ERROR_CODE_TOO_LARGE, Message: "frame larger than the server's limit (AuthOk.max_frame_bytes)"}
	}
	if err != nil {
		return fmt.Errorf("parley: encode: %w", err)
	}
	if wasEmpty {
		c.signal()
	}
	return nil
}

func (c *Client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// ctlWriter lets the WebSocket control handler queue pong and close replies
// behind the frames already queued. Each Write is one whole frame.
type ctlWriter struct{ c *Client }

func (w ctlWriter) Write(p []byte) (int, error) {
	w.c.wmu.Lock()
	w.c.wbuf = append(w.c.wbuf, p...)
	w.c.wmu.Unlock()
	w.c.signal()
	return len(p), nil
}

func (c *Client) writeLoop() {
	var spare []byte
	var hbC <-chan time.Time
	var hbTimer *time.Timer
	if c.hb > 0 {
		hbTimer = time.NewTimer(c.hb)
		defer hbTimer.Stop()
		hbC = hbTimer.C
	}
	for {
		final := false
		select {
		case <-c.wake:
		case <-c.closeReq:
			final = true
		case <-c.done:
			return
		case <-hbC:
			if !c.heartbeat(hbTimer) {
				return
			}
		}
		c.wmu.Lock()
		spare, c.wbuf = c.wbuf, spare[:0]
		if c.wflushed != nil {
			close(c.wflushed)
			c.wflushed = nil
		}
		c.wmu.Unlock()
		if final {
			spare = append(spare, c.tr.closeFrame()...)
		}
		if len(spare) > 0 {
			if _, err := c.conn.Write(spare); err != nil {
				c.fail(&closedError{cause: err})
				return
			}
			c.lastWrite.Store(time.Now().UnixNano())
		}
		if cap(spare) > 1<<20 {
			spare = nil // do not pin a buffer grown for one burst
		}
		if final {
			c.fail(ErrClosed)
			return
		}
	}
}

// heartbeat queues a Ping when nothing was sent (or received) for a
// heartbeat interval and re-arms the timer. A link silent for two intervals
// despite pings is dead; it returns false after failing it.
func (c *Client) heartbeat(t *time.Timer) bool {
	now := time.Now().UnixNano()
	writeIdle := time.Duration(now - c.lastWrite.Load())
	readIdle := time.Duration(now - c.lastRead.Load())
	if readIdle >= 2*c.hb {
		c.fail(&closedError{cause: errors.New("heartbeat timeout: nothing received")})
		return false
	}
	next := c.hb - writeIdle
	if next <= c.hb/20 || readIdle >= c.hb {
		// An id without a pending call: the Pong is dropped on arrival, its
		// only job is to be traffic.
		_ = c.enqueue(context.Background(), &pb.ClientFrame{
			Id: c.nextID.Add(1), Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}, true)
		next = c.hb
	}
	t.Reset(next)
	return true
}

func (c *Client) readLoop() {
	var err error
	for {
		if c.acks != nil && len(c.acks) > 0 && !c.tr.buffered() {
			c.flushAcks() // the burst is handled; the next read may block
		}
		p, codec, rerr := c.tr.readFrame()
		if rerr != nil {
			err = rerr
			break
		}
		c.lastRead.Store(time.Now().UnixNano())
		f := new(pb.ServerFrame)
		if derr := wire.DecodeServer(codec, p, f); derr != nil {
			err = derr
			break
		}
		c.dispatch(f)
	}
	if c.disc != nil {
		c.fail(c.disc)
	} else {
		c.fail(&closedError{cause: err})
	}
	if c.opts.OnClose != nil {
		c.opts.OnClose(c.err)
	}
}

func (c *Client) dispatch(f *pb.ServerFrame) {
	if f.Id != 0 {
		c.pmu.Lock()
		cl := c.pending[f.Id]
		delete(c.pending, f.Id)
		c.pmu.Unlock()
		if cl != nil {
			cl.f = f
			cl.ch <- struct{}{}
		}
		return
	}
	switch b := f.Body.(type) {
	case *pb.ServerFrame_Message:
		if c.opts.OnMessage != nil {
			c.opts.OnMessage(b.Message)
		}
		if c.acks != nil && b.Message.Seq > c.acks[b.Message.ConversationId] {
			c.acks[b.Message.ConversationId] = b.Message.Seq
		}
	case *pb.ServerFrame_Receipt:
		if c.opts.OnReceipt != nil {
			c.opts.OnReceipt(b.Receipt)
		}
	case *pb.ServerFrame_Disconnect:
		c.disc = disconnectErr(b.Disconnect)
	case *pb.ServerFrame_Typing:
		if c.opts.OnTyping != nil {
			c.opts.OnTyping(b.Typing)
		}
	case *pb.ServerFrame_PresenceEvent:
		if c.opts.OnPresence != nil {
			c.opts.OnPresence(b.PresenceEvent)
		}
	case *pb.ServerFrame_ContactEvent:
		if c.opts.OnContact != nil {
			c.opts.OnContact(b.ContactEvent)
		}
	case *pb.ServerFrame_Hidden:
		if c.opts.OnHidden != nil {
			c.opts.OnHidden(b.Hidden)
		}
	case *pb.ServerFrame_ConversationEvent:
		if c.opts.OnConversation != nil {
			c.opts.OnConversation(b.ConversationEvent)
		}
	case *pb.ServerFrame_Push:
		if c.opts.OnPush != nil {
			c.opts.OnPush(b.Push)
		}
	case *pb.ServerFrame_Reaction:
		if c.opts.OnReaction != nil {
			c.opts.OnReaction(b.Reaction)
		}
	case *pb.ServerFrame_StreamChunk:
		if c.opts.OnStreamChunk != nil {
			c.opts.OnStreamChunk(b.StreamChunk)
		}
	}
}

func (c *Client) flushAcks() {
	for conv, seq := range c.acks {
		_ = c.enqueue(context.Background(), &pb.ClientFrame{Body: &pb.ClientFrame_Delivered{
			Delivered: &pb.DeliveredAck{ConversationId: conv, Seq: seq}}}, true)
	}
	clear(c.acks)
}

// fail ends the connection once, with err as the reason, and fails every
// request in flight with it.
func (c *Client) fail(err error) {
	c.failOnce.Do(func() {
		c.pmu.Lock()
		c.err = err
		c.closed = true
		pending := c.pending
		c.pending = nil
		c.pmu.Unlock()
		close(c.done)
		c.conn.Close()
		for _, cl := range pending {
			cl.err = err
			cl.ch <- struct{}{}
		}
	})
}

// sleep waits d unless ctx ends or the connection closes.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.err
	}
}

// jitter returns a duration in [d/2, d) so that many clients spread out.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// msgIDs makes client message ids: a random prefix and a counter.
type msgIDs struct {
	prefix string
	n      atomic.Uint64
}

func (g *msgIDs) init() {
	var b [12]byte
	_, _ = cryptorand.Read(b[:]) // never fails (crypto/rand panics instead)
	g.prefix = base64.RawURLEncoding.EncodeToString(b[:]) + "-"
}

func (g *msgIDs) next() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 36)
}
