package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// echoHandler answers Auth with AuthOk, Ping with Pong and Send with SendAck
// (content type "panic" panics), and checks the Handler contract: no
// HandleFrame after HandleClose, HandleClose exactly once.
type echoHandler struct {
	mu        sync.Mutex
	conns     map[uint64]*Conn // authenticated and open
	closes    map[uint64][]pb.DisconnectCode
	frames    map[uint64]int
	violation []string
	busy      map[uint64]bool // a HandleFrame is running: concurrency check
}

func newEchoHandler() *echoHandler {
	return &echoHandler{
		conns:  make(map[uint64]*Conn),
		closes: make(map[uint64][]pb.DisconnectCode),
		frames: make(map[uint64]int),
		busy:   make(map[uint64]bool),
	}
}

func (h *echoHandler) HandleFrame(c *Conn, f *pb.ClientFrame) {
	h.mu.Lock()
	if len(h.closes[c.ID()]) > 0 {
		h.violation = append(h.violation, "HandleFrame after HandleClose")
	}
	if h.busy[c.ID()] {
		h.violation = append(h.violation, "concurrent HandleFrame")
	}
	h.busy[c.ID()] = true
	h.frames[c.ID()]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.busy[c.ID()] = false
		h.mu.Unlock()
	}()
	switch b := f.Body.(type) {
	case *pb.ClientFrame_Auth:
		c.SetAuthenticated()
		c.SetValue(b.Auth.Token)
		h.mu.Lock()
		h.conns[c.ID()] = c
		h.mu.Unlock()
		c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_AuthOk{AuthOk: &pb.AuthOk{UserId: b.Auth.Token}}})
	case *pb.ClientFrame_Ping:
		c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_Pong{Pong: &pb.Pong{ServerTime: int64(f.Id)}}})
	case *pb.ClientFrame_Send:
		if b.Send.ContentType == "panic" {
			panic("test panic")
		}
		c.SendFrame(&pb.ServerFrame{Id: f.Id, Body: &pb.ServerFrame_SendAck{SendAck: &pb.SendAck{ClientMsgId: b.Send.ClientMsgId}}})
	}
}

func (h *echoHandler) HandleClose(c *Conn, code pb.DisconnectCode) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.busy[c.ID()] {
		h.violation = append(h.violation, "HandleClose during HandleFrame")
	}
	h.closes[c.ID()] = append(h.closes[c.ID()], code)
	delete(h.conns, c.ID())
}

// closeCode returns the code of c's HandleClose, if it happened.
func (h *echoHandler) closeCode(id uint64) (pb.DisconnectCode, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.closes[id]
	if len(cs) == 0 {
		return 0, false
	}
	return cs[0], true
}

func (h *echoHandler) authed() []*Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		cs = append(cs, c)
	}
	return cs
}

// check asserts the Handler contract over every connection g accepted.
func (h *echoHandler) check(t *testing.T, g *Gateway) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range h.violation {
		t.Errorf("handler contract: %s", v)
	}
	for id, cs := range h.closes {
		if len(cs) != 1 {
			t.Errorf("conn %d: HandleClose called %d times", id, len(cs))
		}
	}
	if got, want := uint64(len(h.closes)), g.Stats().Accepted; got != want {
		t.Errorf("HandleClose for %d conns, accepted %d", got, want)
	}
}

type testGW struct {
	g       *Gateway
	h       *echoHandler
	tcpAddr string
	wsURL   string
}

// noFD hides a connection's file descriptor, so it is served by the
// goroutine driver (as a *tls.Conn would be).
type noFD struct{ net.Conn }

// startGW runs a Gateway with TCP and WS listeners on 127.0.0.1:0. With
// goroutineDriver, connections are adopted without their fd.
func startGW(t *testing.T, cfg Config, goroutineDriver bool) *testGW {
	t.Helper()
	h := newEchoHandler()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler) // panics are expected in tests
	}
	g, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var httpH http.Handler = g
	if goroutineDriver {
		go func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				_ = g.Adopt(noFD{nc}, TransportTCP)
			}
		}()
		httpH = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			nc, _, _, err := ws.UpgradeHTTP(r, w)
			if err != nil {
				return
			}
			_ = g.Adopt(noFD{nc}, TransportWS)
		})
	} else {
		go func() { _ = g.ServeTCP(ln) }()
	}
	srv := httptest.NewServer(httpH)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		_ = ln.Close()
		srv.Close()
		h.check(t, g)
	})
	return &testGW{g: g, h: h, tcpAddr: ln.Addr().String(), wsURL: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
}

