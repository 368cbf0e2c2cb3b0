// Package cluster encodes and decodes what one node tells the others (the
// schema is proto/parley/cluster/v1/cluster.proto, its Go code clusterpb).
// An encoded envelope is the byte Version followed by a protobuf
// clusterpb.Envelope; what it is about (a user, group, room, node) travels
// beside it, in the NATS subject.
//
// Frames are most of the traffic, so they have a path of their own that
// builds no message: AppendFrame writes the bytes proto.Marshal would, and
// a Decoder reads them into storage it reuses, the frame aliasing the input.
//
// A Decoder also reads the untyped layout of the previous release, so nodes
// of both releases can run together during a rolling upgrade; it goes with
// the next release.
package cluster

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/cluster/clusterpb"
)

// Version is the first byte of an envelope in this layout. The previous
// layout began with its kind: 0 to 8, or 255.
const Version byte = 0x81

// ErrMalformed is Decode's error for bytes that are not an envelope.
var ErrMalformed = errors.New("cluster: malformed envelope")

// Field numbers the frame path writes and reads by hand; a test holds them
// to the generated code.
const (
	fieldEnvelopeFrame = 1  // Envelope.frame
	fieldTraceparent   = 16 // Envelope.traceparent
	fieldFrameExcept   = 1  // Frame.except_session
	fieldFrameSkip     = 2  // Frame.skip_users
	fieldFrameBytes    = 3  // Frame.frame
)

// Append appends m, encoded, to dst.
func Append(dst []byte, m *clusterpb.Envelope) ([]byte, error) {
	if m.GetEvent() == nil {
		return dst, errors.New("cluster: envelope without an event")
	}
	return proto.MarshalOptions{}.MarshalAppend(append(dst, Version), m)
}

// Encode returns m encoded (for rare events; frames: AppendFrame).
func Encode(m *clusterpb.Envelope) ([]byte, error) { return Append(nil, m) }

// AppendFrame appends the encoding of an Envelope holding
// Frame{except_session: except, frame: frame} to dst: the same bytes as
// Append, without a message to build.
func AppendFrame(dst []byte, except string, frame []byte) []byte {
	return AppendTracedFrame(dst, except, frame, "")
}

// AppendTracedFrame is AppendFrame with the Envelope's traceparent set
// (when not "").
func AppendTracedFrame(dst []byte, except string, frame []byte, traceparent string) []byte {
	n := len(frame)
	inner := protowire.SizeTag(fieldFrameBytes) + protowire.SizeBytes(n)
	if except != "" {
		inner += protowire.SizeTag(fieldFrameExcept) + protowire.SizeBytes(len(except))
	}
	dst = append(dst, Version)
	dst = protowire.AppendTag(dst, fieldEnvelopeFrame, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(inner))
	if except != "" {
		dst = protowire.AppendTag(dst, fieldFrameExcept, protowire.BytesType)
		dst = protowire.AppendString(dst, except)
	}
	dst = protowire.AppendTag(dst, fieldFrameBytes, protowire.BytesType)
	dst = protowire.AppendBytes(dst, frame)
	if traceparent != "" {
		dst = protowire.AppendTag(dst, fieldTraceparent, protowire.BytesType)
		dst = protowire.AppendString(dst, traceparent)
	}
	return dst
}

// Legacy reports whether b is in the previous release's layout (a question
// in it wants its answer in it too).
func Legacy(b []byte) bool { return len(b) > 0 && b[0] != Version }

// Decoder decodes envelopes. One goroutine uses it at a time.
type Decoder struct {
	// A frame decodes into these, so decoding one allocates nothing but
	// its strings; they are overwritten by the next Decode.
	env   clusterpb.Envelope
	event clusterpb.Envelope_Frame
	frame clusterpb.Frame
}

// Decode decodes b, in either layout. A frame's message is the Decoder's
// own (valid until the next Decode) and its bytes alias b; any other event
// is a new message.
func (d *Decoder) Decode(b []byte) (*clusterpb.Envelope, error) {
	if len(b) == 0 {
		return nil, ErrMalformed
	}
	if b[0] != Version {
		return d.decodeLegacy(b)
	}
	if m := d.decodeFrame(b[1:]); m != nil {
		return m, nil
	}
	m := new(clusterpb.Envelope)
	if err := proto.Unmarshal(b[1:], m); err != nil || m.Event == nil {
		// No event: empty, or one this release does not know.
		return nil, ErrMalformed
	}
	return m, nil
}

// decodeFrame decodes b if it is an Envelope holding a Frame and nothing
// else this path does not know (then nil: proto.Unmarshal decides).
func (d *Decoder) decodeFrame(b []byte) *clusterpb.Envelope {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != fieldEnvelopeFrame || typ != protowire.BytesType {
		return nil
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		return nil
	}
	d.env.Traceparent = ""
	if rest := b[n+m:]; len(rest) > 0 {
		// Only a traceparent may follow the frame on this path.
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 || num != fieldTraceparent || typ != protowire.BytesType {
			return nil
		}
		v, m := protowire.ConsumeBytes(rest[n:])
		if m < 0 || n+m != len(rest) || !utf8.Valid(v) {
			return nil
		}
		d.env.Traceparent = string(v)
	}
	f := &d.frame
	f.ExceptSession, f.SkipUsers, f.Frame = "", nil, nil
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		if n < 0 || typ != protowire.BytesType {
			return nil
		}
		v, m := protowire.ConsumeBytes(inner[n:])
		if m < 0 {
			return nil
		}
		inner = inner[n+m:]
		switch num {
		case fieldFrameExcept:
			if !utf8.Valid(v) {
				return nil
			}
			f.ExceptSession = string(v)
		case fieldFrameSkip:
			if !utf8.Valid(v) {
				return nil
			}
			f.SkipUsers = append(f.SkipUsers, string(v))
		case fieldFrameBytes:
			f.Frame = v
		default:
			return nil
		}
	}
	d.event.Frame = f
	d.env.Event = &d.event
	return &d.env
}
