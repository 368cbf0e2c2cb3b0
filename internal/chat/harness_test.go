package chat

// A small harness for in-package tests of the messaging service: a real
// Service built as server.New builds it (the embedded store in a temporary
// directory, the in-process router, the session registry), driven through
// Call — the entry point of POST /v1/rpc — and, for what is pushed to live
// sessions, through devices: real gateway connections over in-memory pipes
// that log in with a token, like a client over TCP. No listener, no sockets;
// every wait is for a condition, up to a deadline.

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/gateway"
	"github.com/parleyim/parley/internal/route"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// waitFor bounds every wait of the harness; a test that needs longer has failed.
const waitFor = 10 * time.Second

type harness struct {
	t      *testing.T
	svc    *Service
	tokens *auth.Tokens
	log    *slog.Logger

	gwOnce sync.Once
	gw     *gateway.Gateway // started by the first device
}

// newHarness starts a service with cfg (zero: the package defaults), stopped
// and its storage closed when the test ends.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// NoSync: a test's data need not survive a machine crash, and an fsync
	// per commit would be most of a test's time.
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, CacheBytes: 8 << 20, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tokens, err := auth.NewTokens([]byte("test-token-key-of-at-least-32-bytes!"), nil, "test-app", auth.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	reg := session.NewRegistry(session.KickSameDeviceType)
	router := route.NewInProcess(reg)
	t.Cleanup(func() { router.Close() })
	cfg.Logger = log
	svc := New(cfg, st, router, reg, tokens)
	svc.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &harness{t: t, svc: svc, tokens: tokens, log: log}
}

// tWriter sends the service's log to the test's log (shown with -v).
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// call runs one request as uid over the HTTP entry point and returns the answer.
func (h *harness) call(uid string, f *pb.ClientFrame) *pb.ServerFrame {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	r, err := h.svc.Call(ctx, auth.Claims{UserID: uid}, f)
	if err != nil {
		h.t.Fatalf("%s: call %T: %v", uid, f.Body, err)
	}
	return r
}

// ok runs a request that must succeed and returns its answer.
func (h *harness) ok(uid string, f *pb.ClientFrame) *pb.ServerFrame {
	h.t.Helper()
	r := h.call(uid, f)
	if e := r.GetError(); e != nil {
		h.t.Fatalf("%s: %T refused: %v", uid, f.Body, e.Code)
	}
	return r
}

// refused runs a request that must be refused with code.
func (h *harness) refused(uid string, f *pb.ClientFrame, code pb.ErrorCode) {
	h.t.Helper()
	r := h.call(uid, f)
	if got := r.GetError().GetCode(); got != code {
		h.t.Fatalf("%s: %T answered %v, want error %v", uid, f.Body, r, code)
	}
}

// send stores a message from uid and returns its ACK.
func (h *harness) send(uid string, s *pb.Send) *pb.SendAck {
	h.t.Helper()
	ack := h.ok(uid, sendReq(s)).GetSendAck()
	if ack == nil {
		h.t.Fatalf("%s: send answered without a send_ack", uid)
	}
	return ack
}

// sync reads one forward page of conv as uid.
func (h *harness) sync(uid, conv string, after uint64, limit uint32) *pb.MessagePage {
	h.t.Helper()
	return h.ok(uid, &pb.ClientFrame{Body: &pb.ClientFrame_SyncMessages{SyncMessages: &pb.SyncMessages{
		ConversationId: conv, AfterSeq: after, Limit: limit}}}).GetMessages()
}

// history reads one backward page of conv as uid.
func (h *harness) history(uid, conv string, before uint64, limit uint32) *pb.MessagePage {
	h.t.Helper()
	return h.ok(uid, &pb.ClientFrame{Body: &pb.ClientFrame_History{History: &pb.History{
		ConversationId: conv, BeforeSeq: before, Limit: limit}}}).GetMessages()
}

