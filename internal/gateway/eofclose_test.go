package gateway

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/parleyim/parley/wire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A client that half-closes while frames written to it are still in flight
// (it has not read them) must still get them all and then a clean EOF: the
// close that follows its EOF must not be abortive (an RST, as SO_LINGER 0
// would send, discards what the kernel has not yet delivered).
func TestEOFCloseKeepsUnacknowledgedFrames(t *testing.T) {
	tg := startGW(t, Config{}, false)
	cl := dialTCP(t, tg.tcpAddr)
	// A small receive window, so the server's frames stay unacknowledged.
	if err := cl.nc.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	auth(t, cl, "halfclose")
	sc := tg.connFor(t, "halfclose")
	o := wire.NewOutbound(&pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: &pb.Message{Payload: make([]byte, 4<<10)}}})
	const frames = 32 // 128 KiB: more than the window takes, less than the server's send buffer
	for range frames {
		if !sc.Send(o) {
			t.Fatal("send refused")
		}
	}
	// Every frame handed to the kernel: none can be dropped from the queue
	// by the close that follows the EOF.
	eventually(t, "frames written", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.queue) == 0 && sc.inflight == 0 && !sc.backlog
	})
	if err := cl.nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "server close", func() bool { _, ok := tg.h.closeCode(sc.ID()); return ok })
	got := 0
	for {
		f, err := cl.recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after %d of %d frames: %v (want a clean EOF)", got, frames, err)
			}
			break
		}
		if f.GetMessage() != nil {
			got++
		}
	}
	if got != frames {
		t.Fatalf("got %d of %d frames", got, frames)
	}
}
