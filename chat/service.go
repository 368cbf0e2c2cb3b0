// Package chat is Parley's messaging logic: it authenticates sessions, carries
// sends through de-dup, sequencing and durable storage (group commit) before
// ACKing them, delivers stored messages through the Router, keeps cursors and
// receipts, and answers sync and history queries. It implements
// gateway.Handler.
package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/auth"
	"github.com/parleyim/parley/gateway"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/route"
	"github.com/parleyim/parley/session"
	"github.com/parleyim/parley/store"
)

// Config tunes the messaging service. Zero values take the stated defaults.
type Config struct {
	// NodeID distinguishes message ids made by different nodes (0-1023). Default 0.
	NodeID uint16
	// HeartbeatSeconds is told to clients in AuthOk. Default 30.
	HeartbeatSeconds uint32
	// MaxFrameBytes is told to clients in AuthOk. Default 64 KiB.
	MaxFrameBytes uint32
	// MaxBatch is the most sends committed to storage in one batch. Default 1024.
	MaxBatch int
	// QueueDepth is how many sends may wait for the committer before senders
	// are held back. Default 16384.
	QueueDepth int
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.HeartbeatSeconds == 0 {
		c.HeartbeatSeconds = 30
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = 64 << 10
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1024
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 16384
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Limits on client-supplied fields.
const (
	maxClientMsgID   = 64
	maxContentType   = 64
	defaultPageLimit = 100
	maxPageLimit     = 1000
)

// Stats are running totals since start.
type Stats struct {
	SendsAccepted   uint64 // messages newly stored
	SendsDuplicate  uint64 // retries answered from de-dup
	SendsFailed     uint64 // sends answered UNAVAILABLE
	Deliveries      uint64 // frames queued on receiving sessions (this node)
	CommitBatches   uint64
	AuthFailures    uint64
	SessionsKicked  uint64
	CommitLatencyNs uint64 // sum over batches, for an average
}

// Service is the messaging service. Create with New, then Start.
type Service struct {
	cfg      Config
	store    store.Store
	router   route.Router
	sessions *session.Registry
	tokens   *auth.Tokens
	log      *slog.Logger

	sends       chan *pendingSend   // to the committer
	committed   chan committedBatch // committer to deliverer
	spare       chan []*pendingSend // batch slices back for reuse
	delivered   chan struct{}       // closed when deliverLoop has finished
	cursorsDone chan struct{}       // closed when cursorLoop has finished
	cursors     chan store.Cursor   // to the cursor writer
	stop        chan struct{}
	wg          sync.WaitGroup
	stopped     sync.Once

	nextSession atomic.Uint64
	ids         idGen // used by the committer goroutine only

	stats struct {
		accepted, duplicate, failed, deliveries, batches, authFail, kicked, commitNs atomic.Uint64
	}
}

// connState is the per-connection state kept in gateway.Conn.Value.
type connState struct {
	sess *session.Session
}

type pendingSend struct {
	conn   *gateway.Conn
	sessID string
	reqID  uint64
	msg    *pb.Message
}

// New builds the service; it does nothing until Start.
func New(cfg Config, st store.Store, rt route.Router, reg *session.Registry, tokens *auth.Tokens) *Service {
	cfg.setDefaults()
	s := &Service{
		cfg: cfg, store: st, router: rt, sessions: reg, tokens: tokens, log: cfg.Logger,
		sends:       make(chan *pendingSend, cfg.QueueDepth),
		committed:   make(chan committedBatch, 2),
		spare:       make(chan []*pendingSend, 4),
		delivered:   make(chan struct{}),
		cursorsDone: make(chan struct{}),
		cursors:     make(chan store.Cursor, 4096),
		stop:        make(chan struct{}),
	}
	s.ids.node = uint64(cfg.NodeID & 1023)
	return s
}

// Start runs the committer and the cursor writer.
func (s *Service) Start() {
	s.wg.Add(3)
	go s.commitLoop()
	go s.deliverLoop()
	go s.cursorLoop()
}

// Stop commits what is queued and stops the background loops. Call it after
// the gateway stopped taking frames.
func (s *Service) Stop(ctx context.Context) error {
	s.stopped.Do(func() { close(s.stop) })
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns running totals.
func (s *Service) Stats() Stats {
	return Stats{
		SendsAccepted: s.stats.accepted.Load(), SendsDuplicate: s.stats.duplicate.Load(),
		SendsFailed: s.stats.failed.Load(), Deliveries: s.stats.deliveries.Load(),
		CommitBatches: s.stats.batches.Load(), AuthFailures: s.stats.authFail.Load(),
		SessionsKicked: s.stats.kicked.Load(), CommitLatencyNs: s.stats.commitNs.Load(),
	}
}

// Sessions returns the session registry (for the API's session listing).
func (s *Service) Sessions() *session.Registry { return s.sessions }

// HandleFrame implements gateway.Handler.
func (s *Service) HandleFrame(c *gateway.Conn, f *pb.ClientFrame) {
	st, _ := c.Value().(*connState)
	if st == nil || st.sess == nil {
		s.handleUnauthenticated(c, f)
		return
	}
	var err error
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Ping:
		c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: time.Now().UnixMilli()}}})
	case *pb.ClientFrame_Send:
		err = s.handleSend(c, st.sess, f.Id, b.Send)
	case *pb.ClientFrame_Delivered:
		if err = s.handleCursor(st.sess, b.Delivered.ConversationId, b.Delivered.Seq, false); err == nil {
			s.replyOK(c, f.Id)
		}
	case *pb.ClientFrame_Read:
		if err = s.handleCursor(st.sess, b.Read.ConversationId, b.Read.Seq, true); err == nil {
			s.replyOK(c, f.Id)
		}
	case *pb.ClientFrame_SyncConversations:
		var list *pb.ConversationList
		list, err = s.ConversationList(context.Background(), st.sess.UserID, b.SyncConversations.Limit, b.SyncConversations.PageToken)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Conversations{Conversations: list}})
		}
	case *pb.ClientFrame_SyncMessages:
		q := b.SyncMessages
		var page *pb.MessagePage
		page, err = s.SyncMessages(context.Background(), st.sess.UserID, q.ConversationId, q.AfterSeq, q.Limit)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Messages{Messages: page}})
		}
	case *pb.ClientFrame_History:
		q := b.History
		var page *pb.MessagePage
		page, err = s.History(context.Background(), st.sess.UserID, q.ConversationId, q.BeforeSeq, q.Limit)
		if err == nil {
			c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Messages{Messages: page}})
		}
	case *pb.ClientFrame_Auth:
		err = errBadRequest // already authenticated
	default:
		c.SendFrame(errorFrame(f.Id, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME))
		c.Close(pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR, "unknown frame")
		return
	}
	if err != nil {
		s.replyErr(c, f.Id, err)
	}
}

