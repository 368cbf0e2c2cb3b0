package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// push posts to a push endpoint and returns the "pushed" count, failing on non-200.
func (ts *testServer) push(t *testing.T, pathAndQuery string, body string) int {
	t.Helper()
	code, out := adminDo(t, http.MethodPost, ts.httpBase+pathAndQuery, testAPIKey, []byte(body))
	if code != 200 {
		t.Fatalf("POST %s: HTTP %d %v", pathAndQuery, code, out)
	}
	return int(out["pushed"].(float64))
}

func (ts *testServer) roomOnline(t *testing.T, room string) int {
	t.Helper()
	code, out := adminDo(t, http.MethodGet, ts.httpBase+"/v1/admin/rooms/"+room, testAPIKey, nil)
	if code != 200 || out["room"] != room {
		t.Fatalf("GET room %s: HTTP %d %v", room, code, out)
	}
	return int(out["online"].(float64))
}

func waitPush(t *testing.T, rec *recorder, n int, what string) []*pb.Push {
	t.Helper()
	eventually(t, what, func() bool { return rec.pushCount() >= n })
	return rec.pushList()
}

// A push to a user reaches every device, whatever the transport; a push to
// a device key reaches that session only.
func TestPushUsersAndDevices(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	var clients []*client.Client
	var recs []*recorder
	for i, tc := range transports {
		c, r := ts.connect(t, "alice", "dev-"+tc.name, "type-"+tc.name, tc)
		_ = i
		clients = append(clients, c)
		recs = append(recs, r)
	}
	_, bob := ts.connect(t, "bob", "bob-1", "web", transports[0])

	if n := ts.push(t, "/v1/admin/push/users?user_ids=alice&op=1000", "hello \x00 bytes"); n != 3 {
		t.Fatalf("pushed = %d, want 3", n)
	}
	for i, r := range recs {
		p := waitPush(t, r, 1, "push on "+transports[i].name)[0]
		if p.Op != 1000 || string(p.Body) != "hello \x00 bytes" || p.Room != "" {
			t.Fatalf("%s got %v", transports[i].name, p)
		}
	}
	// Several users at once, an offline one counted as nothing.
	if n := ts.push(t, "/v1/admin/push/users?user_ids=alice,bob,nobody&op=7", "x"); n != 4 {
		t.Fatalf("pushed = %d, want 4", n)
	}
	waitPush(t, bob, 1, "bob's push")

	// Device keys: only the named session.
	key := clients[1].AuthOk().SessionId
	if n := ts.push(t, "/v1/admin/push/devices?keys="+key+",no-such-session&op=9", "only you"); n != 1 {
		t.Fatalf("pushed = %d, want 1", n)
	}
	got := waitPush(t, recs[1], 3, "device push")
	if p := got[2]; p.Op != 9 || string(p.Body) != "only you" {
		t.Fatalf("device push = %v", p)
	}
	time.Sleep(100 * time.Millisecond)
	for i, r := range recs {
		want := 2
		if i == 1 {
			want = 3
		}
		if r.pushCount() != want {
			t.Fatalf("%s has %d pushes, want %d", transports[i].name, r.pushCount(), want)
		}
	}
	if bob.pushCount() != 1 {
		t.Fatalf("bob has %d pushes, want 1", bob.pushCount())
	}

	// Push to all sessions on the node.
	if n := ts.push(t, "/v1/admin/push/all?op=-1", ""); n != 4 {
		t.Fatalf("push all = %d, want 4", n)
	}
	if p := waitPush(t, bob, 2, "push all")[1]; p.Op != -1 || len(p.Body) != 0 {
		t.Fatalf("push all = %v", p)
	}
	for i, r := range recs {
		waitPush(t, r, map[bool]int{true: 4, false: 3}[i == 1], "push all on "+transports[i].name)
	}
}

