package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// The one harness of the server tests: startServer (and startCluster,
// startClusterChildren for several nodes, startChildProc for a node or load
// process in another process), one recorder for everything a client is
// pushed, client.Admin for the admin API and httpDo where the raw HTTP answer
// is under test. A test that shares nothing with others calls t.Parallel: every
// server listens on port 0 in its own directory. Tests that sample the process
// heap, restart on a port they held, or race a short timer do not, and say so
// (Go runs them before the parallel ones, never beside them).

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
		// The tests play an app that mints tokens and messages users
		// before their first login; nosuchuser_test.go covers the default.
		UnknownRecipients: "accept",
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
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

// adminClient is the Go SDK's admin client for ts: tests use it for what it
// covers, and raw HTTP (httpDo) only where the wire itself is under test.
func adminClient(ts *testServer) *client.Admin { return client.NewAdmin(ts.httpBase, testAPIKey) }

// mint gets a token for uid through the admin API.
func (ts *testServer) mint(t testing.TB, uid string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cr, err := adminClient(ts).MintToken(ctx, uid, 0)
	if err != nil {
		t.Fatalf("mint %s: %v", uid, err)
	}
	return cr.Token
}

// httpDo sends one request and returns the answer's status and body,
// failing t when there is no answer. It is for what client.Admin does not
// cover: statuses and bodies as the wire shows them, bearer tokens,
// /metrics and the probes.
func httpDo(t testing.TB, method, url string, hdr map[string]string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// bearer is the header that authenticates as a user's token.
func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// adminGet GETs url with the admin key and returns the status and body.
func adminGet(t testing.TB, url string) (int, string) {
	t.Helper()
	code, b := httpDo(t, http.MethodGet, url, map[string]string{"X-Api-Key": testAPIKey}, nil)
	return code, string(b)
}

// post sends a JSON body and decodes a JSON answer into out (when non-nil).
func post(t testing.TB, url string, hdr map[string]string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	h := map[string]string{"Content-Type": "application/json"}
	maps.Copy(h, hdr)
	code, resp := httpDo(t, http.MethodPost, url, h, b)
	if out != nil {
		json.Unmarshal(resp, out)
	}
	return code
}

// adminDo sends an admin request with a raw body and returns the status and decoded JSON body.
func adminDo(t *testing.T, method, url, key string, body []byte) (int, map[string]any) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/octet-stream"}
	if key != "" {
		h["X-Api-Key"] = key
	}
	code, b := httpDo(t, method, url, h, body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: HTTP %d, body not JSON: %q", method, url, code, b)
	}
	return code, out
}