// replyOK answers a request that wants a reply (id != 0) with Ok.
func (s *Service) replyOK(c *gateway.Conn, id uint64) {
	if id != 0 {
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Ok{Ok: &pb.Ok{}}})
	}
}

func (s *Service) replyErr(c *gateway.Conn, id uint64, err error) {
	var ce *Error
	if !errors.As(err, &ce) {
		s.log.Error("request failed", "err", err)
		ce = errInternal
	}
	c.SendFrame(errorFrame(id, ce.Code))
}

func (s *Service) handleUnauthenticated(c *gateway.Conn, f *pb.ClientFrame) {
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Ping:
		c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: time.Now().UnixMilli()}}})
	case *pb.ClientFrame_Auth:
		s.handleAuth(c, f.Id, b.Auth)
	default:
		s.stats.authFail.Add(1)
		c.SendFrame(errorFrame(f.Id, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED))
		c.Close(pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED, "authenticate first")
	}
}

func (s *Service) handleAuth(c *gateway.Conn, id uint64, a *pb.Auth) {
	fail := func(code pb.ErrorCode) {
		s.stats.authFail.Add(1)
		c.SendFrame(errorFrame(id, code))
		c.Close(pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED, "authentication failed")
	}
	if !auth.ValidDeviceField(a.DeviceId) || !auth.ValidDeviceField(a.DeviceType) {
		fail(pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
		return
	}
	claims, err := s.Authenticate(context.Background(), a.Token)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			fail(ce.Code)
		} else {
			fail(pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED)
		}
		return
	}
	sess := &session.Session{
		ID:           fmt.Sprintf("%d-%d", s.cfg.NodeID, s.nextSession.Add(1)),
		UserID:       claims.UserID,
		DeviceID:     a.DeviceId,
		DeviceType:   a.DeviceType,
		TokenID:      claims.TokenID,
		TokenExpires: claims.ExpiresAt,
		Conn:         c,
		Started:      time.Now(),
	}
	c.SetValue(&connState{sess: sess})
	c.SetAuthenticated()
	// AuthOk goes out before the registry can route messages to this session,
	// so it is always the first frame the client reads after its Auth.
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_AuthOk{AuthOk: &pb.AuthOk{
		UserId: sess.UserID, SessionId: sess.ID, ServerTime: time.Now().UnixMilli(),
		HeartbeatSeconds: s.cfg.HeartbeatSeconds, MaxFrameBytes: s.cfg.MaxFrameBytes,
	}}})
	for _, old := range s.sessions.Add(sess) {
		s.stats.kicked.Add(1)
		old.Conn.Close(pb.DisconnectCode_DISCONNECT_CODE_KICKED, "signed in on another device of the same type")
	}
}

