package client

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// SessionOptions configure a [Session].
type SessionOptions struct {
	// Options are used for every connection, with these differences:
	// Addr is used only when Addrs is empty; OnMessage and OnReceipt are
	// called from the session's goroutine, one at a time, and OnMessage in
	// seq order per conversation without duplicates; OnClose is not used
	// (see OnDisconnect); AutoDeliveredAck acknowledges what OnMessage was
	// given, once per conversation per batch; MaxSendAttempts is unlimited
	// (the caller's context bounds Send).
	Options
	// Addrs are tried in turn (each reconnect moves to the next one).
	Addrs []string
	// TokenFunc, when set, is asked for a token before every connection
	// (instead of Options.Token), so rejected or revoked tokens are renewed
	// rather than fatal.
	TokenFunc func(ctx context.Context) (string, error)
	// MinBackoff and MaxBackoff bound the wait between failed connection
	// attempts (defaults 100 ms and 10 s); the wait doubles per failure, with
	// jitter so that many clients do not reconnect in step.
	MinBackoff, MaxBackoff time.Duration
	// Cursors seeds the highest seq the app already has, per conversation.
	Cursors map[string]uint64
	// ReactionVersions seeds the reaction version the app holds, per
	// conversation (see ReactionVersions). After each connection the
	// session asks for the reaction changes past it (SyncReactions) and
	// hands them to OnReaction, from the session goroutine; live updates
	// reach OnReaction from the connection's reader as they come.
	ReactionVersions map[string]uint64
	// ResumeFromServer starts a conversation without a local cursor at the
	// server's delivered_seq (from the conversation list) instead of at 0,
	// so that a fresh install does not download whole histories.
	ResumeFromServer bool
	// SyncPageSize is the SyncMessages page size (default 200).
	SyncPageSize uint32
	// OnConnect is called (from the session goroutine) after each successful
	// authentication, before the catch-up sync.
	OnConnect func(*pb.AuthOk)
	// OnDisconnect is called (from the session goroutine) when a connection
	// ends, with the reason.
	OnDisconnect func(error)
}

// Session is a connection that survives network failures: it reconnects
// with backoff and jitter, resends unacknowledged sends under their original
// client_msg_id, catches up on every conversation after its cursor, and fills
// gaps in pushed messages before delivering them, so the app sees each
// conversation in seq order without duplicates or holes.
//
// Cursors (the highest seq delivered to the app per conversation) live in
// memory; seed them with SessionOptions.Cursors and read them with Cursors
// to persist them.
type Session struct {
	opts   SessionOptions
	addrs  []string
	ids    msgIDs
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	done   chan struct{}
	err    error // why the session ended; set before done is closed

	mu      sync.Mutex
	cl      *Client       // nil while disconnected
	ready   bool          // connected and caught up
	changed chan struct{} // closed (and replaced) when cl or ready change
	cursors map[string]uint64
	reacts  map[string]uint64 // reaction versions caught up to
	sending int

	imu    sync.Mutex
	inbox  []event
	spare  []event
	wakeIn chan struct{}

	acks map[string]uint64 // session goroutine only
}

type event struct {
	msg  *pb.Message
	rcpt *pb.Receipt
}

// NewSession starts a session; it connects in the background. Use
// WaitReady to wait for the first connection and catch-up.
func NewSession(opts SessionOptions) (*Session, error) {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(10*time.Second, opts.MinBackoff)
	}
	if opts.SyncPageSize == 0 {
		opts.SyncPageSize = 200
	}
	addrs := opts.Addrs
	if len(addrs) == 0 {
		if opts.Addr == "" {
			return nil, errors.New("parley: SessionOptions needs Addrs or Addr")
		}
		addrs = []string{opts.Addr}
	}
	s := &Session{
		opts:    opts,
		addrs:   append([]string(nil), addrs...),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		cursors: make(map[string]uint64, len(opts.Cursors)),
		wakeIn:  make(chan struct{}, 1),
	}
	for k, v := range opts.Cursors {
		s.cursors[k] = v
	}
	s.reacts = make(map[string]uint64, len(opts.ReactionVersions))
	for k, v := range opts.ReactionVersions {
		s.reacts[k] = v
	}
	if opts.AutoDeliveredAck {
		s.acks = make(map[string]uint64)
	}
	s.ids.init()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run()
	return s, nil
}

