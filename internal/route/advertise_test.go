package route

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/wire"
)

type nopLocal struct{}

func (nopLocal) DeliverLocal([]string, *wire.Outbound, string, *wire.Hold) int { return 0 }

// forwarder is a TCP port forwarder, standing for NAT or a port mapping in
// front of a node's route listener.
type forwarder struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn // guarded by mu
}

func startForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	return f
}

// freeRoutePort is a port free on both 127.0.0.1 and 127.0.0.2.
func freeRoutePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l2, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("127.0.0.2 is not usable here: %v", err)
		}
		port := l2.Addr().(*net.TCPAddr).Port
		l1, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		l2.Close()
		if err == nil {
			l1.Close()
			return port
		}
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return 0
}

func startEmbeddedNode(t *testing.T, id, listen, advertise string, routes ...string) *NATS {
	t.Helper()
	r, err := NewNATS(NATSConfig{NodeID: id, ClusterListen: listen, ClusterAdvertise: advertise, Routes: routes,
		ClusterSecret: "route-test-secret-0123456789", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nopLocal{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func waitRoutes(t *testing.T, what string, want int, nodes ...*NATS) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range nodes {
		for n.Routes() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: node %s has %d routes, want %d", what, n.cfg.NodeID, n.Routes(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A node behind a port mapping: its route listener (127.0.0.2:P) is reached
// by the others only through a forwarder (127.0.0.1:F), which node B's routes
// name. Node C knows only B and learns of A by route gossip; it can reach A
// only if A advertises the forwarder's address (told A's real port at the
// address B sees, 127.0.0.1:P, it finds nothing there).
func TestClusterAdvertiseThroughPortMapping(t *testing.T) {
	pA := freeRoutePort(t)
	pB, pC := freeRoutePort(t), freeRoutePort(t)
	fwd := startForwarder(t, fmt.Sprintf("127.0.0.2:%d", pA))
	b := startEmbeddedNode(t, "2", fmt.Sprintf("127.0.0.1:%d", pB), "", "nats://"+fwd.ln.Addr().String())
	c := startEmbeddedNode(t, "3", fmt.Sprintf("127.0.0.1:%d", pC), "", fmt.Sprintf("nats://127.0.0.1:%d", pB))
	waitRoutes(t, "B and C route to each other", 1, b, c)
	// A joins last, so the others learn of it by gossip (B tells C).
	a := startEmbeddedNode(t, "1", fmt.Sprintf("127.0.0.2:%d", pA), fwd.ln.Addr().String())
	waitRoutes(t, "every node routes to the two others", 2, a, b, c)
}