// Rooms: members get room pushes, others do not, nor members after leaving;
// online counts; a closed session leaves its rooms.
func TestPushRoom(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := context.Background()
	a, ra := ts.connect(t, "alice", "a1", "web", transports[0])
	b, rb := ts.connect(t, "bob", "b1", "web", transports[1])
	c, rc := ts.connect(t, "carol", "c1", "web", transports[2])
	_, rd := ts.connect(t, "dave", "d1", "web", transports[0])

	info, err := a.JoinRoom(ctx, "live:42")
	if err != nil || info.Room != "live:42" || info.Online != 1 {
		t.Fatalf("JoinRoom = %v, %v", info, err)
	}
	if info, err = b.JoinRoom(ctx, "live:42"); err != nil || info.Online != 2 {
		t.Fatalf("JoinRoom = %v, %v", info, err)
	}
	if info, err = b.JoinRoom(ctx, "live:42"); err != nil || info.Online != 2 { // idempotent
		t.Fatalf("second JoinRoom = %v, %v", info, err)
	}
	if info, err = c.JoinRoom(ctx, "live:42"); err != nil || info.Online != 3 {
		t.Fatalf("JoinRoom = %v, %v", info, err)
	}
	if _, err := c.JoinRoom(ctx, "bad room!"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("bad room name: %v", err)
	}
	if n := ts.roomOnline(t, "live:42"); n != 3 {
		t.Fatalf("online = %d", n)
	}

	if n := ts.push(t, "/v1/admin/push/room?room=live:42&op=5", "gift"); n != 3 {
		t.Fatalf("pushed = %d, want 3", n)
	}
	for _, r := range []*recorder{ra, rb, rc} {
		if p := waitPush(t, r, 1, "room push")[0]; p.Room != "live:42" || p.Op != 5 || string(p.Body) != "gift" {
			t.Fatalf("room push = %v", p)
		}
	}

	if err := c.LeaveRoom(ctx, "live:42"); err != nil {
		t.Fatal(err)
	}
	if n := ts.roomOnline(t, "live:42"); n != 2 {
		t.Fatalf("online after leave = %d", n)
	}
	if n := ts.push(t, "/v1/admin/push/room?room=live:42&op=6", "again"); n != 2 {
		t.Fatalf("pushed = %d, want 2", n)
	}
	waitPush(t, ra, 2, "second room push")
	waitPush(t, rb, 2, "second room push")
	time.Sleep(100 * time.Millisecond)
	if rc.pushCount() != 1 || rd.pushCount() != 0 {
		t.Fatalf("carol (left) has %d pushes, dave (never joined) %d", rc.pushCount(), rd.pushCount())
	}

	// Closing a session leaves its rooms; an empty room reports 0.
	a.Close()
	b.Close()
	eventually(t, "room emptied", func() bool { return ts.roomOnline(t, "live:42") == 0 })
	if n := ts.push(t, "/v1/admin/push/room?room=live:42&op=6", ""); n != 0 {
		t.Fatalf("push to empty room = %d", n)
	}
}

// A session may be in at most 64 rooms.
func TestRoomLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	ctx := context.Background()
	a, _ := ts.connect(t, "alice", "a1", "web", transports[0])
	for i := range 64 {
		if _, err := a.JoinRoom(ctx, "r"+strings.Repeat("x", i)); err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	if _, err := a.JoinRoom(ctx, "one-too-many"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS) {
		t.Fatalf("65th room: %v", err)
	}
	if _, err := a.JoinRoom(ctx, "rx"); err != nil { // already in it
		t.Fatalf("rejoin: %v", err)
	}
}

