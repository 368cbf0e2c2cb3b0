package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/gateway"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Floor is a relay that does only the socket work of the bench's message
// scenarios (user, group, fanout, login, conns, send-rate, mixed, soak): it
// serves connections through Parley's own gateway (the same epoll loop,
// per-connection queues and coalesced writes as `parley serve`) and answers
// with frames built and encoded by the same wire package, but behind the
// gateway there is nothing but maps in memory: no storage, no fsync, no
// de-dup, no rate limits, no cursors, no group events, no signed tokens.
// Seqs are still assigned per conversation and messages still fanned out
// to every online session but the sending one, in seq order, so the load
// generator's checks (none lost, duplicated or out of order) hold against
// it as they do against the server. What the server does more than this is
// what a run against the floor leaves out of its figure.
type Floor struct {
	apiKey  string
	gw      *gateway.Gateway
	http    *http.Server
	httpLn  net.Listener
	tcpLn   net.Listener
	serving sync.WaitGroup

	mu    sync.RWMutex
	users map[string][]*floorSess // online sessions by user id; guarded by mu
	convs map[string]*floorConv   // by conversation id; guarded by mu

	sessNext  atomic.Uint64
	groupNext atomic.Uint64
	msgNext   atomic.Uint64
}

// floorSess is one authenticated connection.
type floorSess struct {
	id   string
	user string
	c    *gateway.Conn
	// hold defers the deliveries' flushes of one handled frame, as the
	// server holds a committed batch's; only the connection's handler
	// goroutine (never concurrent for one connection) uses it.
	hold wire.Hold
}

// floorConv is a conversation: its last seq and, for a group, its members.
// mu is held from assigning a seq until the message is queued to every
// receiver, so each receiver's queue holds the conversation in seq order.
type floorConv struct {
	mu      sync.Mutex
	seq     uint64
	group   bool
	members []string            // groups: in order of addition
	isMem   map[string]struct{} // groups: the same, for the send check
}

// floorTokenPrefix starts the floor's tokens: the user id follows. A token
// proves nothing; the floor checks only that it is one of its own.
const floorTokenPrefix = "floor1."

// floorMaxMembers bounds a group (the server's default group limit).
const floorMaxMembers = 100000

