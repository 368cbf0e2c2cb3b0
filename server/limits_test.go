package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// A user sending faster than user_send_rate is refused with
// TOO_MANY_REQUESTS; another user is unaffected; after a pause the user
// sends again.
func TestUserSendRateLimit(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.UserSendRate = 5 }) // burst 10
	flood := ts.dialOnly(t, "flood", "f1", "phone")
	calm := ts.dialOnly(t, "calm", "c1", "phone")
	ctx := ctx10(t)
	ok, limited := 0, 0
	for i := 0; i < 40; i++ {
		_, err := flood.Send(ctx, &pb.Send{ClientMsgId: flood.NewClientMsgID(), To: "calm", Payload: []byte("x")})
		switch {
		case err == nil:
			ok++
		case client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS):
			limited++
		default:
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if limited == 0 || ok < 10 || ok > 20 {
		t.Fatalf("%d sends stored, %d refused: want the burst of 10 (plus what refilled) stored and the rest refused", ok, limited)
	}
	if _, err := calm.SendText(ctx, "flood", "still fine"); err != nil {
		t.Fatalf("another user was limited: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // 2.5 tokens refill
	if _, err := flood.SendText(ctx, "calm", "after a pause"); err != nil {
		t.Fatalf("send after a pause: %v", err)
	}
	// The same limit holds over HTTP.
	code, body := adminDoBearer(t, ts.httpBase+"/v1/rpc", ts.mint(t, "flood"), 30)
	if code != http.StatusTooManyRequests {
		t.Fatalf("HTTP sends past the rate: last answer %d %v, want 429", code, body)
	}
}

// adminDoBearer posts n sends over /v1/rpc and returns the last answer.
func adminDoBearer(t *testing.T, url, token string, n int) (int, map[string]any) {
	t.Helper()
	var code int
	var body map[string]any
	for i := 0; i < n; i++ {
		code = post(t, url, map[string]string{"Authorization": "Bearer " + token},
			map[string]any{"send": map[string]any{"clientMsgId": "h" + time.Now().Format("150405.000000000"), "to": "calm", "payload": "eA=="}}, &body)
		if code == http.StatusTooManyRequests {
			return code, body
		}
	}
	return code, body
}

// Past conn_rate_per_ip, new TCP connections are closed at once and
// WebSocket upgrades get 429; exempt networks are not limited.
func TestConnRatePerIP(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.ConnRatePerIP = 1; c.ConnRateExempt = []string{"none"} }) // burst 2
	refusedTCP := 0
	for i := 0; i < 5; i++ {
		nc, err := net.Dial("tcp", ts.tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		var b [1]byte
		_, err = nc.Read(b[:])
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			refusedTCP++ // closed by the server rather than left waiting for auth
		}
		defer nc.Close()
	}
	if refusedTCP < 2 {
		t.Fatalf("%d of 5 rapid TCP connections refused, want at least 2 past the burst of 2", refusedTCP)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, _, err := ws.Dial(ctx, ts.wsURL)
	if se, ok := err.(ws.StatusError); !ok || int(se) != http.StatusTooManyRequests {
		t.Fatalf("WebSocket upgrade past the rate: %v, want HTTP 429", err)
	}

	exempt := startServer(t, func(c *server.Config) { c.ConnRatePerIP = 1 }) // loopback exempt by default
	for i := 0; i < 5; i++ {
		c := exempt.dialOnly(t, "u", "d"+string(rune('0'+i)), "t"+string(rune('0'+i)))
		c.Close()
	}
}

// Past api_key_rate, admin requests get 429 with the API's error body.
func TestAPIKeyRate(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.APIKeyRate = 2 }) // burst 4
	last := 0
	for i := 0; i < 10; i++ {
		code, body := adminDo(t, http.MethodGet, ts.httpBase+"/v1/admin/rooms/r1", testAPIKey, nil)
		last = code
		if code == http.StatusTooManyRequests {
			if body["error"].(map[string]any)["code"] != "too_many_requests" {
				t.Fatalf("429 body %v", body)
			}
			break
		}
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("10 rapid requests with one key: last HTTP %d, want 429", last)
	}
}

// authRaw opens a raw WebSocket session as the token's user and returns the
// connection with the server's answer to its Auth.
func authRaw(t *testing.T, ts *testServer, token, deviceID, deviceType string) (*rawConn, *pb.ServerFrame) {
	t.Helper()
	c := dialRawWS(t, ts.wsURL, wire.Proto)
	return c, c.auth(token, deviceID, deviceType)
}

