//go:build linux

package gateway

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

type nopHandler struct{}

func (nopHandler) HandleFrame(*Conn, *pb.ClientFrame)   {}
func (nopHandler) HandleClose(*Conn, pb.DisconnectCode) {}

// BenchmarkIdleConnMemory measures the server-side process memory of idle
// connections. The client ends are raw sockets (no Go objects), so the
// figures are the Gateway's own cost plus the runtime's per-socket state.
// Run it once:
//
//	PARLEY_IDLE_CONNS=9000 go test -run '^$' -bench IdleConnMemory -benchtime 1x ./gateway/
//
// Each connection uses two fds in this process; keep 2×N under the fd limit.
func BenchmarkIdleConnMemory(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("PARLEY_IDLE_CONNS")); err == nil && v > 0 {
		n = v
	}
	for _, tr := range []string{"tcp", "ws"} {
		b.Run(tr, func(b *testing.B) { measureIdle(b, tr, n) })
	}
}

type memSample struct{ heap, runtime, rss uint64 }

func sampleMem() memSample {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var rss uint64
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) > 1 {
			pages, _ := strconv.ParseUint(string(f[1]), 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	// Everything the Go runtime holds in use: heap objects and spans,
	// goroutine stacks, GC metadata, off-heap runtime state (pollDescs).
	rt := ms.HeapInuse + ms.StackInuse + ms.MSpanInuse + ms.MCacheInuse + ms.GCSys + ms.OtherSys + ms.BuckHashSys
	return memSample{heap: ms.HeapAlloc, runtime: rt, rss: rss}
}

func measureIdle(b *testing.B, tr string, n int) {
	g, err := New(Config{AuthTimeout: time.Hour, IdleTimeout: time.Hour}, nopHandler{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: g}
	if tr == "tcp" {
		go func() { _ = g.ServeTCP(ln) }()
	} else {
		go func() { _ = srv.Serve(ln) }()
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
		_ = srv.Close()
		_ = ln.Close()
	}()

	before := sampleMem()
	handshake := []byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	resp := make([]byte, 512)
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatalf("socket (after %d): %v", len(fds), err)
		}
		fds = append(fds, fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			b.Fatalf("connect: %v", err)
		}
		if tr == "ws" {
			if _, err := unix.Write(fd, handshake); err != nil {
				b.Fatal(err)
			}
			var got []byte
			for !bytes.Contains(got, []byte("\r\n\r\n")) {
				m, err := unix.Read(fd, resp)
				if err != nil || m == 0 {
					b.Fatalf("handshake: %v", err)
				}
				got = append(got, resp[:m]...)
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for g.Len() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d connections attached", g.Len(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := sampleMem()
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	b.ReportMetric(per(after.heap, before.heap), "heapB/conn")
	b.ReportMetric(per(after.runtime, before.runtime), "goB/conn")
	b.ReportMetric(per(after.rss, before.rss), "rssB/conn")
	b.Logf("%s: %d idle conns, %d goroutines: heap %.0f B/conn, Go runtime in use %.0f B/conn, RSS %.0f B/conn",
		tr, n, runtime.NumGoroutine(), per(after.heap, before.heap), per(after.runtime, before.runtime), per(after.rss, before.rss))
}
