package server_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// trickle writes b a byte at a time, every gap, until the connection
// fails (the server closed it) or b runs out; it returns when it stopped.
func trickle(nc net.Conn, b []byte, gap time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range b {
			nc.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := nc.Write(b[i : i+1]); err != nil {
				return
			}
			time.Sleep(gap) // the trickle's pace, not a synchronization
		}
	}()
	return done
}

// closedWithin reads from nc until the server closes it and returns how long
// that took from start; it fails when nc is still open at start+limit.
func closedWithin(t *testing.T, nc net.Conn, start time.Time, limit time.Duration, what string) time.Duration {
	t.Helper()
	nc.SetReadDeadline(start.Add(limit))
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("%s: still open after %v", what, limit)
			}
			return time.Since(start)
		}
		if n > 0 {
			t.Logf("%s: server sent %q", what, buf[:n])
		}
	}
}

// Slowloris on the HTTP/WebSocket port: a request header (here a
// WebSocket upgrade) trickled a byte every 100 ms is cut off at
// http_header_timeout; so is a TLS handshake that never comes on the HTTPS
// port. A WebSocket client that upgrades and then trickles a frame without
// ever authenticating is closed at auth_timeout. Well-behaved requests are
// served meanwhile.
func TestHTTPSlowloris(t *testing.T) {
	const headerTimeout = time.Second
	ts := startServer(t, func(c *server.Config) {
		c.HTTPHeaderTimeout = headerTimeout
		c.AuthTimeout = time.Second
	})
	header := []byte("GET /ws HTTP/1.1\r\nHost: " + ts.HTTPAddr() + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Padding: " + string(make([]byte, 200)) + "\r\n\r\n")
	for i := range header {
		if header[i] == 0 {
			header[i] = 'a'
		}
	}
	nc, err := net.Dial("tcp", ts.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	stopped := trickle(nc, header, 100*time.Millisecond) // ~40 s for the whole header
	// Meanwhile an ordinary request is answered.
	resp, err := http.Get(ts.httpBase + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz during a slowloris: %v %v", resp, err)
	}
	resp.Body.Close()
	el := closedWithin(t, nc, start, 4*headerTimeout, "a trickled request header")
	if el < headerTimeout-100*time.Millisecond {
		t.Fatalf("the trickled header was cut after %v, before the %v header timeout", el, headerTimeout)
	}
	nc.Close() // ends the trickle
	<-stopped
	t.Logf("trickled header closed after %v (http_header_timeout %v)", el.Round(10*time.Millisecond), headerTimeout)

	// Upgraded, then trickling a frame (its header says 64 bytes) and never
	// authenticating: closed by the auth timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wsc, br, _, err := ws.Dial(ctx, ts.wsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer wsc.Close()
	if br != nil {
		t.Fatal("the server sent bytes before any frame")
	}
	start = time.Now()
	frame := append([]byte{0x82, 0x80 | 64, 1, 2, 3, 4}, make([]byte, 64)...) // masked binary frame, 64 bytes
	stopped = trickle(wsc, frame, 100*time.Millisecond)
	// No frame completed, so the server has no codec from the client and answers in JSON.
	rc := &rawConn{t: t, nc: wsc, br: bufio.NewReader(wsc), ws: true, codec: wire.JSON}
	if d := rc.expectClosed(); d.GetCode() != pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT {
		t.Fatalf("a trickling unauthenticated WebSocket closed with %v, want AUTH_TIMEOUT", d)
	}
	el = time.Since(start)
	if el > 4*time.Second {
		t.Fatalf("a trickling unauthenticated WebSocket was kept %v (auth timeout 1s)", el)
	}
	wsc.Close()
	<-stopped
	t.Logf("trickling unauthenticated WebSocket closed after %v (auth_timeout 1s)", el.Round(10*time.Millisecond))
}

// On the HTTPS port a client that opens TCP and never sends its ClientHello,
// or trickles it, is closed at http_header_timeout.
func TestHTTPSStalledHandshake(t *testing.T) {
	const headerTimeout = time.Second
	certFile, keyFile, _ := selfSigned(t)
	ts := startServer(t, func(c *server.Config) {
		c.TLSCertFile, c.TLSKeyFile = certFile, keyFile
		c.HTTPHeaderTimeout = headerTimeout
	})
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"silent", nil},
		// A TLS record header announcing a 512-byte handshake message, then a trickle.
		{"trickled ClientHello", append([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}, make([]byte, 64)...)},
	} {
		nc, err := net.Dial("tcp", ts.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var stopped <-chan struct{}
		if tc.bytes != nil {
			stopped = trickle(nc, tc.bytes, 100*time.Millisecond)
		}
		el := closedWithin(t, nc, start, 4*headerTimeout, tc.name)
		if el < headerTimeout-100*time.Millisecond {
			t.Fatalf("%s: closed after %v, before the header timeout", tc.name, el)
		}
		nc.Close()
		if stopped != nil {
			<-stopped
		}
		t.Logf("%s handshake closed after %v (http_header_timeout %v)", tc.name, el.Round(10*time.Millisecond), headerTimeout)
	}
}

// The new limits are validated, and a bad webhook URL is named by its
// position, not quoted (it may carry credentials).
func TestLimitConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*server.Config)
		want string
	}{
		{"sessions", func(c *server.Config) { c.MaxSessionsPerUser = -2 }, "max_sessions_per_user"},
		{"header timeout", func(c *server.Config) { c.HTTPHeaderTimeout = -time.Second }, "http_header_timeout"},
		{"webhook", func(c *server.Config) { c.WebhookURLs = []string{"ftp://hook:s3cret@example.com/?token=s3cret"} }, "webhook_urls[0]"},
	} {
		cfg := server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "off"}
		tc.mod(&cfg)
		srv, err := server.New(cfg)
		if err == nil {
			srv.Shutdown(context.Background())
			t.Fatalf("%s: accepted", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%s: %v, want it to name %s and quote no credentials", tc.name, err, tc.want)
		}
	}
}

// A request body trickled slowly is cut off at http_read_timeout, while
// other requests are answered.
func TestHTTPSlowBody(t *testing.T) {
	const readTimeout = 1500 * time.Millisecond
	ts := startServer(t, func(c *server.Config) {
		c.HTTPHeaderTimeout = time.Second
		c.HTTPReadTimeout = readTimeout
	})
	nc, err := net.Dial("tcp", ts.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	if _, err := nc.Write([]byte("POST /v1/register HTTP/1.1\r\nHost: " + ts.HTTPAddr() +
		"\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 400)
	for i := range body {
		body[i] = ' '
	}
	stopped := trickle(nc, body, 100*time.Millisecond) // ~40 s for the whole body
	resp, err := http.Get(ts.httpBase + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz during a slow body: %v %v", resp, err)
	}
	resp.Body.Close()
	el := closedWithin(t, nc, start, 4*readTimeout, "a trickled request body")
	if el < readTimeout-100*time.Millisecond {
		t.Fatalf("the trickled body was cut after %v, before the %v read timeout", el, readTimeout)
	}
	nc.Close()
	<-stopped
	t.Logf("trickled body closed after %v (http_read_timeout %v)", el.Round(10*time.Millisecond), readTimeout)
}
