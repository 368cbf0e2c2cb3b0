package server_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// A burst of pushes far beyond one receiver's send queue, while the receiver
// does not read: the receiver is not disconnected (pushes past their share
// of its queue are refused for it, not allowed to fill it), every answer
// says how many sessions took the push and how many refused it, the
// receiver gets exactly the pushes taken, /metrics counts the refusals, and
// a stored message sent meanwhile still arrives.
func TestPushBurstRefusedNotDisconnected(t *testing.T) {
	t.Parallel()
	const (
		pushes   = 1500
		workers  = 8
		bodySize = 16 << 10
	)
	ts := startServer(t, func(c *server.Config) {
		c.SendQueueBytes = 256 << 10               // half of it: 8 pushes of 16 KiB
		c.WriteTimeout = time.Minute               // the receiver is slow, not dead
		c.UserRequestRate, c.UserSendRate = -1, -1 // not what is tested
		c.APIKeyRate = 0                           // unlimited
	})
	rc := dialRawTCP(t, ts.tcpAddr)
	if f := rc.auth(ts.mint(t, "bob"), "b1", "phone"); f.GetAuthOk() == nil {
		t.Fatalf("auth: %v", f)
	}
	// ...and reads nothing until the burst is over.

	body := make([]byte, bodySize)
	var (
		mu             sync.Mutex
		taken, refused int
		next           = 0
		wg             sync.WaitGroup
		sentMessage    sync.Once
		messageSeq     uint64
	)
	admin := adminClient(ts)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= pushes {
					return
				}
				if i == pushes/2 {
					sentMessage.Do(func() {
						ack, err := admin.Send(ctx10(t), client.Message{From: "alice", To: "bob", ClientMsgID: "during-burst", Payload: []byte("stored")})
						if err != nil {
							t.Errorf("send during the burst: %v", err)
							return
						}
						messageSeq = ack.Seq
					})
				}
				code, out := adminDo(t, http.MethodPost, ts.httpBase+"/v1/admin/push/users?user_ids=bob&op=7", testAPIKey, body)
				p, okP := out["pushed"].(float64)
				r, okR := out["refused"].(float64)
				if code != 200 || !okP || !okR || p+r != 1 {
					t.Errorf("push %d: HTTP %d %v; want pushed+refused = 1 (one session)", i, code, out)
					return
				}
				mu.Lock()
				taken += int(p)
				refused += int(r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if refused == 0 {
		t.Fatalf("no push was refused: %d taken; the burst did not exceed the queue", taken)
	}

	// Now the receiver reads: everything taken, the stored message, then the
	// pong to a ping sent last (the queue is in order).
	rc.send(&pb.ClientFrame{Id: 99, Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}})
	got, gotMessage := 0, false
	for {
		f := rc.read()
		if f == nil {
			t.Fatalf("receiver disconnected after %d pushes (taken %d, refused %d)", got, taken, refused)
		}
		switch {
		case f.GetDisconnect() != nil:
			t.Fatalf("receiver disconnected: %v (taken %d, refused %d)", f.GetDisconnect(), taken, refused)
		case f.GetPush() != nil:
			got++
		case f.GetMessage() != nil && f.GetMessage().Seq == messageSeq:
			gotMessage = true
		}
		if f.Id == 99 && f.GetPong() != nil {
			break
		}
	}
	if got != taken {
		t.Fatalf("receiver got %d pushes, the answers said %d taken (%d refused)", got, taken, refused)
	}
	if !gotMessage {
		t.Fatalf("the stored message sent during the burst (seq %d) did not arrive", messageSeq)
	}
	_, text := scrape(t, ts, testAPIKey)
	if v := metricValue(t, text, `parley_pushes_total{outcome="refused"}`); int(v) != refused {
		t.Fatalf("/metrics counts %v refused pushes, the answers %d", v, refused)
	}
	if v := metricValue(t, text, `parley_pushes_total{outcome="taken"}`); int(v) != taken {
		t.Fatalf("/metrics counts %v taken pushes, the answers %d", v, taken)
	}
	if v := metricValue(t, text, "parley_slow_consumer_disconnects_total"); v != 0 {
		t.Fatalf("%v slow disconnects", v)
	}
	t.Logf("%d pushes: %d taken, %d refused", pushes, taken, refused)
}

// In a cluster the push answer counts the answering node's sessions only
// and says the push went on to the other nodes; a push to a device key held
// by another node is forwarded, one held here is not.
func TestClusterPushAnswerForwarded(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 2, nil)
	ctx := ctx10(t)
	bob, _ := dialObserved(t, nodes[1], "bob", "b1", "phone")
	alice, _ := dialObserved(t, nodes[0], "alice", "a1", "phone")
	r, err := adminClient(nodes[0]).PushCounted(ctx, client.PushTarget{UserIDs: []string{"alice", "bob"}}, 1, []byte("x"))
	if err != nil || r.Pushed != 1 || r.Refused != 0 || !r.Forwarded {
		t.Fatalf("push to users from node 1: %+v %v; want alice counted, forwarded", r, err)
	}
	r, err = adminClient(nodes[0]).PushCounted(ctx, client.PushTarget{DeviceKeys: []string{bob.AuthOk().SessionId}}, 1, []byte("x"))
	if err != nil || r.Pushed != 0 || !r.Forwarded {
		t.Fatalf("push to bob's device (node 2) from node 1: %+v %v; want 0 here, forwarded", r, err)
	}
	r, err = adminClient(nodes[0]).PushCounted(ctx, client.PushTarget{DeviceKeys: []string{alice.AuthOk().SessionId}}, 1, []byte("x"))
	if err != nil || r.Pushed != 1 || r.Forwarded {
		t.Fatalf("push to alice's device (node 1) from node 1: %+v %v; want 1, not forwarded", r, err)
	}
}
