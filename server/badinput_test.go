package server_test

import (
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

func wantErrorThenClose(t *testing.T, c *rawConn, code pb.ErrorCode, disc pb.DisconnectCode) {
	t.Helper()
	f := c.read()
	if f == nil || f.GetError() == nil {
		t.Fatalf("want error %v, got %v", code, f)
	}
	if f.GetError().Code != code {
		t.Fatalf("error code = %v, want %v", f.GetError().Code, code)
	}
	d := c.expectClosed()
	if d == nil || d.Code != disc {
		t.Fatalf("disconnect = %v, want %v", d, disc)
	}
}

func TestBadFramesAreRefusedAndClosed(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tok := ts.mint(t, "alice")

	t.Run("tcp length prefix claiming 4 GiB", func(t *testing.T) {
		c := dialRawTCP(t, ts.tcpAddr)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 0xFFFFFFFF)
		c.nc.Write(hdr[:])
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("tcp frame just over the limit", func(t *testing.T) {
		c := dialRawTCP(t, ts.tcpAddr)
		c.writeBytes(make([]byte, 64<<10+1))
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("tcp malformed protobuf", func(t *testing.T) {
		c := dialRawTCP(t, ts.tcpAddr)
		c.writeBytes([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("tcp frame with no known body", func(t *testing.T) {
		c := dialRawTCP(t, ts.tcpAddr)
		c.writeBytes([]byte{0x08, 0x07}) // id=7, no body
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("ws json with unknown field", func(t *testing.T) {
		c := dialRawWS(t, ts.wsURL, wire.JSON)
		c.writeBytes([]byte(`{"id":"1","bogus":{}}`))
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("ws json that is not json", func(t *testing.T) {
		c := dialRawWS(t, ts.wsURL, wire.JSON)
		c.writeBytes([]byte(`{"id":`))
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("ws frame over the limit", func(t *testing.T) {
		c := dialRawWS(t, ts.wsURL, wire.Proto)
		c.writeBytes(make([]byte, 70<<10))
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.DisconnectCode_DISCONNECT_CODE_PROTOCOL_ERROR)
	})
	t.Run("send before auth", func(t *testing.T) {
		c := dialRawWS(t, ts.wsURL, wire.JSON)
		c.writeBytes([]byte(`{"id":"3","send":{"clientMsgId":"x","to":"bob","payload":"aGk="}}`))
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED, pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED)
	})
	t.Run("bad device fields", func(t *testing.T) {
		c := dialRawTCP(t, ts.tcpAddr)
		c.send(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: tok, DeviceId: "", DeviceType: "web"}}})
		wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_BAD_REQUEST, pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED)
	})
	// The server is still healthy after all of the above.
	c := dialRawTCP(t, ts.tcpAddr)
	if f := c.auth(tok, "d1", "cli"); f.GetAuthOk() == nil {
		t.Fatalf("auth after bad input: %v", f)
	}
}

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokensAreChecked(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	now := time.Now()
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": "app", "aud": "parley", "sub": "alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	}
	with := func(k string, v any) jwt.MapClaims {
		c := good()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	secret := []byte(testAppSecret)
	noneTok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good())
	cases := map[string]string{
		"empty":          "",
		"garbage":        "not-a-token",
		"alg none":       noneTok,
		"wrong alg":      sign(t, jwt.SigningMethodHS512, secret, good()),
		"forged key":     sign(t, jwt.SigningMethodHS256, []byte("some-other-secret-0123456789abcdef"), good()),
		"expired":        sign(t, jwt.SigningMethodHS256, secret, with("exp", now.Add(-time.Hour).Unix())),
		"no expiry":      sign(t, jwt.SigningMethodHS256, secret, with("exp", nil)),
		"wrong issuer":   sign(t, jwt.SigningMethodHS256, secret, with("iss", "mallory")),
		"parley issuer":  sign(t, jwt.SigningMethodHS256, secret, with("iss", "parley")), // app secret cannot sign as the server
		"wrong audience": sign(t, jwt.SigningMethodHS256, secret, with("aud", "other")),
		"no subject":     sign(t, jwt.SigningMethodHS256, secret, with("sub", nil)),
		"bad subject":    sign(t, jwt.SigningMethodHS256, secret, with("sub", "a:b")),
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRawWS(t, ts.wsURL, wire.JSON)
			c.send(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Auth{Auth: &pb.Auth{Token: tok, DeviceId: "d1", DeviceType: "web"}}})
			wantErrorThenClose(t, c, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED, pb.DisconnectCode_DISCONNECT_CODE_AUTH_FAILED)
		})
	}
	t.Run("app-minted token works", func(t *testing.T) {
		c := dialRawWS(t, ts.wsURL, wire.JSON)
		if f := c.auth(sign(t, jwt.SigningMethodHS256, secret, good()), "d1", "web"); f.GetAuthOk().GetUserId() != "alice" {
			t.Fatalf("auth with app token: %v", f)
		}
	})
	t.Run("http bearer with a forged token", func(t *testing.T) {
		req, _ := http.NewRequest("GET", ts.httpBase+"/v1/conversations", nil)
		req.Header.Set("Authorization", "Bearer "+cases["forged key"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	})
}

// A user can reach only conversations they are in, and the refusal is the
// same whether or not the conversation exists.
func TestOtherUsersConversationsAreDenied(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	bob := dialRawTCP(t, ts.tcpAddr)
	if f := bob.auth(ts.mint(t, "bob"), "d1", "cli"); f.GetAuthOk() == nil {
		t.Fatal(f)
	}
	bob.send(&pb.ClientFrame{Id: 2, Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "m1", To: "carol", Payload: []byte("secret")}}})
	if f := bob.readUntil(func(f *pb.ServerFrame) bool { return f.Id == 2 }); f.GetSendAck() == nil {
		t.Fatalf("bob's send: %v", f)
	}
	existing, missing := "p:bob:carol", "p:bob:zed"

	aliceTok := ts.mint(t, "alice")
	for _, transport := range []string{"tcp", "ws-proto", "ws-json"} {
		t.Run(transport, func(t *testing.T) {
			var c *rawConn
			switch transport {
			case "tcp":
				c = dialRawTCP(t, ts.tcpAddr)
			case "ws-proto":
				c = dialRawWS(t, ts.wsURL, wire.Proto)
			default:
				c = dialRawWS(t, ts.wsURL, wire.JSON)
			}
			if f := c.auth(aliceTok, "d-"+transport, transport); f.GetAuthOk() == nil {
				t.Fatal(f)
			}
			id := uint64(10)
			for _, conv := range []string{existing, missing} {
				reqs := []*pb.ClientFrame{
					{Body: &pb.ClientFrame_SyncMessages{SyncMessages: &pb.SyncMessages{ConversationId: conv}}},
					{Body: &pb.ClientFrame_History{History: &pb.History{ConversationId: conv}}},
					{Body: &pb.ClientFrame_Delivered{Delivered: &pb.DeliveredAck{ConversationId: conv, Seq: 1}}},
					{Body: &pb.ClientFrame_Read{Read: &pb.ReadAck{ConversationId: conv, Seq: 1}}},
					{Body: &pb.ClientFrame_Send{Send: &pb.Send{ClientMsgId: "x" + conv, ConversationId: conv, Payload: []byte("hi")}}},
				}
				for _, r := range reqs {
					id++
					r.Id = id
					c.send(r)
					f := c.readUntil(func(f *pb.ServerFrame) bool { return f.Id == id })
					if f.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED {
						t.Fatalf("%s %T: got %v, want PERMISSION_DENIED", conv, r.Body, f)
					}
				}
			}
		})
	}
	t.Run("http", func(t *testing.T) {
		var bodies []string
		for _, conv := range []string{existing, missing} {
			for _, q := range []string{"?after=0", "?before=0", ""} {
				req, _ := http.NewRequest("GET", ts.httpBase+"/v1/conversations/"+conv+"/messages"+q, nil)
				req.Header.Set("Authorization", "Bearer "+aliceTok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("%s%s: status %d", conv, q, resp.StatusCode)
				}
				bodies = append(bodies, string(b))
			}
		}
		for _, b := range bodies[1:] {
			if b != bodies[0] {
				t.Fatalf("refusals differ, which leaks existence: %q vs %q", b, bodies[0])
			}
		}
	})
	// Alice's own conversation list does not include Bob's conversation.
	c := dialRawTCP(t, ts.tcpAddr)
	c.auth(aliceTok, "d9", "cli9")
	c.send(&pb.ClientFrame{Id: 99, Body: &pb.ClientFrame_SyncConversations{SyncConversations: &pb.SyncConversations{}}})
	f := c.readUntil(func(f *pb.ServerFrame) bool { return f.Id == 99 })
	if n := len(f.GetConversations().GetConversations()); n != 0 {
		t.Fatalf("alice sees %d conversations, want 0", n)
	}
}
