package wire

import (
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A client decodes frames of a newer server, which may carry fields it does
// not know (docs/protocol.md, Versions); the server still refuses unknown
// fields in a client's JSON.
func TestUnknownJSONFields(t *testing.T) {
	newer := []byte(`{"id":"1","authOk":{"userId":"alice","protocolVersion":"1.9","fieldFromTheFuture":{"x":1}},"frameFromTheFuture":{}}`)
	var f pb.ServerFrame
	if err := DecodeServer(JSON, newer, &f); err != nil || f.GetAuthOk().GetUserId() != "alice" || f.GetAuthOk().GetProtocolVersion() != "1.9" {
		t.Fatalf("a newer server's frame: %v %v", &f, err)
	}
	var c pb.ClientFrame
	if err := DecodeClient(JSON, []byte(`{"id":"1","ping":{},"extra":1}`), &c); err != ErrMalformed {
		t.Fatalf("a client frame with an unknown field: %v, want ErrMalformed", err)
	}
}