// createGroup makes a group owned by uid with members and returns its id.
func (h *harness) createGroup(uid string, g *pb.CreateGroup) string {
	h.t.Helper()
	info := h.ok(uid, &pb.ClientFrame{Body: &pb.ClientFrame_CreateGroup{CreateGroup: g}}).GetGroup()
	if info.GetConversationId() == "" {
		h.t.Fatalf("%s: create group answered without a group", uid)
	}
	return info.ConversationId
}

// conversation returns uid's entry for conv in their conversation list (nil: none).
func (h *harness) conversation(uid, conv string) *pb.Conversation {
	h.t.Helper()
	list := h.ok(uid, &pb.ClientFrame{Body: &pb.ClientFrame_SyncConversations{SyncConversations: &pb.SyncConversations{Limit: 100}}})
	for _, c := range list.GetConversations().GetConversations() {
		if c.ConversationId == conv {
			return c
		}
	}
	return nil
}

// eventually polls cond until it holds, up to waitFor: for what the service
// does in the background with nothing to wait on (cursor writes).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Request builders, so a test reads as the requests it makes.

func sendReq(s *pb.Send) *pb.ClientFrame { return &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: s}} }

// textSend is a text message to user `to` or in conversation conv (one of them empty).
func textSend(cmid, to, conv, body string) *pb.Send {
	return &pb.Send{ClientMsgId: cmid, To: to, ConversationId: conv, ContentType: "text", Payload: []byte(body)}
}

func addReq(conv, uid string) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_AddMembers{AddMembers: &pb.AddMembers{ConversationId: conv, UserIds: []string{uid}}}}
}

func removeReq(conv, uid string) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_RemoveMember{RemoveMember: &pb.RemoveMember{ConversationId: conv, UserId: uid}}}
}

func leaveReq(conv string) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_LeaveGroup{LeaveGroup: &pb.LeaveGroup{ConversationId: conv}}}
}

func recallReq(conv string, seq uint64) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_Recall{Recall: &pb.Recall{ConversationId: conv, Seq: seq}}}
}

func editReq(conv string, seq uint64, body string) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_Edit{Edit: &pb.Edit{ConversationId: conv, Seq: seq, ContentType: "text", Payload: []byte(body)}}}
}

func readReq(conv string, seq uint64) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_Read{Read: &pb.ReadAck{ConversationId: conv, Seq: seq}}}
}

func deliveredReq(conv string, seq uint64) *pb.ClientFrame {
	return &pb.ClientFrame{Body: &pb.ClientFrame_Delivered{Delivered: &pb.DeliveredAck{ConversationId: conv, Seq: seq}}}
}

// texts returns the texts of a page's normal messages, in order.
func texts(p *pb.MessagePage) []string {
	var out []string
	for _, m := range p.GetMessages() {
		if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
			out = append(out, string(m.Payload))
		}
	}
	return out
}

// messageAt returns the message with seq in ms (nil: none).
func messageAt(ms []*pb.Message, seq uint64) *pb.Message {
	for _, m := range ms {
		if m.Seq == seq {
			return m
		}
	}
	return nil
}

// ---- Devices: live sessions ----

// testDevice is one logged-in connection of a user: a real gateway connection
// over an in-memory pipe, speaking the TCP framing. It records every frame
// the server pushes (id 0) and hands request answers to whoever waits.
type testDevice struct {
	t    *testing.T
	uid  string
	conn net.Conn

	mu      sync.Mutex
	pushed  []*pb.ServerFrame          // guarded by mu
	replies map[uint64]*pb.ServerFrame // guarded by mu
	nextID  uint64                     // guarded by mu
	changed chan struct{}              // closed and replaced when a frame arrives; guarded by mu
	closed  bool                       // the server closed the connection; guarded by mu
}