type tokenResp struct {
	UserID    string    `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// recorder collects everything a client is pushed, and how it closed. Every
// test client records through one (dialRecorded), whatever it looks at.
type recorder struct {
	mu       sync.Mutex
	msgs     []*pb.Message
	receipts []*pb.Receipt
	pushes   []*pb.Push
	typing   []*pb.TypingEvent
	presence []*pb.PresenceEvent
	contacts []*pb.ContactEvent
	hidden   []*pb.HiddenEvent
	convs    []*pb.ConversationEvent
	reacts   []*pb.ReactionUpdate
	chunks   []*pb.StreamChunk
	closeErr error
	closed   bool
}

// record sets o's hooks to append to r.
func (r *recorder) record(o *client.Options) {
	o.OnMessage = func(m *pb.Message) { r.mu.Lock(); r.msgs = append(r.msgs, m); r.mu.Unlock() }
	o.OnReceipt = func(x *pb.Receipt) { r.mu.Lock(); r.receipts = append(r.receipts, x); r.mu.Unlock() }
	o.OnPush = func(p *pb.Push) { r.mu.Lock(); r.pushes = append(r.pushes, p); r.mu.Unlock() }
	o.OnTyping = func(e *pb.TypingEvent) { r.mu.Lock(); r.typing = append(r.typing, e); r.mu.Unlock() }
	o.OnPresence = func(e *pb.PresenceEvent) { r.mu.Lock(); r.presence = append(r.presence, e); r.mu.Unlock() }
	o.OnContact = func(e *pb.ContactEvent) { r.mu.Lock(); r.contacts = append(r.contacts, e); r.mu.Unlock() }
	o.OnHidden = func(h *pb.HiddenEvent) { r.mu.Lock(); r.hidden = append(r.hidden, h); r.mu.Unlock() }
	o.OnConversation = func(e *pb.ConversationEvent) { r.mu.Lock(); r.convs = append(r.convs, e); r.mu.Unlock() }
	o.OnReaction = func(u *pb.ReactionUpdate) { r.mu.Lock(); r.reacts = append(r.reacts, u); r.mu.Unlock() }
	o.OnStreamChunk = func(c *pb.StreamChunk) { r.mu.Lock(); r.chunks = append(r.chunks, c); r.mu.Unlock() }
	o.OnClose = func(err error) { r.mu.Lock(); r.closeErr, r.closed = err, true; r.mu.Unlock() }
}

// snapshot is a copy of what r holds now, safe to read without its lock.
func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{
		msgs: slices.Clone(r.msgs), receipts: slices.Clone(r.receipts), pushes: slices.Clone(r.pushes),
		typing: slices.Clone(r.typing), presence: slices.Clone(r.presence), contacts: slices.Clone(r.contacts),
		hidden: slices.Clone(r.hidden), convs: slices.Clone(r.convs), closeErr: r.closeErr, closed: r.closed,
		reacts: slices.Clone(r.reacts), chunks: slices.Clone(r.chunks),
	}
}

func (r *recorder) messages() []*pb.Message { return r.snapshot().msgs }
func (r *recorder) count() int              { return len(r.messages()) }
func (r *recorder) pushList() []*pb.Push    { return r.snapshot().pushes }
func (r *recorder) pushCount() int          { return len(r.pushList()) }

// counts are how many messages, typing, presence and contact events r holds.
func (r *recorder) counts() (msgs, typing, presence, contacts int) {
	s := r.snapshot()
	return len(s.msgs), len(s.typing), len(s.presence), len(s.contacts)
}

func (r *recorder) typings() []*pb.TypingEvent        { return r.snapshot().typing }
func (r *recorder) presences() []*pb.PresenceEvent    { return r.snapshot().presence }
func (r *recorder) contactEvents() []*pb.ContactEvent { return r.snapshot().contacts }

// presencesOf returns the presence events about uid.
func (r *recorder) presencesOf(uid string) []*pb.Presence {
	var out []*pb.Presence
	for _, ev := range r.presences() {
		if ev.Presence.GetUserId() == uid {
			out = append(out, ev.Presence)
		}
	}
	return out
}

// lastPresence is the last presence change r was pushed (nil before any).
func (r *recorder) lastPresence() *pb.Presence {
	p := r.presences()
	if len(p) == 0 {
		return nil
	}
	return p[len(p)-1].Presence
}

func (r *recorder) lastHidden() *pb.HiddenEvent {
	if h := r.snapshot().hidden; len(h) > 0 {
		return h[len(h)-1]
	}
	return nil
}

func (r *recorder) lastConv() *pb.ConversationEvent {
	if c := r.snapshot().convs; len(c) > 0 {
		return c[len(c)-1]
	}
	return nil
}

// isClosed reports whether the client closed, and with what error.
func (r *recorder) isClosed() (bool, error) {
	s := r.snapshot()
	return s.closed, s.closeErr
}

// dialOnly connects as uid over WebSocket when what it is pushed does not matter.
func (ts *testServer) dialOnly(t *testing.T, uid, deviceID, deviceType string) *client.Client {
	t.Helper()
	c, _ := ts.connect(t, uid, deviceID, deviceType, transports[0])
	return c
}

// httpCode is the HTTP status and API error code of an SDK call's error
// (0 and "" when it is not an HTTP answer).
func httpCode(err error) (int, string) {
	var he *client.HTTPError
	if errors.As(err, &he) {
		return he.Status, he.Code
	}
	return 0, ""
}

func hasCode(err error, status int, code string) bool {
	s, c := httpCode(err)
	return s == status && c == code
}

func isHTTP(err error, status int) bool {
	s, _ := httpCode(err)
	return s == status
}

// isDisconnect reports whether err is the server's Disconnect with code.
func isDisconnect(err error, code pb.DisconnectCode) bool {
	var d *client.DisconnectError
	return errors.As(err, &d) && d.Code == code
}

// transportCase is one way of connecting.
type transportCase struct {
	name  string
	codec wire.Codec
	tcp   bool
}

var transports = []transportCase{
	{"ws-proto", wire.Proto, false},
	{"ws-json", wire.JSON, false},
	{"tcp", wire.Proto, true},
}

func (ts *testServer) addr(tc transportCase) string {
	if tc.tcp {
		return "tcp://" + ts.tcpAddr
	}
	return ts.wsURL
}

// dialRecorded dials with opts, recording everything pushed. It returns the
// error rather than failing, for dials on goroutines of their own; the
// client is closed when t ends.
func dialRecorded(t testing.TB, opts client.Options) (*client.Client, *recorder, error) {
	rec := &recorder{}
	rec.record(&opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, rec, nil
}

// connect dials as uid with a fresh admin-minted token.
func (ts *testServer) connect(t *testing.T, uid, deviceID, deviceType string, tc transportCase) (*client.Client, *recorder) {
	t.Helper()
	return ts.connectToken(t, ts.mint(t, uid), deviceID, deviceType, tc)
}

func (ts *testServer) connectToken(t *testing.T, token, deviceID, deviceType string, tc transportCase) (*client.Client, *recorder) {
	t.Helper()
	c, rec, err := dialRecorded(t, client.Options{
		Addr: ts.addr(tc), Token: token, DeviceID: deviceID, DeviceType: deviceType, Codec: tc.codec,
	})
	if err != nil {
		t.Fatalf("dial %s as %s: %v", tc.name, deviceID, err)
	}
	return c, rec
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
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

// childProc is this test binary run as another process: a server node to
// kill -9, a server under a lowered descriptor limit, or a load process. The
// environment variable in env selects which (see TestMain and the init
// functions); it talks through its stdin and stdout lines.
type childProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // its stdout, a line at a time; closed when that ends
}

// startChildProc starts one. When t ends its stdin is closed (the cue to
// stop, for the children that read it) and it is killed if it has not
// exited within grace (at once for 0).
func startChildProc(t *testing.T, grace time.Duration, env ...string) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &childProc{cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// tell writes one line to the child's stdin.
func (p *childProc) tell(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		t.Fatalf("child process: %v", err)
	}
}

// expect returns the child's next line starting with prefix (logging the
// others), or fails if none comes within the time given.
func (p *childProc) expect(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("child process exited before %s", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
			t.Logf("child process: %s", line)
		case <-timeout:
			t.Fatalf("no %s from a child process within %v", prefix, within)
		}
	}
}
