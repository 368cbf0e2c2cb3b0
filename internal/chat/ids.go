package chat

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// idEpochMs is 2025-01-01T00:00:00Z; message ids count milliseconds from it.
const idEpochMs = 1735689600000

// idGen makes message ids unique across nodes and restarts without storage:
// 41 bits of milliseconds, 10 bits of node id, 12 bits of counter. When more
// than 4096 ids are needed in one millisecond it borrows from the next one.
// Not safe for concurrent use (the committer owns it).
type idGen struct {
	node   uint64
	lastMs int64
	count  uint64
}

func (g *idGen) next(nowMs int64) uint64 {
	if nowMs > g.lastMs {
		g.lastMs, g.count = nowMs, 0
	} else {
		g.count++
		if g.count >= 4096 {
			g.lastMs, g.count = g.lastMs+1, 0
		}
	}
	return uint64(g.lastMs-idEpochMs)<<22 | g.node<<12 | g.count
}

func newMessageOutbound(m *pb.Message) *wire.Outbound {
	if m.SearchText != "" {
		// Search text is the server's to search, never sent back to clients.
		m = proto.CloneOf(m)
		m.SearchText = ""
	}
	return wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: m}})
}

func newReceiptOutbound(r *pb.Receipt) *wire.Outbound {
	return wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Receipt{Receipt: r}})
}