// RoomSend is refused unless the server allows client broadcast.
func TestRoomClientSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("refused by default", func(t *testing.T) {
		ts := startServer(t, nil)
		a, _ := ts.connect(t, "alice", "a1", "web", transports[0])
		_, rb := ts.connect(t, "bob", "b1", "web", transports[1])
		if _, err := a.JoinRoom(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		if err := a.RoomSend(ctx, "r1", 1, []byte("hi")); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
			t.Fatalf("RoomSend: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		if rb.pushCount() != 0 {
			t.Fatal("bob got a push")
		}
	})
	t.Run("allowed", func(t *testing.T) {
		ts := startServer(t, func(c *server.Config) { c.RoomClientSend = true })
		for _, tc := range transports {
			t.Run(tc.name, func(t *testing.T) {
				room := "room-" + tc.name
				a, ra := ts.connect(t, "alice", "a-"+tc.name, "type-a-"+tc.name, tc)
				b, rb := ts.connect(t, "bob", "b-"+tc.name, "type-b-"+tc.name, tc)
				c, rc := ts.connect(t, "carol", "c-"+tc.name, "type-c-"+tc.name, tc)
				for _, cl := range []*client.Client{a, b} {
					if _, err := cl.JoinRoom(ctx, room); err != nil {
						t.Fatal(err)
					}
				}
				// Not a member: refused.
				if err := c.RoomSend(ctx, room, 1, []byte("x")); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
					t.Fatalf("non-member RoomSend: %v", err)
				}
				if err := a.RoomSend(ctx, room, 77, []byte("hello room")); err != nil {
					t.Fatal(err)
				}
				p := waitPush(t, rb, 1, "room send")[0]
				if p.Op != 77 || string(p.Body) != "hello room" || p.Room != room {
					t.Fatalf("got %v", p)
				}
				time.Sleep(50 * time.Millisecond)
				if ra.pushCount() != 0 || rc.pushCount() != 0 {
					t.Fatalf("sender got %d, non-member %d", ra.pushCount(), rc.pushCount())
				}
			})
		}
	})
}

// The push API needs the admin key and refuses bad parameters with a JSON 400.
func TestPushAPIErrors(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	base := ts.httpBase
	for _, path := range []string{
		"/v1/admin/push/users?user_ids=a&op=1", "/v1/admin/push/devices?keys=a&op=1",
		"/v1/admin/push/room?room=r&op=1", "/v1/admin/push/all?op=1",
	} {
		for _, key := range []string{"", "wrong-key"} {
			code, out := adminDo(t, http.MethodPost, base+path, key, []byte("x"))
			if code != 401 || out["error"] == nil {
				t.Fatalf("%s key %q: HTTP %d %v", path, key, code, out)
			}
		}
	}
	if code, _ := adminDo(t, http.MethodGet, base+"/v1/admin/rooms/r", "", nil); code != 401 {
		t.Fatalf("room info without key: %d", code)
	}
	bad := []string{
		"/v1/admin/push/users?op=1",
		"/v1/admin/push/users?user_ids=&op=1",
		"/v1/admin/push/users?user_ids=a",
		"/v1/admin/push/users?user_ids=a&op=x",
		"/v1/admin/push/users?user_ids=a&op=99999999999",
		"/v1/admin/push/users?user_ids=a,,b&op=1",
		"/v1/admin/push/users?user_ids=bad%20id&op=1",
		"/v1/admin/push/users?user_ids=" + strings.Repeat("u,", 1000) + "u&op=1",
		"/v1/admin/push/devices?op=1",
		"/v1/admin/push/devices?keys=" + strings.Repeat("k", 65) + "&op=1",
		"/v1/admin/push/room?op=1",
		"/v1/admin/push/room?room=a%20b&op=1",
		"/v1/admin/push/room?room=" + strings.Repeat("r", 129) + "&op=1",
		"/v1/admin/push/all",
	}
	for _, path := range bad {
		code, out := adminDo(t, http.MethodPost, base+path, testAPIKey, nil)
		e, _ := out["error"].(map[string]any)
		if code != 400 || e == nil || e["code"] != "bad_request" {
			t.Fatalf("%s: HTTP %d %v", path, code, out)
		}
	}
	if code, _ := adminDo(t, http.MethodGet, base+"/v1/admin/rooms/"+strings.Repeat("r", 129), testAPIKey, nil); code != 400 {
		t.Fatalf("bad room info: %d", code)
	}
	code, out := adminDo(t, http.MethodPost, base+"/v1/admin/push/all?op=1", testAPIKey, make([]byte, 64<<10+1))
	if code != 413 {
		t.Fatalf("oversized body: HTTP %d %v", code, out)
	}
	// An escaped user id is unescaped.
	if n := ts.push(t, "/v1/admin/push/users?user_ids=a%40b.c&op=1", ""); n != 0 {
		t.Fatalf("pushed = %d", n)
	}
}
