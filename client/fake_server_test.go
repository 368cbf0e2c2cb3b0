package client

// A minimal in-test Parley server, only until the real server exists: it
// speaks the frame protocol over WebSocket (both codecs) and TCP on one
// listener, stores 1:1 messages in memory, and has knobs to inject the
// failures the SDK must survive.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

type fakeServer struct {
	ln net.Listener

	mu        sync.Mutex
	conns     map[*fconn]bool
	convs     map[string][]*pb.Message
	acks      map[string]*pb.SendAck // user/client_msg_id
	attempts  map[string]int         // client_msg_id -> Send frames seen
	syncs     map[string]int         // user -> SyncMessages frames seen
	delivered map[string][]uint64    // user -> DeliveredAck seqs seen
	pings     int
	refuse    map[string]bool // users whose Auth gets UNAVAILABLE

	unavailable int             // answer the next N sends with UNAVAILABLE
	dropReply   int             // store the next N sends, reply nothing
	killOnStore int             // store the next N sends, then drop the sender's link
	skipPush    map[uint64]bool // seqs stored but not pushed (gaps)
	dupPush     bool            // push everything twice
	pageMax     int             // a SyncMessages page holds at most this many (0: the limit), as a byte-bounded page may
	busySyncs   int             // answer the next N SyncMessages with TOO_MANY_REQUESTS
}

type fconn struct {
	conn net.Conn
	br   *bufio.Reader
	ws   bool
	user string
	wmu  sync.Mutex
}

func newFakeServer(t *testing.T) *fakeServer { return newFakeServerTB(t) }

func newFakeServerTB(t testing.TB) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{
		ln: ln, conns: map[*fconn]bool{}, convs: map[string][]*pb.Message{},
		acks: map[string]*pb.SendAck{}, attempts: map[string]int{}, syncs: map[string]int{},
		delivered: map[string][]uint64{}, refuse: map[string]bool{}, skipPush: map[uint64]bool{},
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.conn.Close()
		}
		s.mu.Unlock()
	})
	return s
}

func (s *fakeServer) addr(scheme string) string { return scheme + "://" + s.ln.Addr().String() }

func (s *fakeServer) serve(conn net.Conn) {
	defer conn.Close()
	fc := &fconn{conn: conn, br: bufio.NewReader(conn)}
	if head, _ := fc.br.Peek(4); string(head) == "GET " { // sniff: WebSocket or raw TCP
		if _, err := ws.Upgrade(fc.rw()); err != nil {
			return
		}
		fc.ws = true
	}
	f, codec, err := fc.read()
	if err != nil || f.GetAuth() == nil {
		return
	}
	user := f.GetAuth().Token
	s.mu.Lock()
	refused := s.refuse[user]
	s.mu.Unlock()
	switch {
	case user == "bad":
		fc.write(codec, &pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Error{Error: &pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED}}})
		fc.write(codec, &pb.ServerFrame{Body: &pb.ServerFrame_Disconnect{Disconnect: &pb.Disconnect{Code: pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED}}})
		return
	case refused:
		fc.write(codec, &pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Error{Error: &pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE}}})
		return
	}
	fc.user = user
	s.mu.Lock()
	s.conns[fc] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, fc)
		s.mu.Unlock()
	}()
	fc.write(codec, &pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_AuthOk{AuthOk: &pb.AuthOk{UserId: user, SessionId: "s1", HeartbeatSeconds: 30}}})
	for {
		f, codec, err := fc.read()
		if err != nil {
			return
		}
		s.handle(fc, f, codec)
	}
}

