package server

import (
	"context"
	"net"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenTCP opens the raw TCP listener: on Linux, one socket per core
// (GOMAXPROCS, at most 8) bound to the same address with SO_REUSEPORT, so
// the kernel spreads new connections over as many accept loops and no one
// loop's accept4 (and the netpoll registration after it) is the ceiling on
// logins per second. The first socket's port is taken for the others, so
// "host:0" works. Without SO_REUSEPORT (an old kernel), one listener.
func listenTCP(lc net.ListenConfig, addr string) ([]net.Listener, error) {
	n := min(runtime.GOMAXPROCS(0), 8)
	if n <= 1 {
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		if err != nil {
			return nil, err
		}
		return []net.Listener{ln}, nil
	}
	lc.Control = func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}
	first, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		// SO_REUSEPORT refused: fall back to one plain listener.
		lc.Control = nil
		ln, err2 := lc.Listen(context.Background(), "tcp", addr)
		if err2 != nil {
			return nil, err2
		}
		return []net.Listener{ln}, nil
	}
	lns := []net.Listener{first}
	bound := first.Addr().String()
	for len(lns) < n {
		ln, err := lc.Listen(context.Background(), "tcp", bound)
		if err != nil {
			break // keep the ones opened: fewer loops, same service
		}
		lns = append(lns, ln)
	}
	return lns, nil
}