// WaitReady waits until the session is connected and has caught up.
func (s *Session) WaitReady(ctx context.Context) error {
	for {
		s.mu.Lock()
		ready, ch := s.ready, s.changed
		s.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return s.err
		}
	}
}

// Client returns the current connection, or nil while disconnected. It may
// close at any time; use it for requests that need no resend (History, ...).
func (s *Session) Client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cl
}

// Done is closed when the session has ended (Close, or a fatal error such
// as being kicked by another login); Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended, nil while it runs.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the session and its connection. Sends waiting for an ack fail
// with ErrClosed.
func (s *Session) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// Cursor returns the highest seq of a conversation delivered to the app.
func (s *Session) Cursor(conversationID string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursors[conversationID]
}

// ReactionVersions returns a copy of the reaction version caught up to per
// conversation (to persist with the cursors).
func (s *Session) ReactionVersions() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]uint64, len(s.reacts))
	for k, v := range s.reacts {
		m[k] = v
	}
	return m
}

// Cursors returns a copy of every conversation's cursor (to persist them).
func (s *Session) Cursors() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]uint64, len(s.cursors))
	for k, v := range s.cursors {
		m[k] = v
	}
	return m
}

// Pending is the number of sends waiting for their ack.
func (s *Session) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sending
}

// Send sends a message and waits for its ack across reconnects: while the
// session is disconnected the send waits, and after each reconnect it is
// resent with the same client_msg_id (filled in on m when empty), so it is
// stored exactly once. It returns when acked, when the server refuses it for
// good ([*Error]), when ctx ends or when the session ends.
func (s *Session) Send(ctx context.Context, m *pb.Send) (*pb.SendAck, error) {
	if m.ClientMsgId == "" {
		m.ClientMsgId = s.ids.next()
	}
	s.mu.Lock()
	s.sending++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.sending--
		s.mu.Unlock()
	}()
	for {
		c, err := s.waitClient(ctx)
		if err != nil {
			return nil, err
		}
		ack, err := c.Send(ctx, m)
		switch {
		case err == nil:
			s.ownSeq(ack)
			return ack, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrClosed):
			// Resend on the next connection.
		case errors.Is(err, ErrTimeout), IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE):
			// Client.Send gave up after its attempts; keep trying.
		default:
			return nil, err
		}
	}
}

// ownSeq moves the cursor past a message this session sent when it directly
// follows what the app has, so the app is not handed its own message back by
// the next gap fill. (After a gap it stays: the sync delivers it in order.)
func (s *Session) ownSeq(ack *pb.SendAck) {
	s.mu.Lock()
	if s.cursors[ack.ConversationId]+1 == ack.Seq {
		s.cursors[ack.ConversationId] = ack.Seq
	}
	s.mu.Unlock()
}

// SendText sends a 1:1 text message (content type "text") to a user.
func (s *Session) SendText(ctx context.Context, to, text string) (*pb.SendAck, error) {
	return s.Send(ctx, &pb.Send{To: to, ContentType: "text", Payload: []byte(text)})
}

// MarkRead moves the read cursor of a conversation, waiting for a
// connection if needed.
func (s *Session) MarkRead(ctx context.Context, conversationID string, seq uint64) error {
	for {
		c, err := s.waitClient(ctx)
		if err != nil {
			return err
		}
		err = c.MarkRead(ctx, conversationID, seq)
		if err == nil || !errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return err
		}
	}
}

// waitClient returns a live connection, waiting for one if needed.
func (s *Session) waitClient(ctx context.Context) (*Client, error) {
	for {
		s.mu.Lock()
		c, ch := s.cl, s.changed
		s.mu.Unlock()
		if c != nil && c.Err() == nil {
			return c, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			return nil, s.err
		}
	}
}

// setState publishes the current connection; callers hold no locks.
func (s *Session) setState(c *Client, ready bool) {
	s.mu.Lock()
	s.cl, s.ready = c, ready
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Session) push(ev event) {
	s.imu.Lock()
	s.inbox = append(s.inbox, ev)
	s.imu.Unlock()
	select {
	case s.wakeIn <- struct{}{}:
	default:
	}
}

