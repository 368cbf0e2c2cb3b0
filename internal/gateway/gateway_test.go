package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

var drivers = []struct {
	name      string
	goroutine bool
}{
	{name: "epoll", goroutine: false},
	{name: "goroutine", goroutine: true},
}

// dialers returns one client constructor per transport and codec.
func dialers(tg *testGW) map[string]func(t *testing.T) client {
	return map[string]func(t *testing.T) client{
		"tcp":     func(t *testing.T) client { return dialTCP(t, tg.tcpAddr) },
		"ws-bin":  func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.Proto) },
		"ws-json": func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.JSON) },
	}
}

func TestRoundTripAndOrder(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{}, d.goroutine)
			for name, dial := range dialers(tg) {
				t.Run(name, func(t *testing.T) {
					c := dial(t)
					auth(t, c, "u-"+name)
					sc := tg.connFor(t, "u-"+name)
					wantCodec, wantT := wire.Proto, TransportWS
					switch name {
					case "ws-json":
						wantCodec = wire.JSON
					case "tcp":
						wantT = TransportTCP
					}
					if sc.Codec() != wantCodec || sc.Transport() != wantT {
						t.Errorf("codec %v transport %v, want %v %v", sc.Codec(), sc.Transport(), wantCodec, wantT)
					}
					// Many frames pipelined without waiting: replies in order.
					const n = 2000
					sent := make(chan struct{})
					defer func() { <-sent }()
					go func() {
						defer close(sent)
						for i := uint64(2); i < n+2; i++ {
							c.send(pingFrame(i))
						}
					}()
					for i := uint64(2); i < n+2; i++ {
						f, err := c.recv()
						if err != nil {
							t.Fatal(err)
						}
						if f.Id != i || f.GetPong() == nil {
							t.Fatalf("reply %d: %v", i, f)
						}
					}
				})
			}
		})
	}
}

// A client that pipelines far more than its reply queue holds, and reads
// only later, is paused rather than dropped; once it reads, every reply
// comes, in order. The bytes it sent while paused sit in the socket with
// their epoll events spent, so this fails if resuming does not re-arm. One
// burst of more than maxReadsPerTurn buffers also crosses a worker's turn.
func TestPipelinedBurstResumes(t *testing.T) {
	queues := map[string]Config{
		"paused":   {SendQueueFrames: 64},
		"unpaused": {SendQueueFrames: 1 << 20, SendQueueBytes: 1 << 30},
	}
	for _, d := range drivers {
		for qname, cfg := range queues {
			t.Run(d.name+"/"+qname, func(t *testing.T) {
				tg := startGW(t, cfg, d.goroutine)
				for _, name := range []string{"tcp", "ws-bin"} { // ws-json takes the same read path
					t.Run(name, func(t *testing.T) {
						c := dialers(tg)[name](t)
						auth(t, c, "u-"+name)
						const n = 60000 // ~500 KB of pings
						var burst []byte
						for i := uint64(2); i < n+2; i++ {
							b, err := wire.EncodeClient(wire.Proto, pingFrame(i))
							if err != nil {
								t.Fatal(err)
							}
							if name == "tcp" {
								burst = wire.AppendTCPFrame(burst, b)
							} else {
								burst = appendMaskedWS(burst, b)
							}
						}
						sent := make(chan struct{})
						go func() {
							defer close(sent)
							c.sendRaw(burst)
						}()
						time.Sleep(200 * time.Millisecond) // let the replies pile up
						for i := uint64(2); i < n+2; i++ {
							f, err := c.recv()
							if err != nil {
								t.Fatalf("reply %d of %d: %v", i-1, n, err)
							}
							if f.Id != i || f.GetPong() == nil {
								t.Fatalf("reply %d: %v", i, f)
							}
						}
						<-sent
						if st := tg.g.Stats(); st.SlowClosed != 0 {
							t.Fatalf("closed as slow instead of paused: %+v", st)
						}
					})
				}
			})
		}
	}
}

// appendMaskedWS appends p as one masked binary WebSocket frame, as a client sends it.
func appendMaskedWS(b, p []byte) []byte {
	var hdr bytes.Buffer
	h := ws.Header{Fin: true, OpCode: ws.OpBinary, Length: int64(len(p)), Masked: true, Mask: ws.NewMask()}
	_ = ws.WriteHeader(&hdr, h)
	b = append(b, hdr.Bytes()...)
	start := len(b)
	b = append(b, p...)
	ws.Cipher(b[start:], h.Mask, 0)
	return b
}

