package server_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
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
