package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

func TestAccounts(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := ctx10(t)

	creds, err := client.Register(ctx, ts.httpBase, "alice", "alice-password")
	if err != nil || creds.UserID != "alice" || creds.Token == "" || !creds.ExpiresAt.After(time.Now()) {
		t.Fatalf("register: %v %v", creds, err)
	}
	if _, err := client.Register(ctx, ts.httpBase, "alice", "another-password"); !hasCode(err, 409, "conflict") {
		t.Fatalf("second register of alice: %v", err)
	}
	for _, bad := range [][2]string{{"bad:name", "long-enough"}, {"", "long-enough"}, {"bob", "short"}, {strings.Repeat("x", 65), "long-enough"}} {
		if _, err := client.Register(ctx, ts.httpBase, bad[0], bad[1]); !hasCode(err, 400, "bad_request") {
			t.Fatalf("register %q: %v", bad, err)
		}
	}
	if _, err := client.Login(ctx, ts.httpBase, "alice", "wrong-password"); !hasCode(err, 401, "invalid_credentials") {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := client.Login(ctx, ts.httpBase, "nobody", "wrong-password"); !hasCode(err, 401, "invalid_credentials") {
		t.Fatalf("unknown user must look like a wrong password: %v", err)
	}
	login, err := client.Login(ctx, ts.httpBase, "alice", "alice-password")
	if err != nil {
		t.Fatal(err)
	}

	// Logout revokes that token: its live session is closed, it cannot connect
	// again, and other tokens of the user keep working.
	_, rec := ts.connectToken(t, login.Token, "a1", "phone", transports[2])
	if err := client.Logout(ctx, ts.httpBase, login.Token); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the logged-out session closes", func() bool { closed, _ := rec.isClosed(); return closed })
	if _, err := rec.isClosed(); !isDisconnect(err, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED) {
		t.Fatalf("logged-out session ended with %v", err)
	}
	c := dialRawTCP(t, ts.tcpAddr)
	if f := c.auth(login.Token, "a1", "phone"); f.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED {
		t.Fatalf("revoked token connected: %v", f)
	}
	ts.connectToken(t, creds.Token, "a2", "web", transports[0])

	// A password change revokes every earlier token and returns a new one.
	fresh, err := client.ChangePassword(ctx, ts.httpBase, creds.Token, "alice-password", "new-alice-password")
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{creds.Token} {
		c := dialRawWS(t, ts.wsURL, wire.JSON)
		if f := c.auth(old, "a3", "web"); f.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED {
			t.Fatalf("token from before the password change connected: %v", f)
		}
	}
	ts.connectToken(t, fresh.Token, "a4", "web", transports[1])
	if _, err := client.Login(ctx, ts.httpBase, "alice", "alice-password"); err == nil {
		t.Fatal("old password still works")
	}
	if _, err := client.Login(ctx, ts.httpBase, "alice", "new-alice-password"); err != nil {
		t.Fatal(err)
	}

	// The admin API needs its key.
	if _, err := client.MintToken(ctx, ts.httpBase, "wrong-key-0123456789", "bob", time.Hour); !hasCode(err, 401, "unauthenticated") {
		t.Fatalf("mint with a wrong key: %v", err)
	}
	if _, err := client.MintToken(ctx, ts.httpBase, "", "bob", time.Hour); !hasCode(err, 401, "unauthenticated") {
		t.Fatalf("mint without a key: %v", err)
	}
	if _, err := client.MintToken(ctx, ts.httpBase, testAPIKey, "bob", 365*24*time.Hour); !hasCode(err, 400, "bad_request") {
		t.Fatalf("mint past the max TTL: %v", err)
	}
}

func TestHTTPBodiesAreBounded(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	for name, body := range map[string]any{
		"unknown field": map[string]any{"username": "x", "password": "yyyyyyyy", "admin": true},
		"wrong type":    map[string]any{"username": 5},
		"huge":          map[string]any{"username": strings.Repeat("x", 100<<10)},
	} {
		code := post(t, ts.httpBase+"/v1/register", nil, body, nil)
		if code != http.StatusBadRequest && code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: HTTP %d", name, code)
		}
	}
}

func TestRegistrationCanBeDisabled(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.DisableRegistration = true })
	if _, err := client.Register(ctx10(t), ts.httpBase, "alice", "alice-password"); !hasCode(err, 403, "registration_disabled") {
		t.Fatalf("register with registration off: %v", err)
	}
}

// Secrets that the config does not give are generated once, kept with mode
// 0600, and reused on restart.
func TestGeneratedSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := server.New(server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown(ctx10(t))
	p := filepath.Join(dir, "secrets.json")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.json mode %v, want 0600", st.Mode().Perm())
	}
	first, _ := os.ReadFile(p)
	srv, err = server.New(server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown(ctx10(t))
	again, _ := os.ReadFile(p)
	if string(first) != string(again) || !strings.Contains(string(first), "admin_api_keys") {
		t.Fatal("secrets changed across restarts")
	}
}

// A silent connection is closed after the idle timeout; one that pings stays.
func TestHeartbeatTimeout(t *testing.T) {
	// Not parallel: the pinging client must beat a 1.5 s idle timeout.
	ts := startServer(t, func(c *server.Config) {
		c.Heartbeat = time.Second
		c.IdleTimeout = 1500 * time.Millisecond
		c.AuthTimeout = 500 * time.Millisecond
	})
	tok := ts.mint(t, "alice")
	silent := dialRawTCP(t, ts.tcpAddr)
	if f := silent.auth(tok, "s1", "silent"); f.GetAuthOk().GetHeartbeatSeconds() != 1 {
		t.Fatalf("authOk: %v", f)
	}
	pinger, _ := ts.connect(t, "bob", "p1", "pinger", transports[0]) // the SDK pings every heartbeat
	start := time.Now()
	if d := silent.expectClosed(); d.GetCode() != pb.DisconnectCode_DISCONNECT_CODE_HEARTBEAT_TIMEOUT {
		t.Fatalf("silent connection closed with %v", d)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v to close a silent connection", time.Since(start))
	}
	if _, err := pinger.Ping(ctx10(t)); err != nil {
		t.Fatalf("pinging client was closed: %v", err)
	}
	// A connection that never authenticates is closed after the auth timeout
	// (in JSON: a WebSocket that sent no frame has not chosen protobuf).
	mute := dialRawWS(t, ts.wsURL, wire.JSON)
	if d := mute.expectClosed(); d.GetCode() != pb.DisconnectCode_DISCONNECT_CODE_AUTH_TIMEOUT {
		t.Fatalf("unauthenticated connection closed with %v", d)
	}
	eventually(t, "sessions freed", func() bool { return ts.Stats().Sessions == 1 })
}