// Authenticate verifies a token and checks it has not been revoked, that the
// user is not disabled, and that the token is not older than the user's token epoch.
func (s *Service) Authenticate(ctx context.Context, token string) (auth.Claims, error) {
	claims, err := s.tokens.Verify(token)
	if err != nil || !auth.ValidUserID(claims.UserID) {
		return auth.Claims{}, errUnauth
	}
	if claims.TokenID != "" {
		revoked, err := s.store.TokenRevoked(ctx, claims.TokenID)
		if err != nil {
			return auth.Claims{}, errUnavail
		}
		if revoked {
			return auth.Claims{}, errUnauth
		}
	}
	u, err := s.store.GetUser(ctx, claims.UserID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Users of an app that mints its own tokens need no record here.
	case err != nil:
		return auth.Claims{}, errUnavail
	case u.Disabled || claims.Epoch < u.TokenEpoch:
		return auth.Claims{}, errUnauth
	}
	return claims, nil
}

// HandleClose implements gateway.Handler.
func (s *Service) HandleClose(c *gateway.Conn, _ pb.DisconnectCode) {
	if st, _ := c.Value().(*connState); st != nil && st.sess != nil {
		s.sessions.Remove(st.sess)
	}
}

func (s *Service) handleSend(c *gateway.Conn, sess *session.Session, reqID uint64, m *pb.Send) error {
	msg, err := s.buildMessage(sess.UserID, m)
	if err != nil {
		return err
	}
	p := &pendingSend{conn: c, sessID: sess.ID, reqID: reqID, msg: msg}
	select {
	case s.sends <- p:
		return nil
	case <-s.stop:
		return errUnavail
	}
}

// buildMessage validates a Send from uid and turns it into the message to store.
func (s *Service) buildMessage(uid string, m *pb.Send) (*pb.Message, error) {
	if len(m.ClientMsgId) == 0 || len(m.ClientMsgId) > maxClientMsgID {
		return nil, errBadRequest
	}
	if len(m.ContentType) > maxContentType {
		return nil, errTooLarge
	}
	if len(m.Payload) > int(s.cfg.MaxFrameBytes) {
		return nil, errTooLarge
	}
	to := m.To
	switch {
	case to != "" && m.ConversationId != "":
		return nil, errBadRequest
	case to != "":
		if !auth.ValidUserID(to) {
			return nil, errBadRequest
		}
	case m.ConversationId != "":
		peer, ok := directPeer(m.ConversationId, uid)
		if !ok {
			return nil, errDenied
		}
		to = peer
	default:
		return nil, errBadRequest
	}
	return &pb.Message{
		ConversationId: DirectID(uid, to),
		From:           uid,
		To:             to,
		ClientMsgId:    m.ClientMsgId,
		ContentType:    m.ContentType,
		Payload:        m.Payload,
		Kind:           pb.MessageKind_MESSAGE_KIND_NORMAL,
	}, nil
}

// commitLoop is the single committer: it takes every send waiting, stores the
// batch durably in one Append, and hands the results to deliverLoop, which
// ACKs and delivers them while the next batch is being stored. One committer
// and one deliverer per node, each working in batch order, keep
// per-conversation delivery order equal to seq order.
func (s *Service) commitLoop() {
	defer s.wg.Done()
	defer close(s.committed)
	for {
		var first *pendingSend
		select {
		case first = <-s.sends:
		case <-s.stop:
			// Commit what is still queued, then leave.
			select {
			case first = <-s.sends:
			default:
				return
			}
		}
		batch := append(s.takeBatch(), first)
	drain:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case p := <-s.sends:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		s.committed <- s.commit(batch)
	}
}

// committedBatch is a stored (or failed) batch on its way to deliverLoop.
type committedBatch struct {
	sends []*pendingSend
	res   []store.AppendResult
	err   error
}

// takeBatch returns an empty batch slice, reusing one deliverLoop is done with.
func (s *Service) takeBatch() []*pendingSend {
	select {
	case b := <-s.spare:
		return b[:0]
	default:
		return make([]*pendingSend, 0, s.cfg.MaxBatch)
	}
}

