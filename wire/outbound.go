package wire

import (
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Outbound is one server frame on its way to one or many connections. It is
// encoded lazily and at most once per codec, so a message fanned out to
// thousands of receivers is marshalled once, not once per receiver.
// An Outbound is immutable once created and safe for concurrent use.
type Outbound struct {
	frame *pb.ServerFrame // nil when built from bytes until JSON is needed
	// bestEffort marks a frame a connection may refuse when its queue is
	// backed up (a push: not stored, nothing to catch up), instead of being
	// closed as slow.
	bestEffort bool

	protoOnce sync.Once
	protoEnc  []byte
	jsonOnce  sync.Once
	jsonEnc   []byte
}

// NewOutbound wraps a frame. The caller must not modify f afterwards. A
// Push frame is best effort (see BestEffort).
func NewOutbound(f *pb.ServerFrame) *Outbound {
	_, push := f.GetBody().(*pb.ServerFrame_Push)
	return &Outbound{frame: f, bestEffort: push}
}

// OutboundFromProto wraps an already protobuf-encoded server frame (for example
// one received from another node). b must not be modified afterwards.
func OutboundFromProto(b []byte) *Outbound {
	o := &Outbound{protoEnc: b, bestEffort: isPush(b)}
	o.protoOnce.Do(func() {})
	return o
}

// BestEffort reports whether the frame is a push: a connection whose queue
// is backed up refuses it (and says so) rather than being closed as slow,
// since nothing stored depends on it. Everything else (messages, events,
// replies) either fits the queue or closes the connection as slow, and the
// client catches up by sync.
func (o *Outbound) BestEffort() bool { return o.bestEffort }

// pushField is ServerFrame.push's field number.
const pushField = 30

// isPush reports whether b, an encoded ServerFrame, holds a Push: it walks
// the frame's top-level fields (an id and the body) without decoding them.
func isPush(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		if num == pushField {
			return typ == protowire.BytesType
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return false
}

// Offered is what a connection did with a best-effort frame.
type Offered uint8

const (
	// Taken: queued for the client.
	Taken Offered = iota
	// Refused: not queued, because frames already queued for the client
	// take up the share of its send queue best-effort frames may use. The
	// connection stays open.
	Refused
	// Gone: the connection is closing or closed.
	Gone
)

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