// StartFloor listens on httpAddr (token minting and WebSocket at /ws) and
// tcpAddr (raw TCP frames) and serves until Close. apiKey is what token
// minting asks for (empty: a random one, see APIKey).
func StartFloor(httpAddr, tcpAddr, apiKey string) (*Floor, error) {
	if apiKey == "" {
		var b [16]byte
		rand.Read(b[:])
		apiKey = hex.EncodeToString(b[:])
	}
	f := &Floor{apiKey: apiKey, users: map[string][]*floorSess{}, convs: map[string]*floorConv{}}
	// The server's defaults for what the gateway enforces per connection
	// (server/config.go), so the floor's connections cost what the server's do.
	gw, err := gateway.New(gateway.Config{
		MaxFrameBytes: 64 << 10, SendQueueFrames: 1024, SendQueueBytes: 4 << 20,
		WriteTimeout: 10 * time.Second, AuthTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second,
		MaxUnauthPerIP: 1024,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, f)
	if err != nil {
		return nil, err
	}
	f.gw = gw
	if f.httpLn, err = net.Listen("tcp", httpAddr); err != nil {
		gw.Shutdown(context.Background())
		return nil, err
	}
	if f.tcpLn, err = net.Listen("tcp", tcpAddr); err != nil {
		f.httpLn.Close()
		gw.Shutdown(context.Background())
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/admin/tokens", f.mintToken)
	mux.Handle("GET /ws", gw)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	f.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	f.serving.Add(2)
	go func() { defer f.serving.Done(); f.http.Serve(f.httpLn) }()
	go func() { defer f.serving.Done(); gw.ServeTCP(f.tcpLn) }()
	return f, nil
}

// APIKey is the key token minting asks for (X-Api-Key).
func (f *Floor) APIKey() string { return f.apiKey }

// HTTPAddr and TCPAddr are where the floor listens.
func (f *Floor) HTTPAddr() string { return f.httpLn.Addr().String() }

// TCPAddr is where the floor accepts raw TCP connections.
func (f *Floor) TCPAddr() string { return f.tcpLn.Addr().String() }

// Apply points cfg at the floor.
func (f *Floor) Apply(cfg *Config) {
	cfg.HTTPBase = "http://" + f.HTTPAddr()
	cfg.WSAddr = "ws://" + f.HTTPAddr() + "/ws"
	cfg.TCPAddr = "tcp://" + f.TCPAddr()
	cfg.APIKey = f.apiKey
}

// Close stops listening and closes every connection.
func (f *Floor) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := f.http.Shutdown(ctx)
	f.httpLn.Close()
	if gerr := f.gw.Shutdown(ctx); err == nil {
		err = gerr
	}
	f.serving.Wait()
	return err
}

// mintToken is POST /v1/admin/tokens, as the server answers it.
func (f *Floor) mintToken(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Api-Key") != f.apiKey {
		floorHTTPError(w, http.StatusUnauthorized, "invalid_api_key")
		return
	}
	var in struct {
		UserID     string `json:"user_id"`
		TTLSeconds int64  `json:"ttl_seconds"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&in); err != nil || !auth.ValidUserID(in.UserID) {
		floorHTTPError(w, http.StatusBadRequest, "bad_request")
		return
	}
	ttl := time.Duration(in.TTLSeconds) * time.Second
	if ttl <= 0 {
		ttl = time.Hour
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"user_id": in.UserID, "token": floorTokenPrefix + in.UserID, "expires_at": time.Now().Add(ttl).UTC(),
	})
}

func floorHTTPError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "message": code})
}

// HandleFrame answers one client frame (gateway.Handler).
func (f *Floor) HandleFrame(c *gateway.Conn, fr *pb.ClientFrame) {
	s, _ := c.Value().(*floorSess)
	if s == nil {
		f.auth(c, fr)
		return
	}
	id := fr.Id
	switch b := fr.Body.(type) {
	case *pb.ClientFrame_Ping:
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: time.Now().UnixMilli()}}})
	case *pb.ClientFrame_Send:
		f.send(s, id, b.Send)
	case *pb.ClientFrame_Delivered, *pb.ClientFrame_Read:
		// No cursors kept: answered as the server answers them.
		floorOK(c, id)
	case *pb.ClientFrame_CreateGroup:
		f.createGroup(s, id, b.CreateGroup)
	case *pb.ClientFrame_AddMembers:
		f.addMembers(s, id, b.AddMembers)
	case *pb.ClientFrame_Auth:
		c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_BAD_REQUEST))
	default:
		c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME))
	}
}

func floorOK(c *gateway.Conn, id uint64) {
	if id != 0 {
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Ok{Ok: &pb.Ok{}}})
	}
}

// auth takes the connection's first frame: an Auth with one of the floor's
// tokens. As the server does, AuthOk is queued before the session is
// registered and flushed after, so it is the first frame the client reads.
func (f *Floor) auth(c *gateway.Conn, fr *pb.ClientFrame) {
	a := fr.GetAuth()
	user, ok := strings.CutPrefix(a.GetToken(), floorTokenPrefix)
	if a == nil || !ok || !auth.ValidUserID(user) {
		c.SendFrame(errcode.Frame(fr.Id, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED))
		c.Close(pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED, "not a floor token")
		return
	}
	s := &floorSess{id: "f" + strconv.FormatUint(f.sessNext.Add(1), 10), user: user, c: c}
	c.SetValue(s)
	c.SetAuthenticated()
	c.SendHeld(wire.NewOutbound(&pb.ServerFrame{Id: fr.Id, Body: &pb.ServerFrame_AuthOk{AuthOk: &pb.AuthOk{
		UserId: user, SessionId: s.id, ServerTime: time.Now().UnixMilli(),
		HeartbeatSeconds: 30, MaxFrameBytes: 64 << 10, ProtocolVersion: wire.ProtocolVersion,
	}}}), &s.hold)
	f.mu.Lock()
	f.users[user] = append(f.users[user], s)
	f.mu.Unlock()
	s.hold.Release()
}

// HandleClose forgets a closed connection's session (gateway.Handler).
func (f *Floor) HandleClose(c *gateway.Conn, _ pb.DisconnectCode) {
	s, _ := c.Value().(*floorSess)
	if s == nil {
		return
	}
	f.mu.Lock()
	list := f.users[s.user]
	for i, o := range list {
		if o == s {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(f.users, s.user)
	} else {
		f.users[s.user] = list
	}
	f.mu.Unlock()
}

// send is a Send: a seq from the conversation, the ACK to the sender, the
// message to every online session of the conversation's users but the
// sending one.
func (f *Floor) send(s *floorSess, id uint64, m *pb.Send) {
	c := s.c
	var conv *floorConv
	var convID string
	var to []string
	switch {
	case m.ClientMsgId == "" || len(m.ClientMsgId) > 64 || (m.To != "") == (m.ConversationId != ""):
		c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_BAD_REQUEST))
		return
	case m.To != "":
		if !auth.ValidUserID(m.To) {
			c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_BAD_REQUEST))
			return
		}
		convID = chat.DirectID(s.user, m.To)
		conv = f.conv(convID, true)
		to = []string{m.To, s.user}
		if m.To == s.user {
			to = to[:1]
		}
	default:
		convID = m.ConversationId
		if conv = f.conv(convID, false); conv == nil || !conv.group {
			c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED))
			return
		}
	}
	now := time.Now()
	conv.mu.Lock()
	if conv.group {
		if _, ok := conv.isMem[s.user]; !ok {
			conv.mu.Unlock()
			c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED))
			return
		}
		to = conv.members
	}
	conv.seq++
	msg := &pb.Message{
		ConversationId: convID, Seq: conv.seq, MessageId: uint64(now.UnixMilli())<<22 | f.msgNext.Add(1)&(1<<22-1),
		From: s.user, To: m.To, ClientMsgId: m.ClientMsgId, ContentType: m.ContentType, Payload: m.Payload,
		ServerTime: now.UnixMilli(), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL,
	}
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_SendAck{SendAck: &pb.SendAck{
		ClientMsgId: msg.ClientMsgId, ConversationId: convID, Seq: msg.Seq, MessageId: msg.MessageId, ServerTime: msg.ServerTime,
	}}})
	out := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: msg}})
	f.mu.RLock()
	for _, u := range to {
		for _, r := range f.users[u] {
			if r != s {
				r.c.SendHeld(out, &s.hold)
			}
		}
	}
	f.mu.RUnlock()
	conv.mu.Unlock()
	s.hold.Release()
}

// conv returns a conversation, made when missing if create.
func (f *Floor) conv(id string, create bool) *floorConv {
	f.mu.RLock()
	c := f.convs[id]
	f.mu.RUnlock()
	if c != nil || !create {
		return c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c = f.convs[id]; c == nil {
		c = &floorConv{}
		f.convs[id] = c
	}
	return c
}

func (f *Floor) createGroup(s *floorSess, id uint64, g *pb.CreateGroup) {
	if len(g.UserIds) > maxMembersPerRequest {
		s.c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_TOO_LARGE))
		return
	}
	conv := &floorConv{group: true, isMem: map[string]struct{}{}}
	if err := conv.add(append([]string{s.user}, g.UserIds...)); err != nil {
		s.c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_BAD_REQUEST))
		return
	}
	convID := "g:floor" + strconv.FormatUint(f.groupNext.Add(1), 10)
	f.mu.Lock()
	f.convs[convID] = conv
	f.mu.Unlock()
	s.c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Group{Group: &pb.GroupInfo{
		ConversationId: convID, Name: g.Name, Owner: s.user, MemberCount: uint32(len(conv.members)),
		CreatedAt: time.Now().UnixMilli(), AddPolicy: pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS,
		HistoryVisibility: pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN,
	}}})
}

func (f *Floor) addMembers(s *floorSess, id uint64, a *pb.AddMembers) {
	conv := f.conv(a.ConversationId, false)
	if conv == nil || !conv.group {
		s.c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED))
		return
	}
	if len(a.UserIds) > maxMembersPerRequest {
		s.c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_TOO_LARGE))
		return
	}
	conv.mu.Lock()
	_, member := conv.isMem[s.user]
	var err error
	if member {
		err = conv.add(a.UserIds)
	}
	conv.mu.Unlock()
	switch {
	case !member:
		s.c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED))
	case err != nil:
		s.c.SendFrame(errcode.Frame(id, pb.ErrorCode_ERROR_CODE_BAD_REQUEST))
	default:
		floorOK(s.c, id)
	}
}

var errFloorMembers = errors.New("bad or too many members")

// add adds members not yet in the group. Senders hold mu, or own conv alone.
func (c *floorConv) add(ids []string) error {
	for _, u := range ids {
		if !auth.ValidUserID(u) {
			return errFloorMembers
		}
	}
	for _, u := range ids {
		if _, ok := c.isMem[u]; ok {
			continue
		}
		if len(c.members) >= floorMaxMembers {
			return errFloorMembers
		}
		c.isMem[u] = struct{}{}
		c.members = append(c.members, u)
	}
	return nil
}