// connect logs uid in on a new device (device id and type: devID) and
// returns it once the server has answered AuthOk.
func (h *harness) connect(uid, devID string) *testDevice {
	h.t.Helper()
	h.gwOnce.Do(func() {
		gw, err := gateway.New(gateway.Config{Logger: h.log}, h.svc)
		if err != nil {
			h.t.Fatal(err)
		}
		h.gw = gw
		h.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			gw.Shutdown(ctx)
		})
	})
	server, client := net.Pipe()
	if err := h.gw.Adopt(server, gateway.TransportTCP); err != nil {
		h.t.Fatal(err)
	}
	d := &testDevice{t: h.t, uid: uid, conn: client, replies: make(map[uint64]*pb.ServerFrame), changed: make(chan struct{})}
	h.t.Cleanup(func() { client.Close() })
	go d.readLoop()
	token, _, err := h.tokens.Issue(uid, 0, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	r := d.request(&pb.ClientFrame{Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: token, DeviceId: devID, DeviceType: devID}}})
	if r.GetAuthOk() == nil {
		h.t.Fatalf("%s: login answered %v", uid, r)
	}
	return d
}

func (d *testDevice) readLoop() {
	var buf []byte
	chunk := make([]byte, 32<<10)
	for {
		n, err := d.conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			payload, used, perr := wire.ParseTCPFrame(buf, 1<<30)
			if perr != nil || used == 0 {
				break
			}
			f := new(pb.ServerFrame)
			if err := wire.DecodeServer(wire.Proto, payload, f); err != nil {
				d.t.Errorf("%s: undecodable frame from the server: %v", d.uid, err)
			}
			buf = buf[used:]
			d.mu.Lock()
			if f.Id == 0 {
				d.pushed = append(d.pushed, f)
			} else {
				d.replies[f.Id] = f
			}
			d.wakeLocked()
			d.mu.Unlock()
		}
		if err != nil {
			d.mu.Lock()
			d.closed = true
			d.wakeLocked()
			d.mu.Unlock()
			return
		}
	}
}

func (d *testDevice) wakeLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// request writes f with a fresh id and returns the server's answer.
func (d *testDevice) request(f *pb.ClientFrame) *pb.ServerFrame {
	d.t.Helper()
	d.mu.Lock()
	d.nextID++
	f.Id = d.nextID
	d.mu.Unlock()
	b, err := wire.EncodeClient(wire.Proto, f)
	if err != nil {
		d.t.Fatal(err)
	}
	d.conn.SetWriteDeadline(time.Now().Add(waitFor))
	if _, err := d.conn.Write(wire.AppendTCPFrame(nil, b)); err != nil {
		d.t.Fatalf("%s: write: %v", d.uid, err)
	}
	var r *pb.ServerFrame
	d.wait(func() bool { r = d.replies[f.Id]; return r != nil }, "the answer to a request")
	return r
}

// wait blocks, up to waitFor, until cond (called with d.mu held) holds.
func (d *testDevice) wait(cond func() bool, what string) {
	d.t.Helper()
	timeout := time.NewTimer(waitFor)
	defer timeout.Stop()
	for {
		d.mu.Lock()
		ok, closed, changed := cond(), d.closed, d.changed
		d.mu.Unlock()
		switch {
		case ok:
			return
		case closed:
			d.t.Fatalf("%s: connection closed while waiting for %s", d.uid, what)
		}
		select {
		case <-changed:
		case <-timeout.C:
			d.t.Fatalf("%s: gave up waiting for %s", d.uid, what)
		}
	}
}

// waitMessage waits for a pushed message matching ok and returns it.
func (d *testDevice) waitMessage(what string, ok func(*pb.Message) bool) *pb.Message {
	d.t.Helper()
	var found *pb.Message
	d.wait(func() bool {
		for _, f := range d.pushed {
			if m := f.GetMessage(); m != nil && ok(m) {
				found = m
				return true
			}
		}
		return false
	}, what)
	return found
}

// frames returns the frames pushed to d so far.
func (d *testDevice) frames() []*pb.ServerFrame {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.pushed)
}

// messages returns the messages pushed to d so far.
func (d *testDevice) messages() []*pb.Message {
	var out []*pb.Message
	for _, f := range d.frames() {
		if m := f.GetMessage(); m != nil {
			out = append(out, m)
		}
	}
	return out
}
