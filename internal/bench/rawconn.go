package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/gobwas/ws"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// rawConn is a minimal protocol client for what the SDK does not offer a
// load generator: a chosen source address per connection (--source-ips),
// strictly ordered pipelining (order's sender) and idle connections with
// no goroutine but their reader (conns). Writes are buffered; call flush.
// Not safe for concurrent writers; one reader.
type rawConn struct {
	conn   net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	ws     bool
	codec  wire.Codec
	enc    []byte
	in     []byte
	authOk *pb.AuthOk
}

const rawMaxFrame = 16 << 20

// dialRaw connects and authenticates within ctx.
func (e *Env) dialRaw(ctx context.Context, token, deviceID string) (*rawConn, error) {
	d := &net.Dialer{LocalAddr: e.localAddr(), Timeout: 10 * time.Second}
	r := &rawConn{}
	wsAddr, tcpAddr := e.nodeAddrs()
	if e.Cfg.Transport == "tcp" {
		u, err := url.Parse(tcpAddr)
		if err != nil {
			return nil, err
		}
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return nil, err
		}
		r.conn, r.br = c, bufio.NewReaderSize(c, 4096)
	} else {
		r.ws = true
		if e.Cfg.Codec == "json" {
			r.codec = wire.JSON
		}
		c, br, _, err := ws.Dialer{NetDial: d.DialContext}.Dial(ctx, wsAddr)
		if err != nil {
			return nil, err
		}
		r.conn = c
		// br, when not nil, holds bytes read past the handshake and reads
		// through to c.
		r.br = br
		if r.br == nil {
			r.br = bufio.NewReaderSize(c, 4096)
		}
	}
	r.bw = bufio.NewWriterSize(r.conn, 4096)
	if dl, ok := ctx.Deadline(); ok {
		r.conn.SetDeadline(dl)
	}
	err := r.write(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: token, DeviceId: deviceID, DeviceType: "bench"}}})
	if err == nil {
		err = r.flush()
	}
	for err == nil && r.authOk == nil {
		var f *pb.ServerFrame
		f, err = r.read()
		switch {
		case err != nil:
		case f.GetAuthOk() != nil:
			r.authOk = f.GetAuthOk()
		case f.GetError() != nil:
			err = errorFrameErr(f.GetError())
		case f.GetDisconnect() != nil:
			err = fmt.Errorf("bench: disconnected: %s", f.GetDisconnect().GetCode())
		}
	}
	if err != nil {
		r.conn.Close()
		return nil, err
	}
	r.conn.SetDeadline(time.Time{})
	return r, nil
}

// write buffers one frame.
func (r *rawConn) write(f *pb.ClientFrame) error {
	var p []byte
	var err error
	if r.codec == wire.JSON {
		p, err = wire.EncodeClient(wire.JSON, f)
	} else {
		r.enc, err = wire.AppendClient(r.enc[:0], f)
		p = r.enc
	}
	if err != nil {
		return err
	}
	if !r.ws {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		r.bw.Write(n[:])
		_, err = r.bw.Write(p)
		return err
	}
	op := ws.OpBinary
	if r.codec == wire.JSON {
		op = ws.OpText
	}
	return r.writeWS(op, p)
}

// writeWS buffers one masked WebSocket frame (clients must mask, RFC 6455
// 5.3); p is masked in place.
func (r *rawConn) writeWS(op ws.OpCode, p []byte) error {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p)), Masked: true, Mask: ws.NewMask()}
	if err := ws.WriteHeader(r.bw, h); err != nil {
		return err
	}
	ws.Cipher(p, h.Mask, 0)
	_, err := r.bw.Write(p)
	return err
}

func (r *rawConn) flush() error { return r.bw.Flush() }

// read returns the next server frame, skipping WebSocket control frames
// (the server does not ping clients: they ping it).
func (r *rawConn) read() (*pb.ServerFrame, error) {
	p, codec, err := r.readPayload()
	if err != nil {
		return nil, err
	}
	f := new(pb.ServerFrame)
	if err := wire.DecodeServer(codec, p, f); err != nil {
		return nil, err
	}
	return f, nil
}

// readPayload returns the next server frame undecoded, with its codec. p
// is valid until the next read.
func (r *rawConn) readPayload() (p []byte, codec wire.Codec, err error) {
	for {
		codec = wire.Proto
		if r.ws {
			h, err := ws.ReadHeader(r.br)
			if err != nil {
				return nil, 0, err
			}
			if h.Length > rawMaxFrame {
				return nil, 0, errors.New("bench: frame too large")
			}
			if cap(r.in) < int(h.Length) {
				r.in = make([]byte, h.Length)
			}
			p = r.in[:h.Length]
			if _, err := io.ReadFull(r.br, p); err != nil {
				return nil, 0, err
			}
			if h.Masked {
				ws.Cipher(p, h.Mask, 0)
			}
			switch h.OpCode {
			case ws.OpClose:
				return nil, 0, io.EOF
			case ws.OpPing, ws.OpPong, ws.OpContinuation:
				continue // the server sends neither pings nor fragments
			case ws.OpText:
				codec = wire.JSON
			}
		} else {
			var n [4]byte
			if _, err := io.ReadFull(r.br, n[:]); err != nil {
				return nil, 0, err
			}
			l := binary.BigEndian.Uint32(n[:])
			if l > rawMaxFrame {
				return nil, 0, errors.New("bench: frame too large")
			}
			if cap(r.in) < int(l) {
				r.in = make([]byte, l)
			}
			p = r.in[:l]
			if _, err := io.ReadFull(r.br, p); err != nil {
				return nil, 0, err
			}
		}
		return p, codec, nil
	}
}

// close says goodbye (a WebSocket close frame) and closes the socket.
func (r *rawConn) close() {
	if r.ws {
		r.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = r.writeWS(ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
		_ = r.flush()
	}
	r.conn.Close()
}
