//go:build linux

package gateway

import (
	"errors"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// poller is one epoll set over the connections' fds, edge-triggered: an fd
// is added once and reports each arrival of data, so a read costs no
// epoll_ctl. A worker reads until the socket is drained; an event for a
// connection whose read side is taken (or paused) is remembered on the
// connection (Conn.readAgain), and the reader then re-arms with
// EPOLL_CTL_MOD, which reports the fd again if it is still readable. The
// event data carries the connection id (never reused), not the fd, so a
// stale event for a closed and reused fd finds no connection.
type poller struct {
	epfd int
	evfd int // eventfd with id 0: wakes the loop to stop

	mu     sync.RWMutex
	closed bool // guarded by mu: after close, epfd may be another file
}

const pollEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET

func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, err
	}
	return &poller{epfd: epfd, evfd: evfd}, nil
}

// wait calls ready for each connection id reported, until wake is called.
func (p *poller) wait(ready func(id uint64)) {
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		for i := range n {
			id := uint64(uint32(events[i].Fd)) | uint64(uint32(events[i].Pad))<<32
			if id == 0 {
				return
			}
			ready(id)
		}
	}
}

func (p *poller) wake() {
	var one = [8]byte{1}
	_, _ = unix.Write(p.evfd, one[:])
}

func (p *poller) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		unix.Close(p.epfd)
		unix.Close(p.evfd)
	}
}

// arm adds c's fd (first), or re-arms it: a MOD reports it again at once if
// it is readable.
func (p *poller) arm(c *Conn, first bool) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	op := unix.EPOLL_CTL_MOD
	if first {
		op = unix.EPOLL_CTL_ADD
	}
	ev := unix.EpollEvent{Events: pollEvents, Fd: int32(uint32(c.id)), Pad: int32(uint32(c.id >> 32))}
	var err error
	// Control holds the fd open, so it cannot be closed and reused meanwhile.
	cerr := c.raw.Control(func(fd uintptr) {
		err = unix.EpollCtl(p.epfd, op, int(fd), &ev)
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// pollable returns the RawConn of connections whose bytes epoll sees as they
// are (no TLS or other layer in between), else nil.
func pollable(nc net.Conn) syscall.RawConn {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// readRaw does one non-blocking read. n == 0 with a nil error is EOF.
func readRaw(raw syscall.RawConn, b []byte) (n int, err error) {
	cerr := raw.Read(func(fd uintptr) bool {
		for {
			n, err = unix.Read(int(fd), b)
			if err != unix.EINTR {
				break
			}
		}
		return true // never wait in the runtime poller: epoll tells us when
	})
	if n < 0 {
		n = 0
	}
	if cerr != nil {
		return n, cerr
	}
	return n, err
}

// writeRaw does one non-blocking write.
func writeRaw(raw syscall.RawConn, b []byte) (n int, err error) {
	cerr := raw.Write(func(fd uintptr) bool {
		for {
			n, err = unix.Write(int(fd), b)
			if err != unix.EINTR {
				break
			}
		}
		return true
	})
	if n < 0 {
		n = 0
	}
	if cerr != nil {
		return n, cerr
	}
	return n, err
}

func isWouldBlock(err error) bool {
	return errors.Is(err, unix.EAGAIN)
}

// drain reads away pending input without blocking, so that closing the
// socket sends FIN rather than RST (which would discard our last frames).
func drain(raw syscall.RawConn) {
	var buf [4096]byte
	for range 16 {
		n, err := readRaw(raw, buf[:])
		if err != nil || n < len(buf) {
			return
		}
	}
}