func TestWSJSONRawText(t *testing.T) {
	tg := startGW(t, Config{}, false)
	c := dialWS(t, tg.wsURL, wire.JSON)
	if err := wsutil.WriteClientText(c.nc, []byte(`{"id":"7","auth":{"token":"j","deviceId":"d","deviceType":"web"}}`)); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	p, op, err := wsutil.ReadServerData(c.rw)
	if err != nil {
		t.Fatal(err)
	}
	if op != ws.OpText {
		t.Fatalf("reply opcode %v", op)
	}
	f := &pb.ServerFrame{}
	if err := wire.DecodeServer(wire.JSON, p, f); err != nil || f.Id != 7 || f.GetAuthOk().GetUserId() != "j" {
		t.Fatalf("reply %s: %v %v", p, f, err)
	}
}

func TestCodecChosenByFirstFrame(t *testing.T) {
	tg := startGW(t, Config{}, false)
	c := dialWS(t, tg.wsURL, wire.JSON)
	auth(t, c, "first-json") // text: JSON from now on
	c.codec = wire.Proto     // a binary frame is still decoded as protobuf
	c.send(pingFrame(5))
	f, err := c.recv()
	if err != nil {
		t.Fatal(err)
	}
	if c.lastOp != ws.OpText || f.Id != 5 {
		t.Fatalf("reply %v op %v, want a JSON text reply", f, c.lastOp)
	}
	if got := tg.connFor(t, "first-json").Codec(); got != wire.JSON {
		t.Fatalf("codec %v", got)
	}
}

func TestWSHandshakeWithFrameBehind(t *testing.T) {
	// The first frame arrives in the same segment as the handshake, so it
	// sits in the HTTP server's buffer when the connection is hijacked.
	tg := startGW(t, Config{}, false)
	nc, err := net.Dial("tcp", tg.wsURL[len("ws://"):len(tg.wsURL)-len("/ws")])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := wire.EncodeClient(wire.Proto, authFrame(3, "behind"))
	var frame bytesWriter
	if err := wsutil.WriteClientBinary(&frame, b); err != nil {
		t.Fatal(err)
	}
	req := "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := nc.Write(append([]byte(req), frame...)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(ioTimeout))
	// Skip the HTTP response, then read the reply frame.
	var resp []byte
	one := make([]byte, 1)
	for len(resp) < 4 || string(resp[len(resp)-4:]) != "\r\n\r\n" {
		if _, err := nc.Read(one); err != nil {
			t.Fatal(err)
		}
		resp = append(resp, one[0])
	}
	p, _, err := wsutil.ReadServerData(nc)
	if err != nil {
		t.Fatal(err)
	}
	f := &pb.ServerFrame{}
	if err := wire.DecodeServer(wire.Proto, p, f); err != nil || f.GetAuthOk().GetUserId() != "behind" {
		t.Fatalf("reply %v %v", f, err)
	}
}

type bytesWriter []byte