// expectSessionRefused checks a login past max_sessions_per_user: a
// TOO_MANY_REQUESTS error, then a TOO_MANY_REQUESTS disconnect.
func expectSessionRefused(t *testing.T, c *rawConn, f *pb.ServerFrame, what string) {
	t.Helper()
	if f.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS {
		t.Fatalf("%s: answered %v, want ERROR_CODE_TOO_MANY_REQUESTS", what, f)
	}
	if d := c.expectClosed(); d.GetCode() != pb.DisconnectCode_DISCONNECT_CODE_TOO_MANY_REQUESTS {
		t.Fatalf("%s: closed with %v, want DISCONNECT_CODE_TOO_MANY_REQUESTS", what, d)
	}
}

// A user holds at most max_sessions_per_user sessions: the login past it is
// refused with TOO_MANY_REQUESTS while the earlier sessions carry on; a
// login that replaces a session under the kick policy is not counted
// twice; a closed session frees its place; other users are unaffected;
// concurrent logins cannot overshoot the limit.
func TestMaxSessionsPerUser(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.MaxSessionsPerUser = 3 })
	ctx := ctx10(t)
	phone, phoneRec := ts.connect(t, "alice", "d1", "phone", transports[0])
	tablet, _ := ts.connect(t, "alice", "d2", "tablet", transports[1])
	desk, deskRec := ts.connect(t, "alice", "d3", "desktop", transports[2])

	// A fourth device type: refused, over the SDK and on a raw socket.
	_, err := client.Dial(ctx, client.Options{Addr: ts.wsURL, Token: ts.mint(t, "alice"), DeviceID: "d4", DeviceType: "watch"})
	if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS) {
		t.Fatalf("4th session of alice: %v, want TOO_MANY_REQUESTS", err)
	}
	raw, f := authRaw(t, ts, ts.mint(t, "alice"), "d5", "tv")
	expectSessionRefused(t, raw, f, "5th device type")
	// The three earlier sessions are intact: each answers and receives.
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	if _, err := bob.SendText(ctx, "alice", "to all three"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*client.Client{"phone": phone, "tablet": tablet, "desktop": desk} {
		if _, err := c.Ping(ctx); err != nil {
			t.Fatalf("alice's %s after the refusals: %v", name, err)
		}
	}
	eventually(t, "bob's message on alice's phone and desktop", func() bool {
		return len(phoneRec.messages()) == 1 && len(deskRec.messages()) == 1
	})

	// A new phone replaces the old one: it is admitted at the limit, the old
	// phone is kicked, and alice still holds three.
	newPhone, _ := ts.connect(t, "alice", "d6", "phone", transports[2])
	eventually(t, "the old phone kicked", func() bool {
		closed, err := phoneRec.isClosed()
		return closed && isDisconnect(err, pb.DisconnectCode_DISCONNECT_CODE_KICKED)
	})
	if n := ts.sessionCount(t, "alice"); n != 3 {
		t.Fatalf("alice holds %d sessions after a replacing login, want 3", n)
	}
	raw, f = authRaw(t, ts, ts.mint(t, "alice"), "d7", "tv")
	expectSessionRefused(t, raw, f, "a new device type after the replacement")
	if _, err := newPhone.Ping(ctx); err != nil {
		t.Fatalf("the replacing phone: %v", err)
	}

	// Closing a session frees its place.
	tablet.Close()
	eventually(t, "the tablet's session freed", func() bool { return ts.sessionCount(t, "alice") == 2 })
	if _, f := authRaw(t, ts, ts.mint(t, "alice"), "d8", "tv"); f.GetAuthOk() == nil {
		t.Fatalf("a login after a session closed: %v", f)
	}
	if got := ts.Stats().Chat.SessionsRefused; got != 3 {
		t.Fatalf("%d refused logins counted, want 3", got)
	}

	// Twelve concurrent logins of a fresh user: exactly three admitted.
	tok := ts.mint(t, "carol")
	var mu sync.Mutex
	admitted, refused := 0, 0
	conns := make([]*rawConn, 12)
	for i := range conns {
		conns[i] = dialRawWS(t, ts.wsURL, wire.Proto)
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.send(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: tok, DeviceId: fmt.Sprint("c", i), DeviceType: fmt.Sprint("t", i)}}})
			c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			f := c.read()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case f.GetAuthOk() != nil:
				admitted++
			case f.GetError().GetCode() == pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS:
				refused++
			}
		}()
	}
	wg.Wait()
	if admitted != 3 || refused != 9 {
		t.Fatalf("12 concurrent logins: %d admitted, %d refused; want 3 and 9", admitted, refused)
	}
	if n := ts.sessionCount(t, "carol"); n != 3 {
		t.Fatalf("carol holds %d sessions, want 3", n)
	}
}

