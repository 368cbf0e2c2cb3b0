package gateway

import (
	"testing"
	"time"

	"github.com/gobwas/ws"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// A WebSocket client that has sent no data frame has not told the server
// its codec; a browser speaking JSON cannot read a binary protobuf frame, so
// the AUTH_TIMEOUT disconnect comes as JSON text. Once a binary frame
// arrived, the client's protobuf is used.
func TestAuthTimeoutWSJSONBeforeFirstFrame(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{AuthTimeout: 100 * time.Millisecond}, d.goroutine)
			c := dialWS(t, tg.wsURL, wire.JSON)
			fs := readToEnd(t, c)
			if len(fs) != 1 || fs[0].GetDisconnect().GetCode() != pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT || c.lastOp != ws.OpText {
				t.Fatalf("silent WebSocket got frames %v, last opcode %v; want one JSON text disconnect AUTH_TIMEOUT", fs, c.lastOp)
			}

			b := dialWS(t, tg.wsURL, wire.Proto)
			b.send(pingFrame(1))
			fs = readToEnd(t, b)
			if len(fs) != 2 || fs[1].GetDisconnect().GetCode() != pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT || b.lastOp != ws.OpBinary {
				t.Fatalf("binary WebSocket got frames %v, last opcode %v; want pong and a binary disconnect", fs, b.lastOp)
			}
		})
	}
}
