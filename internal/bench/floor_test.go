package bench

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// startFloor starts a floor on loopback ports and returns a config pointing
// at it.
func startFloor(t *testing.T, scenario string) Config {
	t.Helper()
	f, err := StartFloor("127.0.0.1:0", "127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cfg := DefaultConfig(scenario)
	f.Apply(&cfg)
	cfg.Timeout = 30 * time.Second
	cfg.Drain = 5 * time.Second
	return cfg
}

// The load generator runs unchanged against the floor and its checks pass:
// 1:1 over TCP, pipelined, half the receivers online.
func TestFloorUser(t *testing.T) {
	t.Parallel()
	cfg := startFloor(t, "user")
	cfg.Count, cfg.Concurrency, cfg.Pipeline, cfg.Transport = 400, 8, 4, "tcp"
	checkDelivery(t, run(t, cfg, Options{}), 400, 400)

	cfg = startFloor(t, "user")
	cfg.Count, cfg.Concurrency, cfg.Online = 200, 4, 0.5 // WebSocket; 2 of 4 receivers online
	rep := run(t, cfg, Options{})
	if d := rep.Delivery; rep.OK != 200 || d.Acked != 200 || d.Received != d.Expected || d.Expected == 0 || d.Expected >= 200 || d.Lost+d.Duplicated+d.OutOfOrder != 0 {
		t.Errorf("half online: ok %d, delivery %+v", rep.OK, d)
	}
}

// Groups: made by CreateGroup and AddMembers (past 1,000 members), each
// message to every online member but the sending session.
func TestFloorGroup(t *testing.T) {
	t.Parallel()
	cfg := startFloor(t, "group")
	cfg.Count, cfg.Concurrency, cfg.Members, cfg.Online = 300, 4, 5, 0.6
	checkGroupDelivery(t, run(t, cfg, Options{}), 300, 2, 8)

	cfg = startFloor(t, "group")
	cfg.Count, cfg.Concurrency, cfg.Members, cfg.Online, cfg.Pipeline, cfg.Transport = 400, 2, 1200, 0.004, 4, "tcp"
	checkGroupDelivery(t, run(t, cfg, Options{}), 400, 4, 8)

	cfg = startFloor(t, "fanout")
	cfg.Count, cfg.Concurrency, cfg.Pipeline, cfg.Members, cfg.OnlineMembers, cfg.DeliveredAck = 300, 3, 2, 200, 100, true
	checkGroupDelivery(t, run(t, cfg, Options{}), 300, 102, 103)
}

func TestFloorLogin(t *testing.T) {
	t.Parallel()
	cfg := startFloor(t, "login")
	cfg.Count, cfg.Concurrency, cfg.Transport = 300, 10, "tcp"
	rep := run(t, cfg, Options{})
	if rep.Requests != 300 || rep.OK != 300 {
		t.Errorf("requests %d ok %d", rep.Requests, rep.OK)
	}
}

// The floor refuses what it should: a wrong API key, a token not its own, a
// send into a group the sender is not in, a frame it does not serve.
func TestFloorRefuses(t *testing.T) {
	t.Parallel()
	cfg := startFloor(t, "user")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := client.HTTPClient{BaseURL: cfg.HTTPBase}
	if _, err := h.MintToken(ctx, "wrong", "alice", time.Hour); err == nil {
		t.Error("a token minted with a wrong key")
	}
	resp, err := http.Post(cfg.HTTPBase+"/v1/admin/tokens", "application/json", strings.NewReader(`{"user_id":""}`))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no key: %v %v", resp, err)
	}
	if _, err := client.Dial(ctx, client.Options{Addr: cfg.TCPAddr, Token: "alice"}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
		t.Errorf("a foreign token: %v", err)
	}
	got := make(chan *pb.Message, 10)
	dial := func(user string) *client.Client {
		c, err := h.MintToken(ctx, cfg.APIKey, user, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.Dial(ctx, client.Options{Addr: cfg.TCPAddr, Token: c.Token, DeviceID: "d", MaxSendAttempts: 1,
			OnMessage: func(m *pb.Message) {
				if user == "bob" {
					got <- m
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	alice, bob := dial("alice"), dial("bob")
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "x", UserIds: []string{"carol"}})
	if err != nil || !strings.HasPrefix(g.ConversationId, "g:") {
		t.Fatalf("create group: %v %v", g, err)
	}
	if _, err := bob.Send(ctx, &pb.Send{ConversationId: g.ConversationId, Payload: []byte("hi")}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a non-member's send: %v", err)
	}
	if err := bob.AddMembers(ctx, g.ConversationId, "bob"); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Errorf("a non-member adds: %v", err)
	}
	if _, err := bob.Conversations(ctx, 10, ""); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME) {
		t.Errorf("a frame the floor does not serve: %v", err)
	}
	// Seqs grow per conversation; the receiver gets the sender's bytes.
	a1, err := alice.Send(ctx, &pb.Send{To: "bob", Payload: []byte("one")})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := alice.Send(ctx, &pb.Send{To: "bob", Payload: []byte("two")})
	if err != nil || a2.Seq != a1.Seq+1 || a1.ConversationId != a2.ConversationId {
		t.Errorf("acks %v %v (%v)", a1, a2, err)
	}
	for _, want := range []string{"one", "two"} {
		select {
		case m := <-got:
			if string(m.Payload) != want || m.From != "alice" || m.ConversationId != a1.ConversationId {
				t.Errorf("bob got %v, want %q", m, want)
			}
		case <-ctx.Done():
			t.Fatal("bob got nothing")
		}
	}
}