// sessionCount is how many sessions uid holds, from the admin API.
func (ts *testServer) sessionCount(t *testing.T, uid string) int {
	t.Helper()
	list, err := client.NewAdmin(ts.httpBase, testAPIKey).Sessions(ctx10(t), uid)
	if err != nil {
		t.Fatalf("sessions of %s: %v", uid, err)
	}
	return len(list)
}

// The default is 16 sessions per user; -1 lifts the limit.
func TestMaxSessionsPerUserDefault(t *testing.T) {
	for _, tc := range []struct {
		max, logins, admitted int
	}{{0, 17, 16}, {-1, 24, 24}} {
		ts := startServer(t, func(c *server.Config) { c.MaxSessionsPerUser = tc.max })
		tok := ts.mint(t, "alice")
		n := 0
		for i := range tc.logins {
			c, f := authRaw(t, ts, tok, fmt.Sprint("d", i), fmt.Sprint("t", i))
			if f.GetAuthOk() != nil {
				n++
				continue
			}
			expectSessionRefused(t, c, f, fmt.Sprintf("max_sessions_per_user %d, login %d", tc.max, i+1))
		}
		if n != tc.admitted {
			t.Fatalf("max_sessions_per_user %d: %d of %d logins admitted, want %d", tc.max, n, tc.logins, tc.admitted)
		}
	}
}

// A user flooding requests other than sends (here SyncConversations and
// GetGroup) past user_request_rate is answered TOO_MANY_REQUESTS, on the
// socket and over HTTP; pings still pass; another user is unaffected; after
// a pause the user is served again.
func TestUserRequestRateLimit(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.UserRequestRate = 5 }) // burst 10
	flood := dialRawTCP(t, ts.tcpAddr)
	if f := flood.auth(ts.mint(t, "flood"), "f1", "phone"); f.GetAuthOk() == nil {
		t.Fatalf("auth: %v", f)
	}
	calm := ts.dialOnly(t, "calm", "c1", "phone")
	// 40 requests written at once, a ping in the middle.
	const n = 40
	for i := uint64(1); i <= n; i++ {
		f := &pb.ClientFrame{Id: i, Body: &pb.ClientFrame_SyncConversations{SyncConversations: &pb.SyncConversations{}}}
		if i%2 == 0 {
			f.Body = &pb.ClientFrame_GetGroup{GetGroup: &pb.GetGroup{ConversationId: "g:nosuch"}}
		}
		flood.send(f)
		if i == n/2 {
			flood.send(&pb.ClientFrame{Id: 1000, Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}})
		}
	}
	served, limited, pong := 0, 0, false
	for range n + 1 {
		f := flood.read()
		switch {
		case f == nil:
			t.Fatalf("the flooding connection was closed after %d served, %d limited", served, limited)
		case f.Id == 1000:
			pong = f.GetPong() != nil
		case f.GetError().GetCode() == pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS:
			limited++
		case f.GetConversations() != nil, f.GetError().GetCode() == pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED:
			served++
		default:
			t.Fatalf("unexpected answer %v", f)
		}
	}
	if served < 10 || served > 20 || limited != n-served {
		t.Fatalf("%d requests served, %d refused: want the burst of 10 (plus what refilled) served and the rest TOO_MANY_REQUESTS", served, limited)
	}
	if !pong {
		t.Fatal("a ping amid the flood was not answered")
	}
	t.Logf("%d of %d requests served, %d refused", served, n, limited)
	if got := ts.Stats().Chat.RateLimited; got < uint64(limited) {
		t.Fatalf("rate-limited counter %d, want at least %d", got, limited)
	}
	// The same bucket holds over HTTP; another user is served on both.
	syncConvs := &pb.ClientFrame{Body: &pb.ClientFrame_SyncConversations{SyncConversations: &pb.SyncConversations{}}}
	if status, body := rpc(t, ts, ts.mint(t, "flood"), syncConvs); status != http.StatusTooManyRequests || !strings.Contains(body, "too_many_requests") {
		t.Fatalf("the flooding user over HTTP: %d %s, want 429", status, body)
	}
	ctx := ctx10(t)
	for i := range 8 {
		if _, err := calm.Conversations(ctx, 0, ""); err != nil {
			t.Fatalf("another user's request %d: %v", i, err)
		}
	}
	if status, body := rpc(t, ts, ts.mint(t, "calm"), syncConvs); status != http.StatusOK {
		t.Fatalf("another user over HTTP: %d %s", status, body)
	}
	time.Sleep(500 * time.Millisecond) // 2.5 tokens refill
	flood.send(&pb.ClientFrame{Id: 2000, Body: &pb.ClientFrame_SyncConversations{SyncConversations: &pb.SyncConversations{}}})
	if f := flood.read(); f.GetConversations() == nil {
		t.Fatalf("a request after a pause: %v", f)
	}
}