// run is the session goroutine: it connects, catches up, and delivers.
func (s *Session) run() {
	var fatal error
	defer func() {
		if fatal == nil {
			fatal = ErrClosed
		}
		s.err = fatal
		s.setState(nil, false)
		close(s.done)
	}()
	failures, next := 0, 0
	backoff := func() time.Duration {
		failures++
		return jitter(min(s.opts.MinBackoff<<min(failures-1, 20), s.opts.MaxBackoff))
	}
	for {
		addr := s.addrs[next%len(s.addrs)]
		next++
		c, err := s.dial(addr)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if s.permanent(err) {
				fatal = err
				return
			}
			if !s.wait(backoff()) {
				return
			}
			continue
		}
		s.setState(c, false)
		if s.opts.OnConnect != nil {
			s.opts.OnConnect(c.AuthOk())
		}
		caughtUp := false
		err = s.catchUp(c)
		if err == nil {
			caughtUp = true
			failures = 0 // only a link that got through catch-up counts as healthy
			s.setState(c, true)
			err = s.serve(c)
		}
		c.Close()
		s.setState(nil, false)
		if s.ctx.Err() != nil {
			return
		}
		if cerr := c.Err(); cerr != nil && cerr != ErrClosed {
			err = cerr // the connection's own reason beats "closed by us"
		}
		if s.opts.OnDisconnect != nil {
			s.opts.OnDisconnect(err)
		}
		var de *DisconnectError
		if errors.As(err, &de) && s.permanent(de) {
			fatal = err
			return
		}
		// Reconnect soon after a healthy link drops; back off when links
		// keep failing before they are useful (or the server asks to wait).
		wait := jitter(s.opts.MinBackoff)
		if !caughtUp {
			wait = backoff()
		}
		if de != nil && de.ReconnectAfter > 0 {
			wait = max(wait, de.ReconnectAfter+jitter(de.ReconnectAfter/2))
		}
		if !s.wait(wait) {
			return
		}
	}
}

func (s *Session) dial(addr string) (*Client, error) {
	o := s.opts.Options
	o.Addr = addr
	o.OnMessage = func(m *pb.Message) { s.push(event{msg: m}) }
	o.OnReceipt = func(r *pb.Receipt) { s.push(event{rcpt: r}) }
	o.OnClose = nil            // serve watches Client.Done
	o.AutoDeliveredAck = false // the session acks what it delivered
	o.MaxSendAttempts = math.MaxInt
	if s.opts.TokenFunc != nil {
		t, err := s.opts.TokenFunc(s.ctx)
		if err != nil {
			return nil, &tokenError{err}
		}
		o.Token = t
	}
	return Dial(s.ctx, o)
}

// tokenError marks a TokenFunc failure, which ends the session.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return "parley: token: " + e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// permanent reports errors that reconnecting cannot fix: another login took
// this device's place, or the credentials are refused (unless TokenFunc can
// renew them).
func (s *Session) permanent(err error) bool {
	var te *tokenError
	if errors.As(err, &te) {
		return true
	}
	renew := s.opts.TokenFunc != nil
	var de *DisconnectError
	if errors.As(err, &de) {
		switch de.Code {
		case pb.DisconnectCode_DISCONNECT_CODE_KICKED:
			return true
		case pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED:
			return !renew
		}
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED:
			return !renew
		case pb.ErrorCode_ERROR_CODE_BAD_REQUEST, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED:
			return true
		}
	}
	return false
}

// wait sleeps d; false when the session is closing.
func (s *Session) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// catchUp syncs every conversation after its cursor, then delivers the
// pushes that arrived meanwhile (duplicates of synced ones are dropped).
func (s *Session) catchUp(c *Client) error {
	convs, err := c.AllConversations(s.ctx)
	if err != nil {
		return err
	}
	for _, conv := range convs {
		id := conv.ConversationId
		s.mu.Lock()
		cur, known := s.cursors[id]
		if !known && s.opts.ResumeFromServer {
			cur = conv.DeliveredSeq
			s.cursors[id] = cur
		}
		s.mu.Unlock()
		if conv.LastSeq > cur {
			if err := s.syncConv(c, id, 0); err != nil {
				return err
			}
		}
		if err := s.syncReactions(c, conv); err != nil {
			return err
		}
	}
	s.flushAcks(c)
	return s.drain(c)
}

