//go:build !linux

package server

import (
	"context"
	"net"
)

// listenTCP opens the raw TCP listener: one socket (SO_REUSEPORT's spread
// over several accept loops is Linux's).
func listenTCP(lc net.ListenConfig, addr string) ([]net.Listener, error) {
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	return []net.Listener{ln}, nil
}