func (w *bytesWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

func TestWSControlAndFragments(t *testing.T) {
	tg := startGW(t, Config{MaxFrameBytes: 1 << 10}, false)
	c := dialWS(t, tg.wsURL, wire.Proto)
	auth(t, c, "frag")
	// A ping is answered with a pong carrying its payload.
	if err := ws.WriteFrame(c.nc, ws.MaskFrame(ws.NewPingFrame([]byte("hi")))); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	h, err := ws.ReadHeader(c.nc)
	if err != nil || h.OpCode != ws.OpPong {
		t.Fatalf("header %+v %v", h, err)
	}
	pl := make([]byte, h.Length)
	if _, err := c.nc.Read(pl); err != nil || string(pl) != "hi" {
		t.Fatalf("pong payload %q %v", pl, err)
	}
	// A message in three fragments, a ping in between.
	b, _ := wire.EncodeClient(wire.Proto, pingFrame(9))
	parts := [][]byte{b[:1], b[1:2], b[2:]}
	frames := []ws.Frame{
		ws.NewFrame(ws.OpBinary, false, parts[0]),
		ws.NewPingFrame(nil),
		ws.NewFrame(ws.OpContinuation, false, parts[1]),
		ws.NewFrame(ws.OpContinuation, true, parts[2]),
	}
	for _, f := range frames {
		if err := ws.WriteFrame(c.nc, ws.MaskFrame(f)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := c.recv() // wsutil skips the pong
	if err != nil || f.Id != 9 || f.GetPong() == nil {
		t.Fatalf("reply %v %v", f, err)
	}
	// Fragments that add up past MaxFrameBytes are refused.
	big := make([]byte, 600)
	for _, f := range []ws.Frame{ws.NewFrame(ws.OpBinary, false, big), ws.NewFrame(ws.OpContinuation, true, big)} {
		_ = ws.WriteFrame(c.nc, ws.MaskFrame(f))
	}
	expectClosed(t, c, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
}

func TestWSClientClose(t *testing.T) {
	tg := startGW(t, Config{}, false)
	c := dialWS(t, tg.wsURL, wire.Proto)
	auth(t, c, "closer")
	sc := tg.connFor(t, "closer")
	if err := ws.WriteFrame(c.nc, ws.MaskFrame(ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusGoingAway, "bye")))); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	_, _, err := wsutil.ReadServerData(c.rw)
	var ce wsutil.ClosedError
	if !asClosed(err, &ce) || ce.Code != ws.StatusGoingAway {
		t.Fatalf("want close echo 1001, got %v", err)
	}
	eventually(t, "HandleClose", func() bool { _, ok := tg.h.closeCode(sc.ID()); return ok })
	if code, _ := tg.h.closeCode(sc.ID()); code != pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED {
		t.Fatalf("close code %v", code)
	}
}

func asClosed(err error, ce *wsutil.ClosedError) bool {
	if e, ok := err.(wsutil.ClosedError); ok {
		*ce = e
		return true
	}
	return false
}

func TestFanOutCoalesced(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{SendQueueFrames: 1 << 20, SendQueueBytes: 1 << 28}, d.goroutine)
			const conns, msgs = 30, 300
			var clients []client
			for i := range conns {
				var c client
				switch i % 3 {
				case 0:
					c = dialTCP(t, tg.tcpAddr)
				case 1:
					c = dialWS(t, tg.wsURL, wire.Proto)
				default:
					c = dialWS(t, tg.wsURL, wire.JSON)
				}
				auth(t, c, fmt.Sprint("fan", i))
				clients = append(clients, c)
			}
			servers := make([]*Conn, conns)
			for i := range conns {
				servers[i] = tg.connFor(t, fmt.Sprint("fan", i))
			}
			before := tg.g.Stats()
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for s := uint64(1); s <= msgs; s++ {
						f, err := c.recv()
						if err != nil {
							t.Errorf("client %d: %v", i, err)
							return
						}
						if got := f.GetMessage().GetSeq(); got != s {
							t.Errorf("client %d: seq %d, want %d", i, got, s)
							return
						}
					}
				}()
			}
			for s := uint64(1); s <= msgs; s++ {
				o := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: &pb.Message{
					ConversationId: "g", Seq: s, Payload: make([]byte, 64),
				}}})
				for _, sc := range servers {
					if !sc.Send(o) {
						t.Fatal("Send refused")
					}
				}
			}
			wg.Wait()
			after := tg.g.Stats()
			out, writes := after.FramesOut-before.FramesOut, after.Writes-before.Writes
			t.Logf("fan-out: %d frames in %d writes", out, writes)
			if out != conns*msgs {
				t.Errorf("FramesOut %d, want %d", out, conns*msgs)
			}
			if writes >= out {
				t.Errorf("no coalescing: %d writes for %d frames", writes, out)
			}
		})
	}
}

