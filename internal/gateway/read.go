package gateway

import (
	"bytes"
	"encoding/binary"
	"runtime/debug"

	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// consume parses every complete frame in data and delivers them in order.
// Only the bytes of a trailing incomplete frame are kept, in c.partial.
// It is called only by the owner of the read side; data may be a worker's
// buffer, so nothing may alias it afterwards.
// It reports whether reading is paused for backpressure; the unparsed bytes
// are then kept in c.partial too.
func (c *Conn) consume(data []byte) (paused bool) {
	if c.partial != nil {
		c.partial = append(c.partial, data...)
		data = c.partial
	}
	off := 0
	for k := 1; off < len(data) && !c.closingF.Load(); k++ {
		n := c.parseOne(data[off:])
		if n == 0 {
			break
		}
		off += n
		if k%16 == 0 && c.pauseIfBacklogged() {
			paused = true
			break
		}
	}
	if c.closingF.Load() {
		c.partial, c.frag = nil, nil
		return false
	}
	if !paused {
		paused = c.pauseIfBacklogged()
	}
	rest := data[off:]
	switch {
	case len(rest) == 0:
		c.partial = nil
	case c.partial != nil && cap(c.partial) <= 2*len(rest)+512:
		c.partial = c.partial[:copy(c.partial, rest)] // copy is memmove-safe
	default:
		// Exactly what arrived: never sized by the declared length.
		c.partial = bytes.Clone(rest)
	}
	return paused
}

// parseOne handles one frame at the start of b and returns its length, or 0
// if b holds only part of a frame or the frame closed the connection.
func (c *Conn) parseOne(b []byte) int {
	max := c.g.cfg.MaxFrameBytes
	if c.transport == TransportTCP {
		payload, n, err := wire.ParseTCPFrame(b, max)
		if err != nil {
			c.protocolError(pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, 0)
			return 0
		}
		if n > 0 {
			c.touch()
			c.deliver(wire.Proto, payload)
		}
		return n
	}

	limit := max
	if c.fragOp != 0 {
		limit = max - len(c.frag)
	}
	f, n, err := nextWSFrame(b, limit)
	switch {
	case err == errWSTooLarge:
		c.setCodec(f.op)
		c.protocolError(pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, 0)
		return 0
	case err != nil:
		c.protocolError(pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, 0)
		return 0
	case n == 0:
		return 0
	}
	c.touch()
	switch f.op {
	case opPing:
		c.g.stats.framesIn.Add(1)
		c.queuePong(f.payload)
	case opPong:
		c.g.stats.framesIn.Add(1)
	case opClose:
		c.g.stats.framesIn.Add(1)
		// The client is leaving: answer its close, send no Disconnect.
		c.closeQueued(pb.DisconnectCode_DISCONNECT_CODE_UNSPECIFIED, nil, echoCloseStatus(f.payload))
		return 0
	case opText, opBinary:
		if c.fragOp != 0 { // a new message inside a fragmented one
			c.protocolError(pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, 0)
			return 0
		}
		if f.fin {
			c.deliverData(f.op, f.payload)
		} else {
			c.fragOp = f.op
			c.frag = append(make([]byte, 0, len(f.payload)), f.payload...)
		}
	case opContinuation:
		if c.fragOp == 0 {
			c.protocolError(pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, 0)
			return 0
		}
		c.frag = append(c.frag, f.payload...)
		if f.fin {
			op, p := c.fragOp, c.frag
			c.fragOp, c.frag = 0, nil
			c.deliverData(op, p)
		}
	}
	return n
}

// echoCloseStatus picks the status of the close frame answering a client's
// close: its own status when valid to send back, else 1000 (normal).
func echoCloseStatus(p []byte) uint16 {
	if len(p) < 2 {
		return 1000
	}
	s := binary.BigEndian.Uint16(p)
	switch {
	case s >= 1000 && s <= 1003, s >= 1007 && s <= 1014, s >= 3000 && s <= 4999:
		return s
	}
	return 1002
}

// touch records activity for the idle sweep.
func (c *Conn) touch() { c.lastRecv.Store(c.g.clock.Load()) }

// setCodec fixes the reply codec from the first data frame's opcode.
func (c *Conn) setCodec(op byte) {
	if c.codecSet || (op != opText && op != opBinary) {
		return
	}
	c.codecSet = true
	if op == opBinary {
		c.codec.Store(uint32(wire.Proto))
	}
}

func (c *Conn) deliverData(op byte, payload []byte) {
	c.setCodec(op)
	codec := wire.Proto
	if op == opText {
		codec = wire.JSON
	}
	c.deliver(codec, payload)
}

// deliver decodes one frame and hands it to the Handler. The decoded frame
// copies what it keeps, so payload may be reused afterwards.
func (c *Conn) deliver(codec wire.Codec, payload []byte) {
	f := &pb.ClientFrame{}
	if wire.DecodeClient(codec, payload, f) != nil {
		c.protocolError(pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, 0)
		return
	}
	if f.Body == nil {
		c.protocolError(pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME, f.Id)
		return
	}
	c.g.stats.framesIn.Add(1)
	c.callHandler(f)
}

// callHandler runs HandleFrame; a panic closes only this connection.
func (c *Conn) callHandler(f *pb.ClientFrame) {
	defer func() {
		if r := recover(); r != nil {
			c.g.stats.panics.Add(1)
			c.g.log.Error("gateway: handler panic", "conn", c.id, "panic", r, "stack", string(debug.Stack()))
			c.Close(pb.DisconnectCode_DISCONNECT_CODE_INTERNAL, "internal error")
		}
	}()
	c.g.h.HandleFrame(c, f)
}

// protocolError answers bad input: Error{code} then Disconnect{PROTOCOL_ERROR},
// then the connection closes.
func (c *Conn) protocolError(code pb.ErrorCode, id uint64) {
	errFrame := wire.NewOutbound(errcode.Frame(id, code))
	if c.beginClose(pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR, "protocol error", errFrame) {
		c.g.stats.protocolErrors.Add(1)
		if code == pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE {
			c.g.stats.oversize.Add(1)
		}
	}
}

// queuePong queues the answer to a ping, ahead of queued data frames.
func (c *Conn) queuePong(p []byte) {
	c.mu.Lock()
	if c.closing || len(c.ctl)+len(p)+2 > maxCtlBytes {
		c.mu.Unlock()
		return
	}
	c.ctl = appendWSHeader(c.ctl, opPong, len(p))
	c.ctl = append(c.ctl, p...)
	sched := !c.flushing
	c.flushing = true
	c.mu.Unlock()
	if sched {
		c.g.flushQ.push(c)
	}
}