// client is a test client over either transport.
type client interface {
	send(f *pb.ClientFrame)
	sendRaw(b []byte) // already framed bytes
	recv() (*pb.ServerFrame, error)
	conn() net.Conn
}

const ioTimeout = 10 * time.Second

type tcpClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialTCP(t *testing.T, addr string) *tcpClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &tcpClient{t: t, nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *tcpClient) conn() net.Conn { return c.nc }

func (c *tcpClient) send(f *pb.ClientFrame) {
	b, err := wire.EncodeClient(wire.Proto, f)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(wire.AppendTCPFrame(nil, b))
}

func (c *tcpClient) sendRaw(b []byte) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Errorf("write: %v", err)
	}
}

func (c *tcpClient) recv() (*pb.ServerFrame, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c.br, p); err != nil {
		return nil, err
	}
	f := &pb.ServerFrame{}
	return f, wire.DecodeServer(wire.Proto, p, f)
}

type wsClient struct {
	t      *testing.T
	nc     net.Conn
	rw     io.ReadWriter
	codec  wire.Codec
	lastOp ws.OpCode
}

func dialWS(t *testing.T, url string, codec wire.Codec) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	nc, br, _, err := ws.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	var rw io.ReadWriter = nc
	if br != nil {
		rw = struct {
			io.Reader
			io.Writer
		}{br, nc}
	}
	return &wsClient{t: t, nc: nc, rw: rw, codec: codec}
}

func (c *wsClient) conn() net.Conn { return c.nc }

func (c *wsClient) send(f *pb.ClientFrame) {
	b, err := wire.EncodeClient(c.codec, f)
	if err != nil {
		c.t.Fatal(err)
	}
	op := ws.OpBinary
	if c.codec == wire.JSON {
		op = ws.OpText
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if err := wsutil.WriteClientMessage(c.nc, op, b); err != nil {
		c.t.Errorf("write: %v", err)
	}
}

func (c *wsClient) sendRaw(b []byte) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Errorf("write: %v", err)
	}
}

// recv reads the next data message; a text message is decoded as JSON.
func (c *wsClient) recv() (*pb.ServerFrame, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	p, op, err := wsutil.ReadServerData(c.rw)
	if err != nil {
		return nil, err
	}
	c.lastOp = op
	codec := wire.Proto
	if op == ws.OpText {
		codec = wire.JSON
	}
	f := &pb.ServerFrame{}
	return f, wire.DecodeServer(codec, p, f)
}

// readToEnd reads frames until the connection ends.
func readToEnd(t *testing.T, c client) []*pb.ServerFrame {
	t.Helper()
	var fs []*pb.ServerFrame
	for {
		f, err := c.recv()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection not closed: %v", err)
			}
			return fs
		}
		fs = append(fs, f)
	}
}

// expectClosed reads to the end and checks the Error (if errCode != 0) and
// Disconnect frames that precede it.
func expectClosed(t *testing.T, c client, errCode pb.ErrorCode, code pb.DisconnectCode) {
	t.Helper()
	fs := readToEnd(t, c)
	var gotErr pb.ErrorCode
	var gotDisc *pb.Disconnect
	for _, f := range fs {
		if e := f.GetError(); e != nil {
			gotErr = e.Code
		}
		if d := f.GetDisconnect(); d != nil {
			gotDisc = d
		}
	}
	if errCode != 0 && gotErr != errCode {
		t.Errorf("error code %v, want %v (frames %v)", gotErr, errCode, fs)
	}
	if gotDisc == nil || gotDisc.Code != code {
		t.Errorf("disconnect %v, want %v", gotDisc, code)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func authFrame(id uint64, token string) *pb.ClientFrame {
	return &pb.ClientFrame{Id: id, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: token, DeviceId: "d", DeviceType: "test"}}}
}

func pingFrame(id uint64) *pb.ClientFrame {
	return &pb.ClientFrame{Id: id, Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}
}

// auth authenticates c and waits for its AuthOk.
func auth(t *testing.T, c client, token string) {
	t.Helper()
	c.send(authFrame(1, token))
	f, err := c.recv()
	if err != nil {
		t.Fatal(err)
	}
	if f.GetAuthOk().GetUserId() != token {
		t.Fatalf("auth reply %v", f)
	}
}

// connFor finds the server side of the authenticated client token.
func (tg *testGW) connFor(t *testing.T, token string) *Conn {
	t.Helper()
	var found *Conn
	eventually(t, "conn "+token, func() bool {
		for _, c := range tg.h.authed() {
			if c.Value() == token {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

func bufioReader(nc net.Conn) *bufio.Reader { return bufio.NewReader(nc) }
