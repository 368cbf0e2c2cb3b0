package client

import (
	"bufio"
	"bytes"
	"io"
	"net"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// transport is the framing of one connection. appendFrame is called with the
// writer's lock held and readFrame only from the reader goroutine, so neither
// needs locking of its own.
type transport interface {
	// appendFrame appends one encoded, framed client frame to dst; a frame
	// whose encoding passes limit bytes (0: no limit) is not appended and
	// errFrameTooLarge returned.
	appendFrame(dst []byte, f *pb.ClientFrame, limit int) ([]byte, error)
	// readFrame returns the next server frame and its codec. The bytes are
	// valid until the next call.
	readFrame() ([]byte, wire.Codec, error)
	// buffered reports whether received bytes are waiting to be parsed, that
	// is, whether the next readFrame may return without touching the network.
	buffered() bool
	// closeFrame is sent before a client-initiated close (nil for none).
	closeFrame() []byte
}

// appender is an io.Writer appending to a slice; a field of the transport so
// that passing it as an io.Writer does not allocate.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// wsTransport frames client frames as masked WebSocket messages: binary for
// protobuf, text for JSON.
type wsTransport struct {
	codec   wire.Codec
	br      *bufio.Reader
	rd      wsutil.Reader
	ctl     wsutil.ControlHandler
	in      bytes.Buffer // reused for every received message
	scratch []byte       // reused protobuf encode buffer
	app     appender
	hdr     [ws.MaxHeaderSize]byte
}

// newWSTransport reads through br (holding any bytes the server sent right
// after the handshake, or nil) and conn. Control replies (pong, close) are
// written with ctlOut, which must write each call as a unit.
func newWSTransport(conn net.Conn, br *bufio.Reader, codec wire.Codec, maxFrame int, ctlOut io.Writer) *wsTransport {
	t := &wsTransport{codec: codec}
	t.br = bufio.NewReaderSize(&prefetched{br: br, conn: conn}, 4096)
	t.rd = wsutil.Reader{
		Source:         t.br,
		State:          ws.StateClientSide,
		MaxFrameSize:   int64(maxFrame),
		MaxMessageSize: int64(maxFrame),
	}
	t.ctl = wsutil.ControlHandler{Src: &t.rd, Dst: ctlOut, State: ws.StateClientSide}
	t.rd.OnIntermediate = func(h ws.Header, r io.Reader) error {
		return wsutil.ControlHandler{Src: r, Dst: ctlOut, State: ws.StateClientSide}.Handle(h)
	}
	return t
}

func (t *wsTransport) appendFrame(dst []byte, f *pb.ClientFrame, limit int) ([]byte, error) {
	var p []byte
	var err error
	op := ws.OpBinary
	if t.codec == wire.JSON {
		op = ws.OpText
		p, err = wire.EncodeClient(wire.JSON, f)
	} else {
		t.scratch, err = wire.AppendClient(t.scratch[:0], f)
		p = t.scratch
	}
	if err != nil {
		return dst, err
	}
	if limit > 0 && len(p) > limit {
		return dst, errFrameTooLarge
	}
	return t.appendMessage(dst, op, p), nil
}

// appendMessage appends one masked WebSocket frame (client frames must be
// masked, RFC 6455 section 5.3).
func (t *wsTransport) appendMessage(dst []byte, op ws.OpCode, p []byte) []byte {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p)), Masked: true, Mask: ws.NewMask()}
	t.app.b = dst
	_ = ws.WriteHeaderBuffer(&t.app, h, t.hdr[:]) // cannot fail: appender never errs, buffer is MaxHeaderSize
	dst = t.app.b
	t.app.b = nil
	start := len(dst)
	dst = append(dst, p...)
	ws.Cipher(dst[start:], h.Mask, 0)
	return dst
}

func (t *wsTransport) readFrame() ([]byte, wire.Codec, error) {
	for {
		hdr, err := t.rd.NextFrame()
		if err != nil {
			return nil, 0, err
		}
		if hdr.OpCode.IsControl() {
			if err := t.ctl.Handle(hdr); err != nil {
				return nil, 0, err
			}
			continue
		}
		if t.in.Cap() > 1<<20 && hdr.Length < 64<<10 {
			t.in = bytes.Buffer{} // do not pin a buffer grown for one huge frame
		}
		t.in.Reset()
		if _, err := t.in.ReadFrom(&t.rd); err != nil {
			return nil, 0, err
		}
		codec := wire.Proto
		if hdr.OpCode == ws.OpText {
			codec = wire.JSON
		}
		return t.in.Bytes(), codec, nil
	}
}

func (t *wsTransport) buffered() bool { return t.br.Buffered() > 0 }

func (t *wsTransport) closeFrame() []byte {
	return t.appendMessage(nil, ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
}

// prefetched reads the bytes the dialer buffered past the handshake first.
type prefetched struct {
	br   *bufio.Reader
	conn net.Conn
}

func (p *prefetched) Read(b []byte) (int, error) {
	if p.br != nil {
		if p.br.Buffered() > 0 {
			return p.br.Read(b)
		}
		ws.PutReader(p.br)
		p.br = nil
	}
	return p.conn.Read(b)
}

// tcpTransport frames client frames with a 4-byte big-endian length.
type tcpTransport struct {
	conn    io.Reader
	max     int
	buf     []byte
	r, w    int // unparsed bytes are buf[r:w]
	scratch []byte
}

func newTCPTransport(conn io.Reader, maxFrame int) *tcpTransport {
	return &tcpTransport{conn: conn, max: maxFrame, buf: make([]byte, 4096)}
}

func (t *tcpTransport) appendFrame(dst []byte, f *pb.ClientFrame, limit int) ([]byte, error) {
	var err error
	t.scratch, err = wire.AppendClient(t.scratch[:0], f)
	if err != nil {
		return dst, err
	}
	if limit > 0 && len(t.scratch) > limit {
		return dst, errFrameTooLarge
	}
	return wire.AppendTCPFrame(dst, t.scratch), nil
}

func (t *tcpTransport) readFrame() ([]byte, wire.Codec, error) {
	for {
		p, n, err := wire.ParseTCPFrame(t.buf[t.r:t.w], t.max)
		if err != nil {
			return nil, 0, err
		}
		if n > 0 {
			t.r += n
			return p, wire.Proto, nil
		}
		// Need more bytes: slide the partial frame to the front, and grow
		// only when the buffer is full (as bytes arrive, not as declared).
		if t.r > 0 {
			t.w = copy(t.buf, t.buf[t.r:t.w])
			t.r = 0
		}
		if t.w == len(t.buf) {
			nb := make([]byte, 2*len(t.buf))
			copy(nb, t.buf[:t.w])
			t.buf = nb
		}
		m, err := t.conn.Read(t.buf[t.w:])
		t.w += m
		if err != nil && m == 0 {
			return nil, 0, err
		}
	}
}

func (t *tcpTransport) buffered() bool { return t.w > t.r }

func (t *tcpTransport) closeFrame() []byte { return nil }
