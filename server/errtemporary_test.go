package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/parleyim/parley/internal/faultfs"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// Every error the server answers says whether it is temporary, so that
// clients need not guess: UNAVAILABLE (a full disk) and TOO_MANY_REQUESTS
// (a rate limit) are, PERMISSION_DENIED is not. Checked on raw sockets in
// both codecs (the field present, not merely defaulted) and in the HTTP
// error body of /v1/rpc.
func TestErrorsSayTemporary(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.UserSendRate = 5 }) // burst 10
	// A second server whose store's disk the test fills; no rate limits, so
	// that sends reach the store until it is full.
	fs := faultfs.New(nil, 1<<40)
	full := startServer(t, func(c *server.Config) {
		c.UserSendRate, c.UserRequestRate = -1, -1
		server.SetStoreFSForTest(c, fs)
	})
	codecs := []wire.Codec{wire.Proto, wire.JSON}
	conns := map[string]*rawConn{}
	tokens := map[string]string{}
	for _, c := range codecs {
		for _, user := range []string{"alice", "flood", "bob"} {
			srv := ts
			if user == "bob" {
				srv = full
			}
			name := user + "-" + c.String()
			tokens[name] = srv.mint(t, name)
			conn := dialRawWS(t, srv.wsURL, c)
			if f := conn.auth(tokens[name], "d1", "cli"); f.GetAuthOk() == nil {
				t.Fatalf("%s: auth: %v", name, f)
			}
			conns[name] = conn
		}
	}
	// send sends on conn as request id until the answer is not an ACK, and
	// returns that answer's error.
	send := func(conn *rawConn, s *pb.Send, tries int) *pb.Error {
		t.Helper()
		for i := 0; i < tries; i++ {
			id := uint64(100 + i)
			s.ClientMsgId = fmt.Sprintf("m%d", id)
			conn.send(&pb.ClientFrame{Id: id, Body: &pb.ClientFrame_Send{Send: s}})
			f := conn.readUntil(func(f *pb.ServerFrame) bool { return f.Id == id })
			if e := f.GetError(); e != nil {
				return e
			}
		}
		t.Fatalf("%d sends, none refused", tries)
		return nil
	}
	check := func(what string, e *pb.Error, code pb.ErrorCode, want bool) {
		t.Helper()
		if e.GetCode() != code {
			t.Fatalf("%s: answered %v, want %s", what, e, code)
		}
		if e.Temporary == nil || *e.Temporary != want {
			t.Fatalf("%s: %s with temporary %s, want %v", what, code, boolPtr(e.Temporary), want)
		}
	}
	// checkHTTP posts one send to /v1/rpc and checks the error body.
	checkHTTP := func(what string, ts *testServer, token string, send map[string]any, status int, code string, want bool) {
		t.Helper()
		var body struct {
			Error struct {
				Code      string `json:"code"`
				Temporary *bool  `json:"temporary"`
			} `json:"error"`
		}
		got := post(t, ts.httpBase+"/v1/rpc", map[string]string{"Authorization": "Bearer " + token}, map[string]any{"send": send}, &body)
		if got != status || body.Error.Code != code {
			t.Fatalf("%s over HTTP: %d %q, want %d %q", what, got, body.Error.Code, status, code)
		}
		if body.Error.Temporary == nil || *body.Error.Temporary != want {
			t.Fatalf("%s over HTTP: temporary %s, want %v", what, boolPtr(body.Error.Temporary), want)
		}
	}

	denied := &pb.Send{ConversationId: "p:bob:zed", Payload: []byte("x")}
	for _, c := range codecs {
		check("a send to another's conversation, "+c.String(), send(conns["alice-"+c.String()], denied, 1),
			pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED, false)
	}
	checkHTTP("a send to another's conversation", ts, tokens["alice-json"],
		map[string]any{"clientMsgId": "h1", "conversationId": "p:bob:zed", "payload": "eA=="},
		http.StatusForbidden, "permission_denied", false)

	for _, c := range codecs {
		check("sends past user_send_rate, "+c.String(), send(conns["flood-"+c.String()], &pb.Send{To: "alice", Payload: []byte("x")}, 40),
			pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS, true)
	}
	checkHTTP("a send past user_send_rate", ts, tokens["flood-json"],
		map[string]any{"clientMsgId": "h2", "to": "alice", "payload": "eA=="},
		http.StatusTooManyRequests, "too_many_requests", true)

	// The disk is full: sends are refused once the store has used the space
	// it had already taken (its write-ahead log is allocated ahead).
	fs.SetBudget(fs.Used())
	for _, c := range codecs {
		check("a send on a full disk, "+c.String(), send(conns["bob-"+c.String()], &pb.Send{To: "alice", Payload: make([]byte, 40<<10)}, 2000),
			pb.ErrorCode_ERROR_CODE_UNAVAILABLE, true)
	}
	checkHTTP("a send on a full disk", full, tokens["bob-json"],
		map[string]any{"clientMsgId": "h3", "to": "alice", "payload": "eA=="},
		http.StatusServiceUnavailable, "unavailable", true)
}

func boolPtr(p *bool) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}
