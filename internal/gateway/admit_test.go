package gateway

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/parleyim/parley/wire"
)

// The unauthenticated caps hold on both drivers (Adopt included): past
// them a connection is closed before any frame and counted; authenticating
// or closing frees a place, and closes finalize exactly once.
func TestUnauthCaps(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			tg := startGW(t, Config{MaxUnauth: 3, MaxUnauthPerIP: 2, AuthTimeout: time.Minute}, d.goroutine)
			g := tg.g
			a := dialTCP(t, tg.tcpAddr)
			b := dialWS(t, tg.wsURL, wire.Proto)
			eventually(t, "two unauthenticated", func() bool { return g.Unauthenticated() == 2 })
			if !d.goroutine { // the goroutine driver's test server upgrades before Adopt: no 503
				ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
				_, _, _, err := ws.Dial(ctx, tg.wsURL)
				cancel()
				var se ws.StatusError
				if !errors.As(err, &se) || int(se) != http.StatusServiceUnavailable {
					t.Fatalf("third from the address: %v, want 503", err)
				}
			}
			c := dialTCP(t, tg.tcpAddr)
			if fs := readToEnd(t, c); len(fs) != 0 {
				t.Fatalf("a refused connection got frames %v", fs)
			}
			if got := g.Stats().Refused[RefusedUnauthIP]; got == 0 {
				t.Fatalf("no unauth_ip refusal counted")
			}
			auth(t, a, "alice")
			eventually(t, "the login's place freed", func() bool { return g.Unauthenticated() == 1 })
			e := dialTCP(t, tg.tcpAddr) // a place again
			e.send(pingFrame(1))
			if f, err := e.recv(); err != nil || f.GetPong() == nil {
				t.Fatalf("after the login freed a place: %v %v", f, err)
			}
			b.conn().Close()
			e.conn().Close()
			eventually(t, "every place freed", func() bool { return g.Unauthenticated() == 0 })
			a.send(pingFrame(2))
			if f, err := a.recv(); err != nil || f.GetPong() == nil {
				t.Fatalf("the authenticated connection: %v %v", f, err)
			}
		})
	}
}
