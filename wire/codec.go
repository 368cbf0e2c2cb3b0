// Package wire holds the byte-level forms of Parley frames shared by the server
// and the Go SDK: the protobuf and JSON codecs, TCP length-prefixed framing, and
// Outbound, a server frame encoded at most once per codec however many
// connections it is written to.
package wire

import (
	"errors"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Codec is the encoding of a frame's bytes.
type Codec uint8

const (
	// Proto is binary protobuf: WebSocket binary messages and TCP frames.
	Proto Codec = iota
	// JSON is the canonical protobuf JSON mapping: WebSocket text messages.
	JSON
)

func (c Codec) String() string {
	if c == JSON {
		return "json"
	}
	return "proto"
}

// ErrMalformed reports bytes that do not decode as a frame.
var ErrMalformed = errors.New("wire: malformed frame")

var (
	jsonIn = protojson.UnmarshalOptions{DiscardUnknown: false}
	// A client ignores what a newer server adds (docs/protocol.md,
	// Versions): within a major version every addition is one it may skip.
	jsonInServer = protojson.UnmarshalOptions{DiscardUnknown: true}
	jsonOut      = protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}
)

// DecodeClient decodes one client frame. Unknown JSON fields are an error;
// unknown protobuf fields are ignored (forward compatibility), but a frame
// without a known body is left with Body == nil for the caller to refuse.
func DecodeClient(c Codec, b []byte, f *pb.ClientFrame) error {
	return decode(c, b, f)
}

// DecodeServer decodes one server frame (used by clients). Unknown fields,
// JSON or protobuf, are ignored: a newer server's additions.
func DecodeServer(c Codec, b []byte, f *pb.ServerFrame) error {
	if c == JSON {
		if jsonInServer.Unmarshal(b, f) != nil {
			return ErrMalformed
		}
		return nil
	}
	return decode(c, b, f)
}

func decode(c Codec, b []byte, m proto.Message) error {
	var err error
	if c == JSON {
		err = jsonIn.Unmarshal(b, m)
	} else {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		return ErrMalformed
	}
	return nil
}

// EncodeServer encodes a server frame.
func EncodeServer(c Codec, f *pb.ServerFrame) ([]byte, error) { return encode(c, f) }

// EncodeClient encodes a client frame (used by clients).
func EncodeClient(c Codec, f *pb.ClientFrame) ([]byte, error) { return encode(c, f) }

// AppendClient appends the protobuf form of f to dst (used by clients on hot paths).
func AppendClient(dst []byte, f *pb.ClientFrame) ([]byte, error) {
	return proto.MarshalOptions{}.MarshalAppend(dst, f)
}

func encode(c Codec, m proto.Message) ([]byte, error) {
	if c == JSON {
		return jsonOut.Marshal(m)
	}
	return proto.Marshal(m)
}