func TestSlowReaderQueueCap(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			cfg := Config{SendQueueFrames: 64, SendQueueBytes: 64 << 10}
			tg := startGW(t, cfg, d.goroutine)
			slow := dialTCP(t, tg.tcpAddr)
			auth(t, slow, "slow")
			fast := dialTCP(t, tg.tcpAddr)
			auth(t, fast, "fast")
			sc := tg.connFor(t, "slow")
			o := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: &pb.Message{Payload: make([]byte, 4<<10)}}})
			sent := 0
			for sc.Send(o) {
				sent++
				// Let the flusher take each frame, so that the kernel's
				// buffers fill first and the cap is reached because the
				// client does not read, not because we outran the flusher.
				for {
					sc.mu.Lock()
					taken := len(sc.queue) == 0 || sc.backlog || sc.closing
					sc.mu.Unlock()
					if taken {
						break
					}
					runtime.Gosched()
				}
				sc.mu.Lock()
				held, frames := sc.queuedBytes+sc.inflight, len(sc.queue)
				sc.mu.Unlock()
				if held > cfg.SendQueueBytes || frames > cfg.SendQueueFrames {
					t.Fatalf("queue past its cap: %d bytes, %d frames", held, frames)
				}
				if sent > 100000 {
					t.Fatal("never refused")
				}
			}
			// The others are unaffected.
			fast.send(pingFrame(2))
			if f, err := fast.recv(); err != nil || f.Id != 2 {
				t.Fatalf("fast client: %v %v", f, err)
			}
			eventually(t, "slow close", func() bool { _, ok := tg.h.closeCode(sc.ID()); return ok })
			if code, _ := tg.h.closeCode(sc.ID()); code != pb.DisconnectCode_DISCONNECT_CODE_SLOW {
				t.Fatalf("close code %v", code)
			}
			if st := tg.g.Stats(); st.SlowClosed != 1 || st.Closed[pb.DisconnectCode_DISCONNECT_CODE_SLOW] != 1 {
				t.Fatalf("stats %+v", st)
			}
			t.Logf("accepted %d frames before closing", sent)
		})
	}
}

func TestSlowReaderWriteTimeout(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			cfg := Config{SendQueueFrames: 1 << 20, SendQueueBytes: 1 << 30, WriteTimeout: 200 * time.Millisecond}
			tg := startGW(t, cfg, d.goroutine)
			slow := dialTCP(t, tg.tcpAddr)
			auth(t, slow, "stuck")
			sc := tg.connFor(t, "stuck")
			// 32 MiB: more than the loopback socket buffers hold.
			o := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: &pb.Message{Payload: make([]byte, 64<<10)}}})
			for range 512 {
				if !sc.Send(o) {
					break
				}
			}
			eventually(t, "write timeout close", func() bool { _, ok := tg.h.closeCode(sc.ID()); return ok })
			if code, _ := tg.h.closeCode(sc.ID()); code != pb.DisconnectCode_DISCONNECT_CODE_SLOW {
				t.Fatalf("close code %v", code)
			}
			if st := tg.g.Stats(); st.SlowClosed != 1 {
				t.Fatalf("SlowClosed %d", st.SlowClosed)
			}
		})
	}
}

func TestOversizeWS(t *testing.T) {
	tg := startGW(t, Config{MaxFrameBytes: 1 << 10}, false)
	for _, size := range []uint64{1<<10 + 1, 1 << 32, 1<<63 - 1} {
		c := dialWS(t, tg.wsURL, wire.Proto)
		// A header declaring size bytes, a mask, and a few bytes of payload.
		hdr := []byte{0x82, 0x80 | 127}
		hdr = binary.BigEndian.AppendUint64(hdr, size)
		hdr = append(hdr, 1, 2, 3, 4, 0xaa, 0xbb)
		c.sendRaw(hdr)
		expectClosed(t, c, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	}
	if st := tg.g.Stats(); st.OversizeFrames != 3 || st.ProtocolErrors != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOversizeTCP(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{}, d.goroutine)
			c := dialTCP(t, tg.tcpAddr)
			c.sendRaw([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}) // claims 4 GiB
			expectClosed(t, c, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
			if st := tg.g.Stats(); st.OversizeFrames != 1 {
				t.Fatalf("OversizeFrames %d", st.OversizeFrames)
			}
		})
	}
}

