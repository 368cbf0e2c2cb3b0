package gateway

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

func wsSeeds(f *testing.F) {
	b, _ := wire.EncodeClient(wire.Proto, pingFrame(1))
	var w bytesWriter
	_ = wsutil.WriteClientBinary(&w, b)
	_ = wsutil.WriteClientText(&w, []byte(`{"id":"2","ping":{}}`))
	_ = ws.WriteFrame(&w, ws.MaskFrame(ws.NewFrame(ws.OpBinary, false, b[:1])))
	_ = ws.WriteFrame(&w, ws.MaskFrame(ws.NewPingFrame([]byte("x"))))
	_ = ws.WriteFrame(&w, ws.MaskFrame(ws.NewFrame(ws.OpContinuation, true, b[1:])))
	f.Add([]byte(w), uint16(len(w)/2))
	f.Add([]byte{0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint16(3))
	f.Add([]byte{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8}, uint16(1))
}

// FuzzWSFrames: the WebSocket frame parser and the decoders behind it.
func FuzzWSFrames(f *testing.F) {
	wsSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		for len(data) > 0 {
			fr, n, err := nextWSFrame(data, int(limit))
			if err != nil || n == 0 {
				return
			}
			if n > len(data) || len(fr.payload) > n {
				t.Fatalf("n %d, payload %d, input %d", n, len(fr.payload), len(data))
			}
			if fr.op <= opBinary && len(fr.payload) > int(limit) {
				t.Fatalf("payload %d over limit %d", len(fr.payload), limit)
			}
			codec := wire.Proto
			if fr.op == opText {
				codec = wire.JSON
			}
			_ = wire.DecodeClient(codec, fr.payload, &pb.ClientFrame{})
			data = data[n:]
		}
	})
}

// FuzzTCPFrames: length-prefixed framing and protobuf decoding.
func FuzzTCPFrames(f *testing.F) {
	b, _ := wire.EncodeClient(wire.Proto, authFrame(1, "tok"))
	f.Add(wire.AppendTCPFrame(wire.AppendTCPFrame(nil, b), b[:3]))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		for {
			p, n, err := wire.ParseTCPFrame(data, 1<<10)
			if err != nil || n == 0 {
				return
			}
			if len(p) > 1<<10 {
				t.Fatalf("payload %d over limit", len(p))
			}
			_ = wire.DecodeClient(wire.Proto, p, &pb.ClientFrame{})
			data = data[n:]
		}
	})
}

// FuzzJSONDecode: the JSON form of client frames.
func FuzzJSONDecode(f *testing.F) {
	f.Add([]byte(`{"id":"7","auth":{"token":"t","deviceId":"d","deviceType":"web"}}`))
	f.Add([]byte(`{"id":"1","send":{"clientMsgId":"c","to":"u","payload":"aGk="}}`))
	f.Add([]byte(`{"id":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = wire.DecodeClient(wire.JSON, data, &pb.ClientFrame{})
	})
}

// discardConn is a net.Conn that swallows writes; the fuzzed connection
// path is driven by calling consume directly.
type discardConn struct{}

func (discardConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (discardConn) Write(p []byte) (int, error)      { return len(p), nil }
func (discardConn) Close() error                     { return nil }
func (discardConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (discardConn) SetDeadline(time.Time) error      { return nil }
func (discardConn) SetReadDeadline(time.Time) error  { return nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzConnStream drives a whole connection's read path (partial frames kept
// across reads, fragments, control frames, errors, handler calls) with
// arbitrary bytes split into two reads.
func FuzzConnStream(f *testing.F) {
	wsSeeds(f)
	g, err := New(Config{MaxFrameBytes: 1 << 10}, newEchoHandler())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		for _, tr := range []Transport{TransportWS, TransportTCP} {
			c := &Conn{g: g, id: g.nextID.Add(1), nc: discardConn{}, transport: tr, readerBusy: true}
			cut := min(int(split), len(data))
			in := append([]byte(nil), data...)
			c.consume(in[:cut])
			c.consume(in[cut:])
			if len(c.partial) > 2*(1<<10)+len(data) {
				t.Fatalf("partial %d", len(c.partial))
			}
			c.abort(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED)
			c.releaseReader(false)
		}
	})
}
