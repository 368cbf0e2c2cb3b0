package gateway

import (
	"sync/atomic"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Stats is a snapshot of a Gateway's counters. Counters only grow; Open*
// are current values.
type Stats struct {
	// Accepted counts connections taken into service, by any transport.
	Accepted    uint64
	AcceptedWS  uint64
	AcceptedTCP uint64
	// Open is the number of connections not yet closed (same as Len).
	Open    int
	OpenWS  int
	OpenTCP int
	// Closed counts connections whose HandleClose has been called, by the
	// code passed to it. DISCONNECT_CODE_UNSPECIFIED means the peer closed
	// the connection or its socket failed.
	Closed map[pb.DisconnectCode]uint64
	// SlowClosed counts connections closed with DISCONNECT_CODE_SLOW because
	// their send queue passed a cap or a write took longer than WriteTimeout.
	SlowClosed uint64
	// FramesIn counts client frames delivered to the Handler plus WebSocket
	// control frames received.
	FramesIn uint64
	// FramesOut counts server frames handed to sockets (Outbounds, not
	// WebSocket control frames).
	FramesOut uint64
	// Writes counts write calls on sockets. Writes < FramesOut means frames
	// were coalesced.
	Writes uint64
	// Panics counts Handler panics recovered.
	Panics uint64
	// ProtocolErrors counts connections refused for a malformed, oversized
	// or unknown frame or a WebSocket framing violation.
	ProtocolErrors uint64
	// OversizeFrames counts frames refused for exceeding MaxFrameBytes (also
	// counted in ProtocolErrors).
	OversizeFrames uint64
	// RateLimited counts connections refused by the per-IP connection rate.
	RateLimited uint64
	// PushTaken and PushRefused count best-effort frames (pushes) queued on
	// a connection, and refused by one because its queue was at half of a
	// cap (the connection stays open).
	PushTaken   uint64
	PushRefused uint64
	// Refused counts new connections refused by the caps on
	// unauthenticated connections and the descriptor reserve, by reason
	// (indexed by Refusal; Refused[Admitted] is 0).
	Refused [numRefusals]uint64
	// Unauthenticated is the number of open connections not yet authenticated.
	Unauthenticated int
}

// counters are the live, atomically updated values behind Stats.
type counters struct {
	accepted, acceptedWS, acceptedTCP atomic.Uint64
	open, openWS, openTCP             atomic.Int64
	closed                            [16]atomic.Uint64 // index: DisconnectCode, clamped
	slowClosed                        atomic.Uint64
	framesIn, framesOut, writes       atomic.Uint64
	panics, protocolErrors, oversize  atomic.Uint64
	rateLimited                       atomic.Uint64
	pushTaken, pushRefused            atomic.Uint64
	refused                           [numRefusals]atomic.Uint64
}

// codeSlot maps a code to its counter; codes past the array share the last
// slot (the catalogue has 11 today).
func codeSlot(code pb.DisconnectCode) int {
	i := int(code)
	if i < 0 || i >= 16 {
		i = 15
	}
	return i
}

func (s *counters) snapshot() Stats {
	st := Stats{
		Accepted:       s.accepted.Load(),
		AcceptedWS:     s.acceptedWS.Load(),
		AcceptedTCP:    s.acceptedTCP.Load(),
		Open:           int(s.open.Load()),
		OpenWS:         int(s.openWS.Load()),
		OpenTCP:        int(s.openTCP.Load()),
		Closed:         make(map[pb.DisconnectCode]uint64),
		SlowClosed:     s.slowClosed.Load(),
		FramesIn:       s.framesIn.Load(),
		FramesOut:      s.framesOut.Load(),
		Writes:         s.writes.Load(),
		Panics:         s.panics.Load(),
		ProtocolErrors: s.protocolErrors.Load(),
		OversizeFrames: s.oversize.Load(),
		RateLimited:    s.rateLimited.Load(),
		PushTaken:      s.pushTaken.Load(),
		PushRefused:    s.pushRefused.Load(),
	}
	for i := range s.refused {
		st.Refused[i] = s.refused[i].Load()
	}
	for i := range s.closed {
		if n := s.closed[i].Load(); n > 0 {
			st.Closed[pb.DisconnectCode(i)] = n
		}
	}
	return st
}