func (s *fakeServer) handle(fc *fconn, f *pb.ClientFrame, codec wire.Codec) {
	reply := func(b *pb.ServerFrame) {
		b.Id = f.Id
		fc.write(codec, b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Ping:
		s.pings++
		if f.Id != 0 {
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: 1}}})
		}
	case *pb.ClientFrame_Send:
		m := b.Send
		if m.ContentType == "slow" { // answered late, to prove replies are matched by id
			m.ContentType = "text"
			go func() {
				time.Sleep(50 * time.Millisecond)
				s.handle(fc, f, codec)
			}()
			return
		}
		s.attempts[m.ClientMsgId]++
		if s.unavailable > 0 {
			s.unavailable--
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_Error{Error: &pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE}}})
			return
		}
		if ack := s.acks[fc.user+"/"+m.ClientMsgId]; ack != nil {
			dup := proto.CloneOf(ack)
			dup.Duplicate = true
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_SendAck{SendAck: dup}})
			return
		}
		pair := []string{fc.user, m.To}
		slices.Sort(pair)
		conv := strings.Join(pair, ":")
		msg := &pb.Message{ConversationId: conv, Seq: uint64(len(s.convs[conv]) + 1), From: fc.user, To: m.To,
			ClientMsgId: m.ClientMsgId, ContentType: m.ContentType, Payload: m.Payload, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}
		s.convs[conv] = append(s.convs[conv], msg)
		ack := &pb.SendAck{ClientMsgId: m.ClientMsgId, ConversationId: conv, Seq: msg.Seq}
		s.acks[fc.user+"/"+m.ClientMsgId] = ack
		if !s.skipPush[msg.Seq] {
			for c := range s.conns {
				if c.user == m.To {
					c.writeBatch([]*pb.ServerFrame{{Body: &pb.ServerFrame_Message{Message: msg}}}, s.dupPush)
				}
			}
		}
		switch {
		case s.dropReply > 0:
			s.dropReply--
		case s.killOnStore > 0:
			s.killOnStore--
			fc.conn.Close()
		default:
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_SendAck{SendAck: ack}})
		}
	case *pb.ClientFrame_Delivered:
		s.delivered[fc.user] = append(s.delivered[fc.user], b.Delivered.Seq)
		if f.Id != 0 {
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_Ok{Ok: &pb.Ok{}}})
		}
	case *pb.ClientFrame_Read:
		if f.Id != 0 {
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_Ok{Ok: &pb.Ok{}}})
		}
	case *pb.ClientFrame_SyncConversations:
		l := &pb.ConversationList{}
		for id, msgs := range s.convs {
			if slices.Contains(strings.Split(id, ":"), fc.user) {
				l.Conversations = append(l.Conversations, &pb.Conversation{ConversationId: id, LastSeq: uint64(len(msgs))})
			}
		}
		reply(&pb.ServerFrame{Body: &pb.ServerFrame_Conversations{Conversations: l}})
	case *pb.ClientFrame_SyncMessages:
		s.syncs[fc.user]++
		if s.busySyncs > 0 {
			s.busySyncs--
			reply(&pb.ServerFrame{Body: &pb.ServerFrame_Error{Error: &pb.Error{Code: pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS}}})
			return
		}
		q, msgs := b.SyncMessages, s.convs[b.SyncMessages.ConversationId]
		lim := int(q.Limit)
		if lim == 0 {
			lim = 100
		}
		if s.pageMax > 0 {
			lim = min(lim, s.pageMax)
		}
		p := &pb.MessagePage{ConversationId: q.ConversationId, LastSeq: uint64(len(msgs))}
		if from := int(q.AfterSeq); from < len(msgs) {
			to := min(from+lim, len(msgs))
			p.Messages, p.HasMore = msgs[from:to], to < len(msgs)
		}
		reply(&pb.ServerFrame{Body: &pb.ServerFrame_Messages{Messages: p}})
	default:
		reply(&pb.ServerFrame{Body: &pb.ServerFrame_Error{Error: &pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME}}})
	}
}

// pushAll writes frames to every link of user with one write per link.
func (s *fakeServer) pushAll(user string, frames []*pb.ServerFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.user == user {
			c.writeBatch(frames, false)
		}
	}
}

// drop closes user's links, after a Disconnect frame when code is set.
func (s *fakeServer) drop(user string, code pb.DisconnectCode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.user == user {
			if code != 0 {
				c.write(wire.Proto, &pb.ServerFrame{Body: &pb.ServerFrame_Disconnect{Disconnect: &pb.Disconnect{Code: code}}})
			}
			c.conn.Close()
		}
	}
}

func (s *fakeServer) with(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (c *fconn) rw() io.ReadWriter {
	return struct {
		io.Reader
		io.Writer
	}{c.br, c.conn}
}

func (c *fconn) read() (*pb.ClientFrame, wire.Codec, error) {
	var b []byte
	codec := wire.Proto
	if c.ws {
		p, op, err := wsutil.ReadClientData(c.rw())
		if err != nil {
			return nil, 0, err
		}
		if op == ws.OpText {
			codec = wire.JSON
		}
		b = p
	} else {
		var hdr [4]byte
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return nil, 0, err
		}
		n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
		b = make([]byte, n)
		if _, err := io.ReadFull(c.br, b); err != nil {
			return nil, 0, err
		}
	}
	f := &pb.ClientFrame{}
	return f, codec, wire.DecodeClient(codec, b, f)
}

func (c *fconn) write(codec wire.Codec, f *pb.ServerFrame) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.Write(c.frame(nil, codec, f))
}

// writeBatch writes frames in one write (each twice when dup), protobuf.
func (c *fconn) writeBatch(frames []*pb.ServerFrame, dup bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var buf []byte
	for _, f := range frames {
		buf = c.frame(buf, wire.Proto, f)
		if dup {
			buf = c.frame(buf, wire.Proto, f)
		}
	}
	c.conn.Write(buf)
}

func (c *fconn) frame(dst []byte, codec wire.Codec, f *pb.ServerFrame) []byte {
	b, _ := wire.EncodeServer(codec, f)
	if !c.ws {
		return wire.AppendTCPFrame(dst, b)
	}
	op := ws.OpBinary
	if codec == wire.JSON {
		op = ws.OpText
	}
	var w bytes.Buffer
	_ = wsutil.WriteServerMessage(&w, op, b)
	return append(dst, w.Bytes()...)
}
