package wire

import (
	"encoding/binary"
	"errors"
)

// TCPHeaderSize is the size of the big-endian length that precedes every frame on TCP.
const TCPHeaderSize = 4

// ErrFrameTooLarge reports a frame whose declared length exceeds the limit.
// The length is checked before anything is allocated for the frame.
var ErrFrameTooLarge = errors.New("wire: frame too large")

// AppendTCPFrame appends the length prefix and payload to dst.
func AppendTCPFrame(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// ParseTCPFrame looks for one complete frame at the start of buf. It returns the
// payload (aliasing buf) and the bytes consumed, or n == 0 when buf holds only
// part of a frame. A declared length above max is ErrFrameTooLarge.
func ParseTCPFrame(buf []byte, max int) (payload []byte, n int, err error) {
	if len(buf) < TCPHeaderSize {
		return nil, 0, nil
	}
	size := binary.BigEndian.Uint32(buf)
	if uint64(size) > uint64(max) {
		return nil, 0, ErrFrameTooLarge
	}
	total := TCPHeaderSize + int(size)
	if len(buf) < total {
		return nil, 0, nil
	}
	return buf[TCPHeaderSize:total], total, nil
}