func (s *Service) commit(batch []*pendingSend) committedBatch {
	now := time.Now()
	ms := now.UnixMilli()
	msgs := make([]*pb.Message, len(batch))
	for i, p := range batch {
		p.msg.ServerTime = ms
		p.msg.MessageId = s.ids.next(ms)
		msgs[i] = p.msg
	}
	res, err := s.store.Append(context.Background(), msgs)
	s.stats.batches.Add(1)
	s.stats.commitNs.Add(uint64(time.Since(now)))
	return committedBatch{sends: batch, res: res, err: err}
}

// deliverLoop ACKs each stored message to its sender and delivers it, in batch order.
func (s *Service) deliverLoop() {
	defer s.wg.Done()
	defer close(s.delivered)
	ctx := context.Background()
	for cb := range s.committed {
		if cb.err != nil {
			s.log.Warn("append failed; sends answered UNAVAILABLE", "batch", len(cb.sends), "err", cb.err)
			s.stats.failed.Add(uint64(len(cb.sends)))
			for _, p := range cb.sends {
				p.conn.SendFrame(errorFrame(p.reqID, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
			}
		}
		for i, r := range cb.res {
			p := cb.sends[i]
			m := r.Msg
			p.conn.SendFrame(&pb.ServerFrame{Id: p.reqID, Body: &pb.ServerFrame_SendAck{SendAck: &pb.SendAck{
				ClientMsgId: m.ClientMsgId, ConversationId: m.ConversationId, Seq: m.Seq,
				MessageId: m.MessageId, ServerTime: m.ServerTime, Duplicate: r.Duplicate,
			}}})
			if r.Duplicate {
				s.stats.duplicate.Add(1)
				continue
			}
			s.stats.accepted.Add(1)
			if err := s.router.DeliverToUsers(ctx, []string{m.To, m.From}, newMessageOutbound(m), p.sessID); err != nil {
				// Stored and ACKed: receivers get it by sync; delivery is best effort.
				s.log.Warn("deliver failed", "err", err)
			}
			// Sending implies having read everything before it.
			s.queueCursor(store.Cursor{ConversationID: m.ConversationId, UserID: m.From, Delivered: m.Seq, Read: m.Seq})
		}
		clear(cb.sends)
		select {
		case s.spare <- cb.sends:
		default:
		}
	}
}

// handleCursor moves the user's delivered (and, for read, read) cursor and
// sends a receipt to the conversation's members.
func (s *Service) handleCursor(sess *session.Session, conv string, seq uint64, read bool) error {
	peer, ok := directPeer(conv, sess.UserID)
	if !ok {
		return errDenied
	}
	if seq == 0 {
		return errBadRequest
	}
	c := store.Cursor{ConversationID: conv, UserID: sess.UserID, Delivered: seq}
	rc := &pb.Receipt{ConversationId: conv, UserId: sess.UserID, DeliveredSeq: seq}
	if read {
		c.Read = seq
		rc.ReadSeq = seq
	}
	s.queueCursor(c)
	out := newReceiptOutbound(rc)
	return s.router.DeliverToUsers(context.Background(), []string{peer, sess.UserID}, out, sess.ID)
}

func (s *Service) queueCursor(c store.Cursor) {
	select {
	case s.cursors <- c:
	case <-s.cursorsDone: // stopped: nothing writes cursors any more
	}
}

// cursorLoop coalesces cursor moves and writes them every few milliseconds, so
// a client ACKing every message costs one write per batch, not per ACK.
//
// It runs until deliverLoop has finished, so cursors moved by the last
// deliveries are written too.
func (s *Service) cursorLoop() {
	defer s.wg.Done()
	defer close(s.cursorsDone)
	pending := make(map[[2]string]store.Cursor)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	flush := func() {
		if len(pending) == 0 {
			return
		}
		list := make([]store.Cursor, 0, len(pending))
		for _, c := range pending {
			list = append(list, c)
		}
		clear(pending)
		if err := s.store.SetCursors(context.Background(), list); err != nil {
			s.log.Warn("cursor write failed", "n", len(list), "err", err)
		}
	}
	add := func(c store.Cursor) {
		k := [2]string{c.ConversationID, c.UserID}
		old := pending[k]
		c.Delivered = max(c.Delivered, old.Delivered)
		c.Read = max(c.Read, old.Read)
		pending[k] = c
		if len(pending) >= 4096 {
			flush()
		}
	}
	for {
		select {
		case c := <-s.cursors:
			add(c)
		case <-tick.C:
			flush()
		case <-s.delivered:
			for {
				select {
				case c := <-s.cursors:
					add(c)
				default:
					flush()
					return
				}
			}
		}
	}
}
