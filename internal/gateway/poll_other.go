//go:build !linux

package gateway

import (
	"errors"
	"net"
	"syscall"
)

// poller is not available here: every connection is served by the
// goroutine driver and written by blocking writes under WriteTimeout.
type poller struct{}

func newPoller() (*poller, error)       { return nil, nil }
func (p *poller) wait(func(uint64))     {}
func (p *poller) wake()                 {}
func (p *poller) close()                {}
func (p *poller) arm(*Conn, bool) error { return errors.ErrUnsupported }
func pollable(net.Conn) syscall.RawConn { return nil }
func drain(syscall.RawConn)             {}
func isWouldBlock(error) bool           { return false }
func readRaw(syscall.RawConn, []byte) (int, error) {
	return 0, errors.ErrUnsupported
}
func writeRaw(syscall.RawConn, []byte) (int, error) {
	return 0, errors.ErrUnsupported
}
