package wire

import (
	"sync"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Outbound is one server frame on its way to one or many connections. It is
// encoded lazily and at most once per codec, so a message fanned out to
// thousands of receivers is marshalled once, not once per receiver.
// An Outbound is immutable once created and safe for concurrent use.
type Outbound struct {
	frame *pb.ServerFrame // nil when built from bytes until JSON is needed

	protoOnce sync.Once
	protoEnc  []byte
	jsonOnce  sync.Once
	jsonEnc   []byte
}

// NewOutbound wraps a frame. The caller must not modify f afterwards.
func NewOutbound(f *pb.ServerFrame) *Outbound { return &Outbound{frame: f} }

// OutboundFromProto wraps an already protobuf-encoded server frame (for example
// one received from another node). b must not be modified afterwards.
func OutboundFromProto(b []byte) *Outbound {
	o := &Outbound{protoEnc: b}
	o.protoOnce.Do(func() {})
	return o
}

// Frame returns the decoded frame (decoding it if the Outbound was built from bytes).
func (o *Outbound) Frame() *pb.ServerFrame {
	if o.frame == nil {
		f := &pb.ServerFrame{}
		if DecodeServer(Proto, o.protoEnc, f) == nil {
			return f
		}
		return &pb.ServerFrame{}
	}
	return o.frame
}

// Bytes returns the frame encoded with c. The result is shared: do not modify it.
func (o *Outbound) Bytes(c Codec) []byte {
	if c == JSON {
		o.jsonOnce.Do(func() { o.jsonEnc, _ = EncodeServer(JSON, o.Frame()) })
		return o.jsonEnc
	}
	o.protoOnce.Do(func() { o.protoEnc, _ = EncodeServer(Proto, o.frame) })
	return o.protoEnc
}