// syncReactions hands OnReaction the reaction changes of conv past the
// version caught up to. A conversation new to the session starts at the
// server's version under ResumeFromServer (its pages carry the counts),
// else at 0.
func (s *Session) syncReactions(c *Client, conv *pb.Conversation) error {
	id := conv.ConversationId
	s.mu.Lock()
	held, known := s.reacts[id]
	if !known && s.opts.ResumeFromServer {
		held = conv.ReactionVersion
		s.reacts[id] = held
	}
	s.mu.Unlock()
	if s.opts.OnReaction == nil || conv.ReactionVersion <= held {
		return nil
	}
	for {
		p, err := c.SyncReactions(s.ctx, id, held, 0)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil // refused (left the group, ...): nothing to catch up
			}
			return err
		}
		for _, u := range p.Updates {
			s.opts.OnReaction(u)
			held = max(held, u.Version)
		}
		if !p.HasMore || len(p.Updates) == 0 {
			held = max(held, p.Version)
			s.mu.Lock()
			s.reacts[id] = held
			s.mu.Unlock()
			return nil
		}
	}
}

// serve delivers pushes until the connection ends or the session closes.
func (s *Session) serve(c *Client) error {
	for {
		select {
		case <-s.wakeIn:
			if err := s.drain(c); err != nil {
				return err
			}
		case <-c.Done():
			// Deliver what arrived before the end; a gap waits for the
			// next connection's catch-up.
			_ = s.drain(c)
			return c.Err()
		case <-s.ctx.Done():
			return ErrClosed
		}
	}
}

// drain delivers the queued pushes. On a connection error the undelivered
// rest stays queued for the next connection.
func (s *Session) drain(c *Client) error {
	s.imu.Lock()
	evs := s.inbox
	s.inbox = s.spare[:0]
	s.imu.Unlock()
	var err error
	i := 0
	for ; i < len(evs) && err == nil; i++ {
		switch ev := evs[i]; {
		case ev.msg != nil:
			err = s.deliverPushed(c, ev.msg)
		case ev.rcpt != nil && s.opts.OnReceipt != nil:
			s.opts.OnReceipt(ev.rcpt)
		}
	}
	if err != nil {
		s.imu.Lock()
		s.inbox = append(evs[i-1:len(evs):len(evs)], s.inbox...)
		s.imu.Unlock()
		s.spare = nil
	} else {
		clear(evs)
		s.spare = evs[:0]
	}
	s.flushAcks(c)
	return err
}

func (s *Session) deliverPushed(c *Client, m *pb.Message) error {
	cur := s.Cursor(m.ConversationId)
	if m.Seq <= cur {
		return nil // already delivered (by a sync or an earlier push)
	}
	if m.Seq > cur+1 {
		// A gap: fetch what is missing first, so the app sees seq order.
		if err := s.syncConv(c, m.ConversationId, m.Seq-1); err != nil {
			return err
		}
	}
	if m.Seq > s.Cursor(m.ConversationId) {
		s.deliver(m)
	}
	return nil
}

// syncConv delivers a conversation's messages after its cursor, page by
// page, until upTo (0: to the end). Pages are bounded by bytes on the
// server, so a page may hold fewer messages than asked: only has_more says
// whether more follow. A temporary refusal (the server busy) is retried
// after a pause; a conversation the server refuses to sync otherwise is
// skipped rather than retried forever.
func (s *Session) syncConv(c *Client, conv string, upTo uint64) error {
	backoff := s.opts.MinBackoff
	for {
		cur := s.Cursor(conv)
		if upTo != 0 && cur >= upTo {
			return nil
		}
		p, err := c.SyncMessages(s.ctx, conv, cur, s.opts.SyncPageSize)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				if !e.Temporary() {
					return nil
				}
				if !s.wait(jitter(backoff)) {
					return ErrClosed
				}
				backoff = min(2*backoff, s.opts.MaxBackoff)
				continue
			}
			return err
		}
		backoff = s.opts.MinBackoff
		for _, m := range p.Messages {
			if m.Seq > s.Cursor(conv) {
				s.deliver(m)
			}
		}
		if !p.HasMore || len(p.Messages) == 0 {
			return nil
		}
	}
}

func (s *Session) deliver(m *pb.Message) {
	if s.opts.OnMessage != nil {
		s.opts.OnMessage(m)
	}
	s.mu.Lock()
	s.cursors[m.ConversationId] = max(s.cursors[m.ConversationId], m.Seq)
	s.mu.Unlock()
	if s.acks != nil {
		s.acks[m.ConversationId] = m.Seq
	}
}

func (s *Session) flushAcks(c *Client) {
	for conv, seq := range s.acks {
		_ = c.Notify(&pb.ClientFrame{Body: &pb.ClientFrame_Delivered{
			Delivered: &pb.DeliveredAck{ConversationId: conv, Seq: seq}}})
	}
	clear(s.acks)
}