func TestOversizeRefusedWithoutAllocating(t *testing.T) {
	hdr := []byte{0x82, 0x80 | 127}
	hdr = binary.BigEndian.AppendUint64(hdr, 1<<40)
	hdr = append(hdr, 1, 2, 3, 4)
	tcp := []byte{0xff, 0xff, 0xff, 0xff, 0}
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := nextWSFrame(hdr, 1<<16); err != errWSTooLarge {
			t.Fatal(err)
		}
		if _, _, err := wire.ParseTCPFrame(tcp, 1<<16); err != wire.ErrFrameTooLarge {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

func TestMalformedAndUnknown(t *testing.T) {
	tg := startGW(t, Config{}, false)
	unknown, _ := wire.EncodeClient(wire.Proto, &pb.ClientFrame{Id: 42}) // no body
	unknownField := binary.AppendUvarint(nil, 100<<3|0)                  // field 100, varint
	unknownField = append(unknownField, 1)
	cases := []struct {
		name string
		dial func(t *testing.T) client
		raw  func(c client) []byte
		code pb.ErrorCode
	}{
		{
			name: "tcp garbage",
			dial: func(t *testing.T) client { return dialTCP(t, tg.tcpAddr) },
			raw:  func(client) []byte { return wire.AppendTCPFrame(nil, []byte{0xff, 0xff, 0xff}) },
			code: pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
		},
		{
			name: "tcp no body",
			dial: func(t *testing.T) client { return dialTCP(t, tg.tcpAddr) },
			raw:  func(client) []byte { return wire.AppendTCPFrame(nil, unknown) },
			code: pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME,
		},
		{
			name: "tcp unknown field only",
			dial: func(t *testing.T) client { return dialTCP(t, tg.tcpAddr) },
			raw:  func(client) []byte { return wire.AppendTCPFrame(nil, unknownField) },
			code: pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME,
		},
		{
			name: "ws bad json",
			dial: func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.JSON) },
			raw:  func(client) []byte { return maskedFrame(ws.OpText, []byte(`{"id":`)) },
			code: pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
		},
		{
			name: "ws unknown json field",
			dial: func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.JSON) },
			raw:  func(client) []byte { return maskedFrame(ws.OpText, []byte(`{"id":"1","bogus":{}}`)) },
			code: pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
		},
		{
			name: "ws json no body",
			dial: func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.JSON) },
			raw:  func(client) []byte { return maskedFrame(ws.OpText, []byte(`{"id":"1"}`)) },
			code: pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME,
		},
		{
			name: "ws unmasked",
			dial: func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.Proto) },
			raw: func(client) []byte {
				var w bytesWriter
				_ = ws.WriteFrame(&w, ws.NewBinaryFrame(unknown))
				return w
			},
			code: pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
		},
		{
			name: "ws reserved opcode",
			dial: func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.Proto) },
			raw:  func(client) []byte { return maskedFrame(ws.OpCode(0x3), []byte{1}) },
			code: pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
		},
		{
			name: "ws stray continuation",
			dial: func(t *testing.T) client { return dialWS(t, tg.wsURL, wire.Proto) },
			raw:  func(client) []byte { return maskedFrame(ws.OpContinuation, []byte{1}) },
			code: pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.dial(t)
			c.sendRaw(tc.raw(c))
			expectClosed(t, c, tc.code, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
		})
	}
}

func maskedFrame(op ws.OpCode, p []byte) []byte {
	var w bytesWriter
	_ = ws.WriteFrame(&w, ws.MaskFrame(ws.NewFrame(op, true, append([]byte(nil), p...))))
	return w
}

func TestAuthTimeout(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{AuthTimeout: 100 * time.Millisecond}, d.goroutine)
			expectClosed(t, dialTCP(t, tg.tcpAddr), 0, pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT)
			expectClosed(t, dialWS(t, tg.wsURL, wire.Proto), 0, pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT)
			// Frames other than a successful auth do not stop it.
			c := dialTCP(t, tg.tcpAddr)
			c.send(pingFrame(1))
			fs := readToEnd(t, c)
			if len(fs) != 2 || fs[1].GetDisconnect().GetCode() != pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT {
				t.Fatalf("frames %v", fs)
			}
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	tg := startGW(t, Config{IdleTimeout: 300 * time.Millisecond}, false)
	tcp := dialTCP(t, tg.tcpAddr)
	auth(t, tcp, "idle")
	expectClosed(t, tcp, 0, pb.DisconnectCode_DISCONNECT_CODE_HEARTBEAT_TIMEOUT)

	// WS control frames count as activity: a client that only pings stays.
	c := dialWS(t, tg.wsURL, wire.Proto)
	auth(t, c, "pinger")
	sc := tg.connFor(t, "pinger")
	for end := time.Now().Add(900 * time.Millisecond); time.Now().Before(end); {
		if err := ws.WriteFrame(c.nc, ws.MaskFrame(ws.NewPingFrame(nil))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond) // pacing the pings, not synchronizing
	}
	if code, closed := tg.h.closeCode(sc.ID()); closed {
		t.Fatalf("closed with %v while pinging", code)
	}
	expectClosed(t, c, 0, pb.DisconnectCode_DISCONNECT_CODE_HEARTBEAT_TIMEOUT)
	eventually(t, "2 heartbeat closes counted", func() bool {
		return tg.g.Stats().Closed[pb.DisconnectCode_DISCONNECT_CODE_HEARTBEAT_TIMEOUT] == 2
	})
}

