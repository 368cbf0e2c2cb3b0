package gateway

import (
	"encoding/binary"
	"errors"

	"github.com/gobwas/ws"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// WebSocket opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// maxControlPayload is the RFC 6455 limit on control frame payloads.
const maxControlPayload = 125

var (
	errWSProtocol = errors.New("gateway: websocket protocol violation")
	errWSTooLarge = errors.New("gateway: websocket frame too large")
)

// wsFrame is one parsed client frame. payload aliases the input, unmasked.
type wsFrame struct {
	fin     bool
	op      byte
	payload []byte
}

// nextWSFrame parses one client (masked) frame at the start of b and unmasks
// its payload in place. n == 0 with a nil error means b holds only part of a
// frame. limit is the payload budget left for a data frame: MaxFrameBytes, or
// what remains of it while a fragmented message is being reassembled. The
// declared length is checked against limit as soon as the header is
// complete, before the payload has arrived and before anything is allocated.
// On errWSTooLarge f.op is set so that the caller can pick a reply codec.
func nextWSFrame(b []byte, limit int) (f wsFrame, n int, err error) {
	if len(b) < 2 {
		return f, 0, nil
	}
	b0, b1 := b[0], b[1]
	f.fin = b0&0x80 != 0
	f.op = b0 & 0x0f
	if b0&0x70 != 0 { // RSV bits: no extension is negotiated
		return f, 0, errWSProtocol
	}
	if b1&0x80 == 0 { // client frames must be masked (§5.1)
		return f, 0, errWSProtocol
	}
	hl := 2
	size := uint64(b1 & 0x7f)
	switch size {
	case 126:
		if len(b) < 4 {
			return f, 0, nil
		}
		size = uint64(binary.BigEndian.Uint16(b[2:]))
		hl = 4
	case 127:
		if len(b) < 10 {
			return f, 0, nil
		}
		size = binary.BigEndian.Uint64(b[2:])
		if size>>63 != 0 {
			return f, 0, errWSProtocol
		}
		hl = 10
	}
	switch {
	case f.op >= opClose:
		if f.op > opPong || !f.fin || size > maxControlPayload {
			return f, 0, errWSProtocol
		}
	case f.op > opBinary:
		return f, 0, errWSProtocol
	case size > uint64(max(limit, 0)):
		return f, 0, errWSTooLarge
	}
	hl += 4
	if len(b) < hl {
		return f, 0, nil
	}
	total := hl + int(size)
	if len(b) < total {
		return f, 0, nil
	}
	f.payload = b[hl:total]
	ws.Cipher(f.payload, [4]byte(b[hl-4:hl]), 0)
	return f, total, nil
}

// appendWSHeader appends an unmasked server frame header with FIN set.
func appendWSHeader(dst []byte, op byte, size int) []byte {
	dst = append(dst, 0x80|op)
	switch {
	case size < 126:
		return append(dst, byte(size))
	case size <= 0xffff:
		dst = append(dst, 126)
		return binary.BigEndian.AppendUint16(dst, uint16(size))
	default:
		dst = append(dst, 127)
		return binary.BigEndian.AppendUint64(dst, uint64(size))
	}
}

// wsCloseStatus is the RFC 6455 status sent in the close frame that follows
// a Disconnect frame.
func wsCloseStatus(code pb.DisconnectCode) uint16 {
	switch code {
	case pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR:
		return 1002
	case pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN:
		return 1001
	case pb.DisconnectCode_DISCONNECT_CODE_INTERNAL:
		return 1011
	default:
		return 1000
	}
}

// appendWSClose appends a close frame carrying status.
func appendWSClose(dst []byte, status uint16) []byte {
	dst = appendWSHeader(dst, opClose, 2)
	return binary.BigEndian.AppendUint16(dst, status)
}
