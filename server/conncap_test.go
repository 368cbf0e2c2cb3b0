package server_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// dialFrom opens a raw TCP connection to addr from the loopback address
// src (all of 127/8 answers on Linux loopback).
func dialFrom(t *testing.T, src, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), codec: wire.Proto}
}

// admitted dials from src and waits for the server's verdict: true when it
// kept the connection, false when it refused it (and closed it at once).
func (ts *testServer) admitted(t *testing.T, src string) (*rawConn, bool) {
	t.Helper()
	before := ts.Stats().Gateway
	c := dialFrom(t, src, ts.tcpAddr)
	var kept bool
	eventually(t, "the server's verdict on a connection from "+src, func() bool {
		now := ts.Stats().Gateway
		if now.AcceptedTCP > before.AcceptedTCP {
			kept = true
			return true
		}
		return sum(now.Refused[:]) > sum(before.Refused[:])
	})
	if !kept {
		// Refused: closed at once, nothing written.
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.br.ReadByte(); err == nil {
			t.Fatalf("a refused connection got byte %d", n)
		} else if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a refused connection was not closed")
		}
	}
	return c, kept
}

func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

// BRIEF case 18: connections that have not authenticated are capped, per IP
// (loopback included) and in all; past the caps new ones are refused at
// once and counted, a login from elsewhere still succeeds while the caps
// are full, and closing the held sockets frees their places.
func TestUnauthenticatedConnectionCaps(t *testing.T) {
	const perIP, total = 8, 20
	ts := startServer(t, func(c *server.Config) {
		c.MaxUnauthConns, c.MaxUnauthConnsPerIP = total, perIP
		c.AuthTimeout = time.Minute // the held sockets stay until closed
		c.ConnRatePerIP = -1
	})
	open := func(src string, n int) (kept []*rawConn, refused int) {
		for range n {
			c, ok := ts.admitted(t, src)
			if ok {
				kept = append(kept, c)
			} else {
				refused++
			}
		}
		return kept, refused
	}
	a, refA := open("127.0.0.1", perIP+4)
	b, refB := open("127.0.0.2", perIP+4)
	if len(a) != perIP || refA != 4 || len(b) != perIP || refB != 4 {
		t.Fatalf("per IP: 127.0.0.1 kept %d refused %d, 127.0.0.2 kept %d refused %d; want %d kept and 4 refused each",
			len(a), refA, len(b), refB, perIP)
	}

	// A login from another address gets in and authenticates meanwhile.
	login := dialFrom(t, "127.0.0.4", ts.tcpAddr)
	if f := login.auth(ts.mint(t, "alice"), "a1", "phone"); f.GetAuthOk() == nil {
		t.Fatalf("login while unauthenticated sockets are held: %v", f)
	}
	if got := ts.Stats().Gateway.Unauthenticated; got != 2*perIP {
		t.Fatalf("%d unauthenticated, want %d (the login no longer counts)", got, 2*perIP)
	}

	// The total cap.
	c3, ref3 := open("127.0.0.3", total-2*perIP+2)
	if len(c3) != total-2*perIP || ref3 != 2 {
		t.Fatalf("total: 127.0.0.3 kept %d refused %d; want %d kept, 2 refused", len(c3), ref3, total-2*perIP)
	}
	// A WebSocket upgrade past the cap is answered 503.
	d := ws.Dialer{NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}
		return nd.DialContext(ctx, network, addr)
	}}
	ctx := ctx10(t)
	if _, _, _, err := d.Dial(ctx, ts.wsURL); !isStatus(err, http.StatusServiceUnavailable) {
		t.Fatalf("WebSocket upgrade past the cap: %v, want HTTP 503", err)
	}

	_, text := scrape(t, ts, testAPIKey)
	if v := metricValue(t, text, `parley_connections_refused_total{reason="unauth_ip"}`); v != 8 {
		t.Fatalf("unauth_ip refusals %v, want 8", v)
	}
	if v := metricValue(t, text, `parley_connections_refused_total{reason="unauth_total"}`); v != 3 {
		t.Fatalf("unauth_total refusals %v, want 3 (2 TCP, 1 WebSocket)", v)
	}

	// Closing the held sockets frees their places.
	for _, c := range a {
		c.nc.Close()
	}
	eventually(t, "places freed", func() bool { return ts.Stats().Gateway.Unauthenticated == total-perIP })
	if _, ok := ts.admitted(t, "127.0.0.1"); !ok {
		t.Fatal("a connection from 127.0.0.1 refused after its sockets closed")
	}
	if _, ok := ts.admitted(t, "127.0.0.3"); !ok {
		t.Fatal("a connection from 127.0.0.3 refused after places were freed")
	}
	// An authenticated session keeps working throughout.
	login.send(&pb.ClientFrame{Id: 2, Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}})
	if f := login.read(); f.GetPong() == nil {
		t.Fatalf("ping on the logged-in connection: %v", f)
	}
}

func isStatus(err error, code int) bool {
	var se ws.StatusError
	return errors.As(err, &se) && int(se) == code
}