func TestHandlerPanic(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{}, d.goroutine)
			bad := dialWS(t, tg.wsURL, wire.Proto)
			auth(t, bad, "bad")
			good := dialTCP(t, tg.tcpAddr)
			auth(t, good, "good")
			// The panicking frame and one behind it in the same write: the
			// second is never handled.
			var both bytesWriter
			for _, f := range []*pb.ClientFrame{
				{Id: 2, Body: &pb.ClientFrame_Send{Send: &pb.Send{ContentType: "panic"}}},
				pingFrame(3),
			} {
				b, _ := wire.EncodeClient(wire.Proto, f)
				_ = wsutil.WriteClientBinary(&both, b)
			}
			bad.sendRaw(both)
			expectClosed(t, bad, 0, pb.DisconnectCode_DISCONNECT_CODE_INTERNAL)
			good.send(pingFrame(4))
			if f, err := good.recv(); err != nil || f.Id != 4 {
				t.Fatalf("good client: %v %v", f, err)
			}
			eventually(t, "INTERNAL close counted", func() bool {
				return tg.g.Stats().Closed[pb.DisconnectCode_DISCONNECT_CODE_INTERNAL] == 1
			})
			if st := tg.g.Stats(); st.Panics != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{}, d.goroutine)
			var cs []client
			for i := range 6 {
				var c client
				if i%2 == 0 {
					c = dialTCP(t, tg.tcpAddr)
				} else {
					c = dialWS(t, tg.wsURL, wire.Proto)
				}
				auth(t, c, fmt.Sprint("s", i))
				cs = append(cs, c)
			}
			unauthed := dialTCP(t, tg.tcpAddr)
			eventually(t, "7 conns", func() bool { return tg.g.Len() == 7 })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tg.g.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if tg.g.Len() != 0 {
				t.Fatalf("Len %d after Shutdown", tg.g.Len())
			}
			for _, c := range append(cs, unauthed) {
				expectClosed(t, c, 0, pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN)
			}
			if st := tg.g.Stats(); st.Closed[pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN] != 7 || st.Open != 0 {
				t.Fatalf("stats %+v", st)
			}
			p1, p2 := net.Pipe()
			defer p2.Close()
			if err := tg.g.Adopt(p1, TransportTCP); err != ErrClosed {
				t.Fatalf("Adopt after Shutdown: %v", err)
			}
		})
	}
}

func TestAdoptPipe(t *testing.T) {
	// Any net.Conn, even one with no fd and no buffering, is served.
	tg := startGW(t, Config{}, false)
	srv, cli := net.Pipe()
	if err := tg.g.Adopt(srv, TransportTCP); err != nil {
		t.Fatal(err)
	}
	c := &tcpClient{t: t, nc: cli, br: bufioReader(cli)}
	go c.send(authFrame(1, "pipe")) // net.Pipe is synchronous: write and read concurrently
	if f, err := c.recv(); err != nil || f.GetAuthOk() == nil {
		t.Fatalf("auth reply %v %v", f, err)
	}
	sc := tg.connFor(t, "pipe")
	if sc.RemoteAddr() == nil {
		t.Fatal("no RemoteAddr")
	}
	sc.Close(pb.DisconnectCode_DISCONNECT_CODE_KICKED, "kicked")
	expectClosed(t, c, 0, pb.DisconnectCode_DISCONNECT_CODE_KICKED)
	eventually(t, "close", func() bool { _, ok := tg.h.closeCode(sc.ID()); return ok })
}
