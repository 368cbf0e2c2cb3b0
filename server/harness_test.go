package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

const (
	testAPIKey    = "test-admin-key-0123456789abcdef"
	testAppSecret = "test-app-secret-0123456789abcdef0123456789"
)

type testServer struct {
	*server.Server
	cfg      server.Config
	httpBase string
	wsURL    string
	tcpAddr  string
}

// startServer starts a real server on random loopback ports with its data in
// a fresh directory (or cfg.DataDir when mod sets it).
func startServer(t testing.TB, mod func(*server.Config)) *testServer {
	t.Helper()
	cfg := server.Config{
		DataDir:      t.TempDir(),
		HTTPAddr:     "127.0.0.1:0",
		TCPAddr:      "127.0.0.1:0",
		AdminAPIKeys: []string{testAPIKey},
		AppSecret:    testAppSecret,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ts := &testServer{Server: srv, cfg: cfg, httpBase: "http://" + srv.HTTPAddr(), wsURL: "ws://" + srv.HTTPAddr() + "/ws", tcpAddr: srv.TCPAddr()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ts
}

// post sends a JSON body and decodes a JSON answer into out (when non-nil).
func post(t testing.TB, url string, hdr map[string]string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

type tokenResp struct {
	UserID    string    `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// mint gets a token for uid through the admin API.
func (ts *testServer) mint(t testing.TB, uid string) string {
	t.Helper()
	var tr tokenResp
	if code := post(t, ts.httpBase+"/v1/admin/tokens", map[string]string{"X-Api-Key": testAPIKey}, map[string]any{"user_id": uid}, &tr); code != 200 {
		t.Fatalf("mint %s: HTTP %d", uid, code)
	}
	return tr.Token
}

// rawConn speaks the protocol with no SDK in between, for bad-input tests.
type rawConn struct {
	t     *testing.T
	nc    net.Conn
	br    *bufio.Reader
	ws    bool
	codec wire.Codec
}

func dialRawTCP(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), codec: wire.Proto}
}

func dialRawWS(t *testing.T, url string, codec wire.Codec) *rawConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, br, _, err := ws.Dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if br == nil {
		br = bufio.NewReader(nc)
	}
	return &rawConn{t: t, nc: nc, br: br, ws: true, codec: codec}
}

// writeBytes writes one frame's bytes as-is (over WS as a text frame for JSON,
// binary otherwise; over TCP with the length prefix).
func (c *rawConn) writeBytes(b []byte) {
	c.t.Helper()
	var err error
	if c.ws {
		op := ws.OpBinary
		if c.codec == wire.JSON {
			op = ws.OpText
		}
		err = wsutil.WriteClientMessage(c.nc, op, b)
	} else {
		_, err = c.nc.Write(wire.AppendTCPFrame(nil, b))
	}
	if err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) send(f *pb.ClientFrame) {
	c.t.Helper()
	b, err := wire.EncodeClient(c.codec, f)
	if err != nil {
		c.t.Fatal(err)
	}
	c.writeBytes(b)
}

// read returns the next server frame, or nil when the server closed the connection.
func (c *rawConn) read() *pb.ServerFrame {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var payload []byte
	if c.ws {
		for {
			data, op, err := wsutil.ReadServerData(struct {
				io.Reader
				io.Writer
			}{c.br, c.nc})
			if err != nil {
				return nil
			}
			if op == ws.OpText || op == ws.OpBinary {
				payload = data
				break
			}
		}
	} else {
		var hdr [4]byte
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return nil
		}
		n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
		payload = make([]byte, n)
		if _, err := io.ReadFull(c.br, payload); err != nil {
			return nil
		}
	}
	f := &pb.ServerFrame{}
	if err := wire.DecodeServer(c.codec, payload, f); err != nil {
		c.t.Fatalf("undecodable server frame %q: %v", payload, err)
	}
	return f
}

// readUntil reads frames until one matches, failing if the connection closes first.
func (c *rawConn) readUntil(match func(*pb.ServerFrame) bool) *pb.ServerFrame {
	c.t.Helper()
	for {
		f := c.read()
		if f == nil {
			c.t.Fatal("connection closed before the expected frame")
		}
		if match(f) {
			return f
		}
	}
}

// expectClosed reads until the server closes, returning the Disconnect frame seen (if any).
func (c *rawConn) expectClosed() *pb.Disconnect {
	c.t.Helper()
	var d *pb.Disconnect
	for {
		f := c.read()
		if f == nil {
			return d
		}
		if f.GetDisconnect() != nil {
			d = f.GetDisconnect()
		}
	}
}

func (c *rawConn) auth(token string, deviceID, deviceType string) *pb.ServerFrame {
	c.send(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: token, DeviceId: deviceID, DeviceType: deviceType}}})
	return c.read()
}

// eventually polls cond until it is true or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
